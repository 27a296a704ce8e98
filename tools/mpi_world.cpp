#include "tools/mpi_world.h"

#include "common/error.h"

#include <climits>
#include <cstdlib>

#ifdef NPUKIT_HAVE_MPI
#include <mpi.h>
#endif

namespace npukit::tools {

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v && *v) {
      const int n = std::atoi(v);
      if (n >= 1) return n;
    }
  return 1;
}

#ifdef NPUKIT_HAVE_MPI

bool built_with_mpi() { return true; }

namespace {
void check(int status, const char* call) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    fail("MPI: {} failed: {}", call, std::string(text, static_cast<std::size_t>(length)));
  }
}
}  // namespace

MpiWorld::MpiWorld(std::string_view) {
  if (launcher_world_size() <= 1) return;  // not started by mpirun (or one rank): no MPI at all
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Worker threads (common/parallel.h) never call MPI; only the main thread does.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    joined_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

MpiWorld::~MpiWorld() {
  if (joined_) MPI_Finalize();
}

std::vector<std::string> MpiWorld::gather(const std::string& mine) const {
  if (size_ == 1) return {mine};
  if (mine.size() > static_cast<std::size_t>(INT_MAX))
    fail("MPI: rank {} has {} bytes to send, more than one message holds", rank_, mine.size());
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
        "MPI_Gather");
  std::vector<int> offsets(static_cast<std::size_t>(size_), 0);
  std::string all;
  if (rank_ == 0) {
    long long total = 0;
    for (int i = 0; i < size_; ++i) {
      offsets[i] = static_cast<int>(total);
      total += lengths[i];
      if (total > INT_MAX)
        fail("MPI: the ranks' results ({} bytes so far) exceed one message", total);
    }
    all.resize(static_cast<std::size_t>(total));
  }
  check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                    MPI_CHAR, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  if (rank_ == 0)
    for (int i = 0; i < size_; ++i) out.push_back(all.substr(offsets[i], lengths[i]));
  return out;
}

#else

bool built_with_mpi() { return false; }

MpiWorld::MpiWorld(std::string_view command) {
  if (const int n = launcher_world_size(); n > 1)
    fail(
        "this process is one of {} ranks started by mpirun, but this npukit was built without "
        "MPI, so every rank would do all the work: install libopenmpi-dev "
        "(scripts/install-deps.sh) and rebuild (CMake then finds MPI; NPUKIT_MPI=ON), or run "
        "`npukit {}` without mpirun",
        n, command);
}

MpiWorld::~MpiWorld() = default;

std::vector<std::string> MpiWorld::gather(const std::string& mine) const { return {mine}; }

#endif

}  // namespace npukit::tools
