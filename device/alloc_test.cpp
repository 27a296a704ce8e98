// Per-image allocation of the device model (issue 13): a second run of the same program on the
// same Device must reuse the host memory of the first (DRAM pages, per-layer scratch) and give
// bit-identical results to a fresh Device. Counted with a replacement of the global operator new
// in this test binary (common/test_support/alloc_counter.h).
#include "common/parallel.h"
#include "common/test_support/alloc_counter.h"
#include "device/device.h"
#include "device/test_programs.h"

#include <gtest/gtest.h>

namespace npukit::device {
namespace {
using namespace testing;

using test_support::count_allocations;
using Counted = test_support::AllocationCount;

// A two-layer program (CONV then CONV on its output), input and weights from `seed`.
Bytes two_layer_program(std::uint32_t seed, ConvSpec* first = nullptr,
                        std::uint32_t* input_addr = nullptr) {
  const isa::SaArch arch = isa::kArch9x8x8;
  ConvSpec a;
  a.ic = 5, a.kn = 9, a.ih = 12, a.iw = 11, a.quant_shift = 8;
  fill_random(a, seed);
  ConvSpec b;
  b.ic = 9, b.kn = 6, b.ih = a.oh(), b.iw = a.ow(), b.quant_shift = 8, b.dispatch = true,
  b.dispatch_id = 0x77;
  fill_random(b, seed + 1);
  ProgramBuilder pb{arch};
  const Bytes input = pack_activation(arch, a.ic, a.ih * a.iw, a.x);
  const std::uint32_t in_addr = pb.alloc(input.size());
  const std::uint64_t dk = 32 / arch.n_sa;
  const std::uint32_t mid = pb.alloc(up(a.kn, arch.n_sa) * up(a.oh() * a.ow(), dk));
  const std::uint32_t out = pb.alloc(up(b.kn, arch.n_sa) * up(b.oh() * b.ow(), dk));
  pb.add_conv(a, in_addr, mid, pb.alloc(4096));
  pb.add_conv(b, mid, out, pb.alloc(4096));
  pb.finish();
  if (first) *first = a;
  if (input_addr) *input_addr = in_addr;
  return pb.stream(in_addr, input);
}

std::unique_ptr<Device> make_device() {
  DeviceConfig cfg;
  cfg.dram_bytes = 8ull << 20;
  return std::make_unique<Device>(cfg);
}

TEST(DeviceAllocation, SecondRunOfTheSameProgramAllocatesNoMore) {
  const Bytes p1 = two_layer_program(5), p2 = two_layer_program(6);
  auto dev = make_device();
  const Counted first = count_allocations([&] {
    dev->receive_dwp(p1);
    (void)dev->take_dispatch_output();
  });
  const std::uint64_t dram_after_first = dev->dram().allocated_bytes();
  Bytes out2;
  const Counted second = count_allocations([&] {
    dev->receive_dwp(p2);
    out2 = dev->take_dispatch_output();
  });
  std::printf(
      "device allocations: first run %llu bytes in %llu calls, second run %llu bytes in "
      "%llu calls\n",
      static_cast<unsigned long long>(first.bytes), static_cast<unsigned long long>(first.calls),
      static_cast<unsigned long long>(second.bytes), static_cast<unsigned long long>(second.calls));
  EXPECT_EQ(dev->dram().allocated_bytes(), dram_after_first);  // no new DRAM page
  EXPECT_LT(second.bytes, first.bytes);
  // Bit-identical to a fresh device model given the same bytes.
  auto fresh = make_device();
  fresh->receive_dwp(p2);
  const Bytes want = fresh->take_dispatch_output();
  EXPECT_EQ(out2, want);
  EXPECT_FALSE(out2.empty());
}

// What `npukit eval` does per image: the program is sent once, then each image is one input
// packet and a start packet, and the dispatch frames are taken. From the second image on, the
// device model allocates nothing: every buffer it needs was grown by the first.
TEST(DeviceAllocation, SecondImageOfALoadedProgramAllocatesNothing) {
  const isa::SaArch arch = isa::kArch9x8x8;
  ConvSpec first;
  std::uint32_t in_addr = 0;
  const Bytes program = two_layer_program(5, &first, &in_addr);
  auto image = [&](std::uint32_t seed) {
    ConvSpec s = first;
    fill_random(s, seed);  // new input values; the program's weights stay
    Bytes stream;
    isa::append_dwp_packet(stream, in_addr, pack_activation(arch, s.ic, s.ih * s.iw, s.x));
    isa::append_dwp_start(stream);
    return stream;
  };
  const Bytes image2 = image(11), image3 = image(12);
  // One thread: parallel_for's workers keep per-thread tile buffers too, each grown the first
  // time that worker meets the largest layer, which depends on how the work was shared out.
  const unsigned threads = thread_count();
  set_thread_count(1);
  auto dev = make_device();
  Bytes out;                  // trades storage with the device's frame buffer each image
  dev->receive_dwp(program);  // GML and the first image
  dev->take_dispatch_output(out);
  dev->receive_dwp(image2);
  dev->take_dispatch_output(out);
  const Counted third = count_allocations([&] {
    dev->receive_dwp(image3);
    dev->take_dispatch_output(out);
  });
  std::printf("device allocations: a later image %llu bytes in %llu calls\n",
              static_cast<unsigned long long>(third.bytes),
              static_cast<unsigned long long>(third.calls));
  set_thread_count(threads);
  EXPECT_EQ(third.calls, 0u);
  EXPECT_EQ(third.bytes, 0u);
  // The same bytes as a fresh device given the program and that image.
  auto fresh = make_device();
  fresh->receive_dwp(program);
  (void)fresh->take_dispatch_output();
  fresh->receive_dwp(image3);
  EXPECT_EQ(out, fresh->take_dispatch_output());
  EXPECT_FALSE(out.empty());
}

}  // namespace
}  // namespace npukit::device
