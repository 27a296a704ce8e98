// Pass 14, allocate_buffers: places every device tensor in one I/O arena so that tensors alive at
// the same time never overlap and dead ones are reused (gaticc's register allocator did the same
// with equal-size ping-pong registers; first-fit over live ranges packs tighter). A tensor is alive
// from the layer that writes it (the host, before the start, for device inputs) to the last layer
// that reads it; device outputs stay alive to the end so the host can read them back from DRAM
// after the run as well as from the dispatch frames. Offsets are multiples of 32 (gati.md 6). A
// tensor occupies its footprint, what its producer writes, or more when a padded depthwise conv
// reads beyond it (DeviceTensor::buffer_bytes).
#include "compiler/backend.h"

#include <algorithm>

namespace npukit::compiler {

void allocate_buffers(const Context& ctx, DeviceProgram& prog) {
  (void)ctx;
  struct Placed {
    std::uint64_t offset, bytes;
    int from, to;
  };
  std::vector<DeviceTensor*> order;
  for (auto& [name, t] : prog.tensors)
    if (t.alias_of.empty()) order.push_back(&t);  // a view lives in its root's buffer
  // Earlier tensors first; among equals, inputs in graph order, then bigger first.
  std::stable_sort(order.begin(), order.end(), [](const DeviceTensor* a, const DeviceTensor* b) {
    if (a->produced_at != b->produced_at) return a->produced_at < b->produced_at;
    return a->buffer_bytes() > b->buffer_bytes();
  });
  std::vector<Placed> placed;
  std::uint64_t arena = 0;
  for (DeviceTensor* t : order) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;  // [offset, end) of live overlaps
    for (const auto& p : placed)
      if (p.from <= t->last_used_at && t->produced_at <= p.to)
        busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    // int32 partial sums start on an OpWidth-4 word (128 bytes; the arena starts on one too,
    // assign_addresses), so no word of them straddles a DRAM page of the device model, whose
    // one-pass tail writes and reads them a word at a time.
    const std::uint64_t align = t->kind == TensorKind::kActivation32 ? kInt32WordBytes : 32;
    std::uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + t->buffer_bytes() <= b) break;
      offset = std::max(offset, ceil_mod(e, align));
    }
    t->arena_offset = offset;
    placed.push_back({offset, t->buffer_bytes(), t->produced_at, t->last_used_at});
    arena = std::max(arena, offset + t->buffer_bytes());
  }
  prog.arena_bytes = ceil_mod(arena, 32);
}

}  // namespace npukit::compiler
