// Big-endian byte helpers: every multi-byte value on the Gati wire and in its DRAM is big-endian.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace npukit {

using Bytes = std::vector<std::uint8_t>;
using ByteSpan = std::span<const std::uint8_t>;

// Read-only bytes with shared ownership: a Bytes moved in, or memory some other owner releases
// (read_file_shared's mapping, common/file_io.h). Copies share the bytes.
class SharedBytes {
 public:
  SharedBytes() = default;
  SharedBytes(Bytes bytes)  // NOLINT(google-explicit-constructor): a Bytes is SharedBytes
      : size_(bytes.size()) {
    auto owned = std::make_shared<const Bytes>(std::move(bytes));
    data_ = owned->data();
    owner_ = std::move(owned);
  }
  // The `size` bytes at `data`, kept alive by `owner`.
  SharedBytes(std::shared_ptr<const void> owner, const std::uint8_t* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint8_t* begin() const { return data_; }
  const std::uint8_t* end() const { return data_ + size_; }
  ByteSpan span() const { return {data_, size_}; }
  operator ByteSpan() const { return span(); }  // NOLINT(google-explicit-constructor)
  friend bool operator==(const SharedBytes& a, const SharedBytes& b) {
    return std::ranges::equal(a.span(), b.span());
  }

 private:
  std::shared_ptr<const void> owner_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

inline std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

inline void append_be32(Bytes& out, std::uint32_t v) {
  std::uint8_t b[4];
  store_be32(b, v);
  out.insert(out.end(), b, b + 4);
}

inline std::uint64_t load_be48(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = (v << 8) | p[i];
  return v;
}

inline void append_be48(Bytes& out, std::uint64_t v) {
  for (int i = 5; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// Rounds n up to a multiple of m (the compiler's and RTL's ceil_mod).
constexpr std::uint64_t ceil_mod(std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m * m; }
constexpr std::uint64_t ceil_div(std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m; }

}  // namespace npukit
