#include "common/file_io.h"

#include "common/error.h"
#include "common/scratch_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

namespace npukit {
namespace {

using ::testing::HasSubstr;

Bytes random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Below 8 MiB read_file_shared reads into a vector, from 8 MiB into populated mapped memory:
// both give the file's bytes, odd sizes and the empty file included.
TEST(ReadFileShared, GivesTheFileBytesBelowAndAboveTheMappingSize) {
  const testing::ScratchDir dir("file_io");
  for (std::size_t n : {std::size_t{0}, std::size_t{1000}, (std::size_t{8} << 20) - 1,
                        (std::size_t{9} << 20) + 123}) {
    SCOPED_TRACE(n);
    const Bytes want = random_bytes(n, static_cast<unsigned>(n));
    const std::string path = (dir / "f.bin").string();
    write_file(path, want);
    const SharedBytes got = read_file_shared(path, kMaxBinaryFileBytes);
    ASSERT_EQ(got.size(), n);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
    EXPECT_EQ(got, SharedBytes(read_file_bytes(path)));
    // Copies share the bytes.
    const SharedBytes copy = got;
    EXPECT_EQ(copy.data(), got.data());
  }
}

TEST(ReadFileShared, ChecksTheFileAsReadFileBytesDoes) {
  const testing::ScratchDir dir("file_io");
  const std::string big = (dir / "big.bin").string();
  write_file(big, random_bytes(std::size_t{9} << 20, 1));
  for (const std::string& path : {big, dir.str(), (dir / "missing.bin").string()}) {
    for (std::uint64_t limit : {std::uint64_t{8} << 20, kMaxBinaryFileBytes}) {
      SCOPED_TRACE(path + " limit " + std::to_string(limit));
      const std::string bytes_error = error_of([&] { read_file_bytes(path, limit); });
      EXPECT_EQ(error_of([&] { read_file_shared(path, limit); }), bytes_error);
    }
  }
  EXPECT_THAT(error_of([&] { read_file_shared(big, std::uint64_t{8} << 20); }),
              HasSubstr("more than the 8 MiB limit"));
  EXPECT_THAT(error_of([&] { read_file_shared(dir.str(), kMaxBinaryFileBytes); }),
              HasSubstr("is a directory"));
}

}  // namespace
}  // namespace npukit
