// libFuzzer: the dispatch-frame and META readers never crash, and what they accept
// re-serialises byte for byte.
#include "common/error.h"
#include "isa/dispatch.h"
#include "isa/meta.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const ByteSpan stream(data, size);
  try {
    Bytes again;
    for (const auto& frame : isa::parse_dispatch_frames(stream))
      isa::append_dispatch_frame(again, frame.id, frame.payload);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  } catch (const Error&) {
  }
  try {
    Bytes again;
    for (const auto& packet : isa::parse_meta_stream(stream)) {
      switch (packet.type) {
        case isa::MetaType::kReset:
          isa::append_meta_reset(again);
          break;
        case isa::MetaType::kDispatch:
          isa::append_meta_dispatch(again, packet.target);
          break;
        case isa::MetaType::kPayloadSize:
          isa::append_meta_payload_size(again, packet.payload_size);
          break;
        case isa::MetaType::kInstOrigin:
          std::abort();  // the reader rejects it
      }
    }
    // The FPGA ignores the value of a non-zero SIZE word, so the reader accepts any; the
    // writer always puts 6. Same packets, same offsets, same length either way.
    if (again.size() != size || isa::parse_meta_stream(again) != isa::parse_meta_stream(stream))
      std::abort();
  } catch (const Error&) {
  }
  return 0;
}
