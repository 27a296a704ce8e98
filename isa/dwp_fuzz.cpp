// libFuzzer: the DWP reader never crashes, and whatever it accepts re-serialises byte for byte.
#include "common/error.h"
#include "isa/dwp.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const ByteSpan stream(data, size);
  std::vector<isa::DwpPacket> packets;
  try {
    packets = isa::parse_dwp_stream(stream);
  } catch (const Error&) {
    return 0;
  }
  (void)isa::dwp_warnings(packets);
  Bytes again;
  for (const auto& p : packets) {
    if (p.is_start()) {
      append_be32(again, isa::kDwpSop);
      append_be32(again, 0);
      append_be32(again, p.address);
    } else {
      isa::append_dwp_packet(again, p.address, p.payload);  // must not throw: parse accepted it
    }
  }
  if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  return 0;
}
