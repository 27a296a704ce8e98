#include "isa/arch.h"

#include "common/error.h"

#include <fmt/core.h>

#include <charconv>
#include <vector>

namespace npukit::isa {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

SaArch SaArch::parse(std::string_view text) {
  auto unsupported = [&]() {
    fail(
        "unsupported systolic-array configuration '{}': Gati v16 supports ROW,COLS,N_SA = "
        "9,4,4 or 9,8,8 (default) or 16,1,16",
        text);
  };
  std::vector<int> parts;
  std::string_view rest = text;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) unsupported();
    parts.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (parts.size() != 3) unsupported();
  SaArch arch{parts[0], parts[1], parts[2]};
  for (const auto& supported : kSupportedArchs)
    if (arch == supported) return arch;
  unsupported();
  return arch;  // not reached
}

std::string SaArch::str() const { return fmt::format("{},{},{}", rows, cols, n_sa); }

}  // namespace npukit::isa
