// The board's DRAM as the device model sees it (gati.md 5.1, 14.5; DECISIONS.md 3): a flat byte
// array in stream order (a 256-bit DRAM word holds stream byte 0 in bits [255:248]), with no
// timing of its own. Pages are allocated on first write, so a 512 MiB DRAM costs only what a
// program touches (in 2 MiB chunks, PageArena); reading memory nobody wrote gives 0.
//
// Writes are tracked per page (write_stamp / unwritten_since): a caller that keeps something
// derived from a DRAM range (the CONV block's mapped weights) can tell in a few page compares,
// instead of a byte compare of the range, that no byte of it was written since. Every call that
// can change a byte (write, write_be32, fill, write_pages, clear) stamps the pages it touches;
// page_for_write is the one place a page becomes writable, so no write can miss its stamp.
//
// Every access names who made it ("DWP packet at stream byte 96", "layer 3 CONV image read"), so
// an out-of-range access from a malformed program fails with a message that says where it came
// from instead of crashing.
#pragma once

#include "common/bytes.h"

#include <cstddef>
#include <cstdint>
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
  // A DRAM is one board's memory: not copied, and not moved (its id() names its contents).
  Dram(const Dram&) = delete;
  Dram& operator=(const Dram&) = delete;

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
          f(done, pages_[page] ? static_cast<const std::uint8_t*>(pages_[page] + in_page) : nullptr,
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

  // Write tracking. id() is unique to this Dram in the process (never reused, so a stamp kept
  // from another Dram, even one that lived at the same address, never matches). write_stamp()
  // grows with every page write; unwritten_since(addr, bytes, stamp) is true when no byte of
  // [addr, addr + bytes) can have been written after write_stamp() returned `stamp` (it works
  // per 64 KiB page, so a write next to the range in the same page also counts as a write).
  std::uint64_t id() const { return id_; }
  std::uint64_t write_stamp() const { return stamp_; }
  bool unwritten_since(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stamp) const;

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
  // The page, allocated if needed, with its write stamp advanced: every writer goes through here.
  std::uint8_t* page_for_write(std::uint64_t page);
  std::uint64_t size_;
  std::uint64_t id_;
  std::uint64_t stamp_ = 0;
  // Where the pages live: 2 MiB chunks, 64 KiB-aligned pages handed out in order (so the 32-byte
  // words the blocks load and store as vectors never straddle two cache lines), each chunk
  // asked to be one transparent huge page. The blocks stream over MiB-sized DRAM regions (a
  // split kernel's int32 partial sums: 3.2 MB per piece of resnet's stem), which with 4 KiB
  // pages take a TLB entry every 4 KiB. Fresh chunks read as zeros.
  class PageArena {
   public:
    PageArena() = default;
    PageArena(const PageArena&) = delete;
    PageArena& operator=(const PageArena&) = delete;
    ~PageArena() { release(); }
    std::uint8_t* allocate();  // kPageBytes of zeros
    void release();            // every page handed out, at once
   private:
    static constexpr std::uint64_t kChunkBytes = 2 << 20;
    static constexpr std::size_t kPageAlignment = 64;  // page by page: a cache line
    std::vector<std::uint8_t*> chunks_;                // or pages, one by one (dram.cpp)
    std::uint64_t used_ = kChunkBytes;                 // bytes handed out of the last chunk
  };
  PageArena arena_;
  std::vector<std::uint8_t*> pages_;        // null: never written (reads as zeros)
  std::vector<std::uint64_t> page_stamps_;  // per page: write_stamp() after its last write
};

}  // namespace npukit::device
