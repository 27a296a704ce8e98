// The Gati tanh/sigmoid engine's three 129-word Q16 tables (gati-tanh-tables/: interpolation
// points, tanh values, slopes), exactly as the RTL loads them. Data, not arithmetic: the device
// model and the reference kernels each implement the engine independently from these facts.
#pragma once

#include <array>
#include <cstdint>

namespace npukit::isa {

inline constexpr int kTanhTableSize = 129;  // 128 segments, 129 sample points

struct TanhTables {
  std::array<std::uint32_t, kTanhTableSize> points;
  std::array<std::uint32_t, kTanhTableSize> tanh;
  std::array<std::uint32_t, kTanhTableSize> slope;
};

const TanhTables& tanh_tables();

}  // namespace npukit::isa
