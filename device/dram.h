// The board's DRAM as the device model sees it (gati.md 5.1, 14.5; DECISIONS.md 3): a flat byte
// array in stream order (a 256-bit DRAM word holds stream byte 0 in bits [255:248]), with no
// timing of its own. Pages are allocated on first write, so a 512 MiB DRAM costs only what a
// program touches; reading memory nobody wrote gives 0.
//
// Every access names who made it ("DWP packet at stream byte 96", "layer 3 CONV image read"), so
// an out-of-range access from a malformed program fails with a message that says where it came
// from instead of crashing.
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace npukit::device {

inline constexpr std::uint64_t kDefaultDramBytes = 512ull << 20;  // gaticc --ramsize 512

class Dram {
 public:
  // size_bytes: 32-byte aligned, at least one page worth is not required. Throws npukit::Error
  // for 0 or for sizes above 4 GiB (DRAM addresses are 32-bit in every instruction).
  explicit Dram(std::uint64_t size_bytes = kDefaultDramBytes);

  std::uint64_t size() const { return size_; }

  // Throws npukit::Error "<who>: DRAM range [addr, addr+bytes) is outside the <size> bytes of
  // DRAM" when any byte of the range is outside. A zero-length range at addr <= size is fine.
  void check_range(std::uint64_t addr, std::uint64_t bytes, std::string_view who) const;

  void read(std::uint64_t addr, std::span<std::uint8_t> out, std::string_view who) const;
  Bytes read(std::uint64_t addr, std::uint64_t bytes, std::string_view who) const;
  // Whether the bytes at [addr, addr + expected.size()) equal `expected` (no copy is made).
  bool equals(std::uint64_t addr, ByteSpan expected, std::string_view who) const;
  void write(std::uint64_t addr, ByteSpan data, std::string_view who);
  void fill(std::uint64_t addr, std::uint64_t bytes, std::uint8_t value, std::string_view who);

  // In place, for the hot loops that would otherwise copy through a staging buffer: f(done,
  // data, n) for each page piece of [addr, addr + bytes) (range checked, `who` naming the access),
  // data pointing at the n bytes from addr + done in the page, or null in read_pages for a page
  // never written (it reads as zeros). write_pages allocates pages as write does; f must write
  // every one of the n bytes.
  template <typename F>
  void read_pages(std::uint64_t addr, std::uint64_t bytes, std::string_view who, F&& f) const {
    check_range(addr, bytes, who);
    for_each_page(
        addr, bytes,
        [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t done, std::uint64_t n) {
          f(done,
            pages_[page] ? static_cast<const std::uint8_t*>(pages_[page].get() + in_page) : nullptr,
            n);
          return true;
        });
  }
  template <typename F>
  void write_pages(std::uint64_t addr, std::uint64_t bytes, std::string_view who, F&& f) {
    check_range(addr, bytes, who);
    for_each_page(
        addr, bytes,
        [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t done, std::uint64_t n) {
          f(done, page_for_write(page) + in_page, n);
          return true;
        });
  }

  std::uint8_t read_u8(std::uint64_t addr, std::string_view who) const;
  // Big-endian 32-bit values (int32 biases, partial sums).
  std::uint32_t read_be32(std::uint64_t addr, std::string_view who) const;
  void write_be32(std::uint64_t addr, std::uint32_t value, std::string_view who);

  // Bytes of host memory actually allocated for pages (for tests and stats).
  std::uint64_t allocated_bytes() const;
  // Forgets every write (all bytes read as 0 again).
  void clear();

  static constexpr std::uint64_t kPageBytes = 64 * 1024;

 private:
  // The one walk over the pages of [addr, addr + bytes) (range already checked): f(page, in_page,
  // done, n) for each piece of n bytes that lies in page `page` from byte in_page, done bytes
  // from addr. Returns false as soon as f does (equals stops at the first difference).
  template <typename F>
  static bool for_each_page(std::uint64_t addr, std::uint64_t bytes, F&& f) {
    std::uint64_t done = 0;
    while (done < bytes) {
      const std::uint64_t a = addr + done;
      const std::uint64_t page = a / kPageBytes, in_page = a % kPageBytes;
      const std::uint64_t n =
          kPageBytes - in_page < bytes - done ? kPageBytes - in_page : bytes - done;
      if (!f(page, in_page, done, n)) return false;
      done += n;
    }
    return true;
  }
  std::uint8_t* page_for_write(std::uint64_t page);
  std::uint64_t size_;
  std::vector<std::unique_ptr<std::uint8_t[]>> pages_;
};

}  // namespace npukit::device
