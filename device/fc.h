// The FC engine's inner loop (device/fc.cpp, gati.md 6.2): the rows of one 32-neuron weight
// block, as DRAM holds them, against the input vector. Exposed for its per-path test and
// benchmark (device/fc_test.cpp, device/fc_bench.cpp).
#pragma once

#include "common/cpu.h"

#include <cstdint>

namespace npukit::device::detail {

// a[k] += sum over r < count of x[r] * w[32 r + k] for k < 32: `count` whole weight rows of 32
// int8 each. Exact in int32 for the FC input buffer's at most 32768 rows (|sum| <= 2^29).
using FcRows = void (*)(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                        std::uint64_t count);
// The plain loop (the definition); AVX2 (two rows per vpmaddwd); AVX-512 VNNI and AVX-VNNI (four
// rows per vpdpbusd, the weights as w + 128 against the signed inputs).
void fc_rows_scalar(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                    std::uint64_t count);
void fc_rows_avx2(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                  std::uint64_t count);
void fc_rows_avx512vnni(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                        std::uint64_t count);
void fc_rows_avxvnni(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                     std::uint64_t count);
// The path for a level (cpu::resolve'd): the widest the level allows.
FcRows fc_rows_for(Isa level);

}  // namespace npukit::device::detail
