#include "device/dram.h"

#include "common/error.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace npukit::device {

namespace {
std::uint64_t next_dram_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Dram::Dram(std::uint64_t size_bytes) : size_(size_bytes), id_(next_dram_id()) {
  if (size_bytes == 0 || size_bytes > (1ull << 32))
    fail("DRAM size {} bytes is not supported: use 1 byte to 4 GiB (addresses are 32-bit)",
         size_bytes);
  pages_.resize(ceil_div(size_bytes, kPageBytes));
  page_stamps_.resize(pages_.size(), 0);
}

void Dram::check_range(std::uint64_t addr, std::uint64_t bytes, std::string_view who) const {
  if (addr > size_ || bytes > size_ - addr)
    fail("{}: DRAM range [0x{:x}, 0x{:x}) is outside the {} bytes (0x{:x}) of DRAM", who, addr,
         addr + bytes, size_, size_);
}

std::uint8_t* Dram::page_for_write(std::uint64_t page) {
  page_stamps_[page] = ++stamp_;
  auto& p = pages_[page];
  if (!p) p = arena_.allocate();
  return p;
}

// Under AddressSanitizer each page is its own heap block instead, so an access past a page's
// end is reported rather than landing in the next page of a chunk.
#if defined(__SANITIZE_ADDRESS__)  // gcc
#define NPUKIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang
#define NPUKIT_ASAN 1
#endif
#endif
#if defined(__linux__) && !defined(NPUKIT_ASAN)
#define NPUKIT_DRAM_CHUNKS 1
#else
#define NPUKIT_DRAM_CHUNKS 0
#endif

std::uint8_t* Dram::PageArena::allocate() {
#if NPUKIT_DRAM_CHUNKS
  if (used_ == kChunkBytes) {
    // A 2 MiB-aligned chunk out of a mapping twice its size (the ends unmapped again).
    void* m =
        mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<std::uint8_t*>(m);
    const std::uint64_t skip =
        (kChunkBytes - reinterpret_cast<std::uintptr_t>(base) % kChunkBytes) % kChunkBytes;
    if (skip) munmap(base, skip);
    munmap(base + skip + kChunkBytes, kChunkBytes - skip);
    std::uint8_t* chunk = base + skip;
    madvise(chunk, kChunkBytes, MADV_HUGEPAGE);  // a hint: without THP the chunk still works
    chunks_.push_back(chunk);
    used_ = 0;
  }
  std::uint8_t* page = chunks_.back() + used_;
  used_ += kPageBytes;
  return page;
#else
  chunks_.push_back(new (std::align_val_t{kPageAlignment}) std::uint8_t[kPageBytes]());
  return chunks_.back();
#endif
}

void Dram::PageArena::release() {
  for (std::uint8_t* chunk : chunks_) {
#if NPUKIT_DRAM_CHUNKS
    munmap(chunk, kChunkBytes);
#else
    ::operator delete[](chunk, std::align_val_t{kPageAlignment});
#endif
  }
  chunks_.clear();
  used_ = kChunkBytes;
}

void Dram::read(std::uint64_t addr, std::span<std::uint8_t> out, std::string_view who) const {
  check_range(addr, out.size(), who);
  for_each_page(
      addr, out.size(),
      [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t done, std::uint64_t n) {
        if (pages_[page])
          std::memcpy(out.data() + done, pages_[page] + in_page, n);
        else
          std::memset(out.data() + done, 0, n);
        return true;
      });
}

bool Dram::equals(std::uint64_t addr, ByteSpan expected, std::string_view who) const {
  check_range(addr, expected.size(), who);
  return for_each_page(
      addr, expected.size(),
      [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t done, std::uint64_t n) {
        const std::uint8_t* want = expected.data() + done;
        if (pages_[page]) return std::memcmp(want, pages_[page] + in_page, n) == 0;
        return std::all_of(want, want + n, [](std::uint8_t b) { return b == 0; });
      });
}

Bytes Dram::read(std::uint64_t addr, std::uint64_t bytes, std::string_view who) const {
  check_range(addr, bytes, who);
  Bytes out(bytes);
  read(addr, out, who);
  return out;
}

void Dram::write(std::uint64_t addr, ByteSpan data, std::string_view who) {
  check_range(addr, data.size(), who);
  for_each_page(
      addr, data.size(),
      [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t done, std::uint64_t n) {
        std::memcpy(page_for_write(page) + in_page, data.data() + done, n);
        return true;
      });
}

void Dram::fill(std::uint64_t addr, std::uint64_t bytes, std::uint8_t value, std::string_view who) {
  check_range(addr, bytes, who);
  for_each_page(addr, bytes,
                [&](std::uint64_t page, std::uint64_t in_page, std::uint64_t, std::uint64_t n) {
                  // Filling a never-written page with zeros changes nothing it would read back.
                  if (value != 0 || pages_[page])
                    std::memset(page_for_write(page) + in_page, value, n);
                  return true;
                });
}

std::uint8_t Dram::read_u8(std::uint64_t addr, std::string_view who) const {
  check_range(addr, 1, who);
  const auto& p = pages_[addr / kPageBytes];
  return p ? p[addr % kPageBytes] : 0;
}

std::uint32_t Dram::read_be32(std::uint64_t addr, std::string_view who) const {
  std::uint8_t b[4];
  read(addr, b, who);
  return load_be32(b);
}

void Dram::write_be32(std::uint64_t addr, std::uint32_t value, std::string_view who) {
  std::uint8_t b[4];
  store_be32(b, value);
  write(addr, b, who);
}

std::uint64_t Dram::allocated_bytes() const {
  std::uint64_t n = 0;
  for (const auto& p : pages_) n += p ? kPageBytes : 0;
  return n;
}

bool Dram::unwritten_since(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stamp) const {
  check_range(addr, bytes, "write tracking");
  if (bytes == 0) return true;
  const std::uint64_t last = (addr + bytes - 1) / kPageBytes;
  for (std::uint64_t page = addr / kPageBytes; page <= last; ++page)
    if (page_stamps_[page] > stamp) return false;
  return true;
}

void Dram::clear() {
  ++stamp_;
  for (std::size_t i = 0; i < pages_.size(); ++i) {
    pages_[i] = nullptr;
    page_stamps_[i] = stamp_;
  }
  arena_.release();
}

}  // namespace npukit::device
