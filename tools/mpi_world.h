// The MPI job an `npukit eval` process belongs to when started by `mpirun -n N` (scale-out,
// docs/evidence.md): rank, size, and a gather of every rank's bytes onto rank 0. Built with MPI
// when CMake finds it (NPUKIT_MPI, Debian libopenmpi-dev); without it a process started as one of
// several ranks gets an Error saying so rather than silently doing all the work N times.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npukit::tools {

// How many ranks the MPI launcher started with this process (OpenMPI's OMPI_COMM_WORLD_SIZE,
// MPICH/Hydra's PMI_SIZE), 1 when it was not started by a launcher.
int launcher_world_size();

// Whether this npukit was built with MPI.
bool built_with_mpi();

class MpiWorld {
 public:
  // Joins the job when started by a launcher (MPI_Init), else is a world of one. `command` names
  // the command in the Error thrown when several ranks were started but MPI was not built in.
  explicit MpiWorld(std::string_view command);
  ~MpiWorld();  // MPI_Finalize
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Collective: on rank 0 every rank's `mine` in rank order, on the others nothing.
  std::vector<std::string> gather(const std::string& mine) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool joined_ = false;
};

}  // namespace npukit::tools
