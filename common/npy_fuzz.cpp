// libFuzzer target: arbitrary bytes as a .npy file must parse or throw npukit::Error, and what
// parses must encode back to an array that parses to the same shape and data. Read from a file
// (read_npy: the header first, then the data straight into the array), the same bytes must give
// the same array or the same error as parse_npy.
#include "common/error.h"
#include "common/npy.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

// "ok" and the array's bytes, or the error message.
template <typename F>
std::string outcome(F&& f) {
  try {
    const npukit::NpyArray a = f();
    return "ok " + a.dtype + " " + std::to_string(a.shape.size()) + " " +
           std::string(a.data.begin(), a.data.end());
  } catch (const npukit::Error& e) {
    return e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    npukit::NpyArray a = npukit::parse_npy(npukit::ByteSpan(data, size), "fuzz");
    npukit::NpyArray b = npukit::parse_npy(npukit::encode_npy(a), "re-encoded");
    if (b.shape != a.shape || b.data != a.data || b.dtype != a.dtype) std::abort();
  } catch (const npukit::Error&) {
  }
  // The same bytes as a file (an in-memory one: nothing is left behind).
  const int fd = ::memfd_create("npy_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const std::string parsed =
        outcome([&] { return npukit::parse_npy(npukit::ByteSpan(data, size), path); });
    if (outcome([&] { return npukit::read_npy(path); }) != parsed) std::abort();
  }
  ::close(fd);
  return 0;
}
