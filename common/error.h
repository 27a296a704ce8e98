// The one error type every layer throws for bad input or impossible requests. Messages name the
// thing that is wrong (file, byte offset, instruction, field, layer, tensor) and, where there is
// one, what to do about it. The CLI prints them and exits non-zero; nothing aborts.
#pragma once

#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace npukit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace npukit
