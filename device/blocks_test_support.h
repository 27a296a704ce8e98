// Test support shared by the device-blocks tests, defined in eltwise_test.cpp.
#pragma once

#include "device/block.h"
#include "device/test_programs.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npukit::device {
namespace blocks_testing {
std::size_t layout_offset(int n_sa, std::size_t pixels, std::size_t c, std::size_t p);
std::size_t layout_bytes(int n_sa, std::size_t channels, std::size_t pixels);
Bytes pack_activation(int n_sa, std::size_t channels, std::size_t pixels,
                      const std::vector<std::int8_t>& planar);
Bytes expected_activation(int n_sa, std::size_t channels, std::size_t pixels,
                          const std::vector<std::int8_t>& planar);
std::vector<std::int8_t> random_int8(std::size_t n, unsigned seed);
isa::Instruction output_block(std::uint64_t out_addr, std::uint64_t kernel_itr,
                              std::uint64_t image_dim_output, std::uint64_t oh, std::uint64_t ow);
BlockTiming run_block(BlockFn fn, const isa::SaArch& arch, Dram& dram, Diagnostics& diag,
                      const isa::Instruction& mega, const isa::Instruction* output,
                      const isa::Instruction* tail);
std::string error_of(const std::function<void()>& body);
Bytes run_program_dispatch(const testing::ProgramBuilder& b, std::uint32_t input_addr,
                           const Bytes& input, std::uint32_t dispatch_id,
                           std::vector<Warning>* warnings);
void add_group(testing::ProgramBuilder& b, const isa::Instruction& mega,
               const isa::Instruction& output, const isa::Instruction* tail);
// Scalar and every other path (common/cpu.h) this CPU supports; the ones it lacks are printed
// as skipped.
std::vector<Isa> isa_paths();
}  // namespace blocks_testing
}  // namespace npukit::device
