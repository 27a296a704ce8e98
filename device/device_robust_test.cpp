// Malformed programs for the blocks device-core owns (CONV, FC, OutputBlock, TailBlock, START) and
// garbage byte streams: the device either runs or throws npukit::Error; never another exception,
// a crash or a hang (CI runs this under ASan + UBSan).
#include "device/device.h"
#include "device/test_programs.h"

#include <gtest/gtest.h>

#include <random>

namespace npukit::device {
namespace {

using namespace testing;

// conv (+ its OutputBlock and TailBlock) -> conv, then START; small enough to run in microseconds.
ProgramBuilder two_layer_program(const isa::SaArch& arch, std::uint32_t* in_addr, Bytes* input) {
  ConvSpec a, b;
  a.ic = 5, a.kn = 6, a.ih = 5, a.iw = 6, a.quant_shift = 8, a.on_chip_acc = false;
  fill_random(a, 1);
  b.ic = 6, b.kn = 4, b.ih = 5, b.iw = 6, b.stride = 2, b.quant_shift = 8, b.dispatch = true;
  fill_random(b, 2);
  ProgramBuilder pb{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  *input = pack_activation(arch, a.ic, 30, a.x);
  *in_addr = pb.alloc(input->size());
  const std::uint32_t mid = pb.alloc(up(6, arch.n_sa) * up(30, dk));
  const std::uint32_t out = pb.alloc(up(4, arch.n_sa) * up(9, dk));
  pb.add_conv(a, *in_addr, mid, pb.alloc(4096));
  pb.add_conv(b, mid, out, pb.alloc(4096));
  pb.finish();
  return pb;
}

// Returns true when the program ran to the end.
bool run_expecting_run_or_error(const isa::SaArch& arch, const Bytes& stream,
                                const std::string& what) {
  DeviceConfig cfg;
  cfg.arch = arch;
  cfg.dram_bytes = 4ull << 20;
  Device dev(cfg);
  try {
    dev.receive_dwp(stream);
    return dev.stats().runs > 0;
  } catch (const Error& e) {
    EXPECT_GT(std::string(e.what()).size(), 10u) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": unexpected " << typeid(e).name() << ": " << e.what();
  }
  return false;
}

TEST(DeviceRobust, EverySingleFieldMutationRunsOrFailsCleanly) {
  std::mt19937_64 rng(2024);
  int ran = 0, total = 0;
  for (const isa::SaArch& arch : isa::kSupportedArchs) {
    std::uint32_t in_addr = 0;
    Bytes input;
    const ProgramBuilder base = two_layer_program(arch, &in_addr, &input);
    for (std::size_t i = 0; i < base.instructions.size(); ++i) {
      const isa::OpcodeInfo& op = isa::info(base.instructions[i].opcode());
      for (const isa::FieldInfo& f : op.fields) {
        const std::uint64_t max = f.max_value();
        for (std::uint64_t value : {std::uint64_t{0}, std::uint64_t{1}, max, max / 2, rng() & max,
                                    (base.instructions[i].get(f.id) + 1) & max,
                                    (base.instructions[i].get(f.id) + 32) & max}) {
          ProgramBuilder p = base;
          p.instructions[i].set(f.id, value);
          ++total;
          ran += run_expecting_run_or_error(
              arch, p.stream(in_addr, input),
              arch.str() + " " + isa::qualified_name(f.id) + " = " + std::to_string(value));
        }
      }
    }
  }
  // Both outcomes occur: harmless mutations (DispatchID, QuantScale, ...) run, the rest fail.
  EXPECT_GT(ran, total / 10) << ran << " of " << total;
  EXPECT_LT(ran, total) << ran << " of " << total;
  std::printf(
      "[ robust ] %d of %d single-field mutations ran, the rest failed with npukit::Error\n", ran,
      total);
}

TEST(DeviceRobust, RandomInstructionWordsAndGarbageStreams) {
  std::mt19937_64 rng(7);
  for (const isa::SaArch& arch : isa::kSupportedArchs) {
    std::uint32_t in_addr = 0;
    Bytes input;
    const ProgramBuilder base = two_layer_program(arch, &in_addr, &input);
    const Bytes good = base.stream(in_addr, input);
    for (int trial = 0; trial < 200; ++trial) {
      Bytes s = good;
      // flip a few bytes in the instruction region (stream bytes 12 .. 12 + (n+1)*32)
      const std::size_t region = 32 * (base.instructions.size() + 1);
      for (int k = 0; k < 1 + trial % 4; ++k)
        s[12 + rng() % region] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      run_expecting_run_or_error(arch, s,
                                 "flipped instruction bits, trial " + std::to_string(trial));
    }
    for (int trial = 0; trial < 100; ++trial) {
      Bytes s(64 + rng() % 512);
      for (auto& b : s) b = static_cast<std::uint8_t>(rng());
      if (trial % 2) {
        // make it start with a plausible header
        s[0] = s[1] = s[2] = s[3] = 0xFF;
      }
      run_expecting_run_or_error(arch, s, "garbage stream, trial " + std::to_string(trial));
    }
  }
}

}  // namespace
}  // namespace npukit::device
