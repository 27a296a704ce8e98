// libFuzzer target: arbitrary bytes as a .npy file must parse or throw npukit::Error, and what
// parses must encode back to an array that parses to the same shape and data.
#include "common/error.h"
#include "common/npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    npukit::NpyArray a = npukit::parse_npy(npukit::ByteSpan(data, size), "fuzz");
    npukit::NpyArray b = npukit::parse_npy(npukit::encode_npy(a), "re-encoded");
    if (b.shape != a.shape || b.data != a.data || b.dtype != a.dtype) std::abort();
  } catch (const npukit::Error&) {
  }
  return 0;
}
