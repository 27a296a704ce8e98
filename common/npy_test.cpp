#include "common/npy.h"
#include "common/scratch_dir.h"

#include "common/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace npukit {
namespace {

using ::testing::HasSubstr;

// Builds a .npy image byte by byte from a header text, independent of encode_npy.
Bytes hand_npy(const std::string& dict, const Bytes& payload, int major = 1) {
  std::string header = dict;
  std::size_t len_bytes = major == 1 ? 2 : 4;
  while ((6 + 2 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  for (std::size_t i = 0; i < len_bytes; ++i)
    out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string error_of(const Bytes& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, ReadsWhatNumpyWritesFloat32) {
  // np.save of np.array([[1.0, -2.5]], np.float32): the exact bytes NumPy 1.24 writes.
  Bytes payload = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0};
  Bytes file = hand_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", payload);
  ASSERT_EQ(file.size(), 128u + 8u);
  NpyArray a = parse_npy(file, "x.npy");
  EXPECT_EQ(a.dtype, "float32");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{1, 2}));
  float v[2];
  std::memcpy(v, a.data.data(), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  // And encode_npy writes those very bytes back.
  EXPECT_EQ(encode_npy(a), file);
}

TEST(Npy, ReadsVersion2HeadersAndKeyOrder) {
  Bytes payload = {1, 2, 3};
  Bytes file = hand_npy("{'shape': (3,), 'fortran_order': False, 'descr': '|i1'}", payload, 2);
  NpyArray a = parse_npy(file, "x.npy");
  EXPECT_EQ(a.dtype, "int8");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(a.data, payload);
}

TEST(Npy, ZeroDimensionalAndEmptyArrays) {
  Bytes payload(8, 0);
  payload[0] = 7;
  NpyArray scalar = parse_npy(
      hand_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", payload), "x.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.element_count(), 1);
  NpyArray empty = parse_npy(
      hand_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }", {}), "x.npy");
  EXPECT_EQ(empty.element_count(), 0);
}

TEST(Npy, RoundTripsEveryDtype) {
  for (std::string dtype :
       {"float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"}) {
    NpyArray a;
    a.dtype = dtype;
    a.shape = {2, 3, 1};
    a.data.resize(6 * npy_dtype_size(dtype));
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::uint8_t>(i * 7);
    if (dtype == "bool")
      for (auto& b : a.data) b &= 1;
    Bytes encoded = encode_npy(a);
    EXPECT_EQ(encoded.size() % 64, a.data.size() % 64) << dtype;
    NpyArray b = parse_npy(encoded, "x.npy");
    EXPECT_EQ(b.dtype, dtype);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
  }
}

TEST(Npy, FileRoundTrip) {
  const npukit::testing::ScratchDir scratch("npy_test");
  const auto path = (scratch / "a.npy").string();
  NpyArray a{"int32", {4}, Bytes(16, 0)};
  a.data[4] = 0xff;
  write_npy(path, a);
  NpyArray b = read_npy(path);
  EXPECT_EQ(b.data, a.data);
}

TEST(Npy, RejectsFortranOrderWithAdvice) {
  std::string msg =
      error_of(hand_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", Bytes(16)));
  EXPECT_THAT(msg, HasSubstr("x.npy"));
  EXPECT_THAT(msg, HasSubstr("Fortran order"));
  EXPECT_THAT(msg, HasSubstr("ascontiguousarray"));
}

TEST(Npy, RejectsBigEndian) {
  std::string msg =
      error_of(hand_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", Bytes(8)));
  EXPECT_THAT(msg, HasSubstr("big-endian"));
  // A one-byte type has no byte order, whatever the prefix says.
  EXPECT_NO_THROW(parse_npy(
      hand_npy("{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", Bytes(2)), "x.npy"));
}

TEST(Npy, RejectsUnsupportedDtypes) {
  EXPECT_THAT(
      error_of(hand_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", Bytes(8))),
      HasSubstr("unsupported dtype '<c8'"));
  EXPECT_THAT(
      error_of(hand_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", Bytes(2))),
      HasSubstr("unsupported dtype"));
  EXPECT_THROW(encode_npy(NpyArray{"complex64", {1}, Bytes(8)}), Error);
}

TEST(Npy, RejectsTruncatedAndMalformedFiles) {
  Bytes good = hand_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", Bytes(16));
  EXPECT_THAT(error_of(Bytes(good.begin(), good.end() - 1)), HasSubstr("truncated .npy data"));
  Bytes extra = good;
  extra.push_back(0);
  EXPECT_THAT(error_of(extra), HasSubstr("after the array data"));
  EXPECT_THAT(error_of(Bytes(good.begin(), good.begin() + 20)), HasSubstr("truncated"));
  EXPECT_THAT(error_of(Bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}), HasSubstr("not a .npy file"));
  Bytes v9 = good;
  v9[6] = 9;
  EXPECT_THAT(error_of(v9), HasSubstr("version 9.0"));
  EXPECT_THAT(error_of(hand_npy("{'descr': '<f4', 'shape': (4,), }", Bytes(16))),
              HasSubstr("lacks"));
  EXPECT_THAT(
      error_of(hand_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,-1), }", Bytes(16))),
      HasSubstr("malformed .npy header"));
  EXPECT_THAT(error_of(hand_npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                "(99999999999, 99999999999, 99999999999), }",
                                Bytes(16))),
              HasSubstr("too large"));
  EXPECT_THAT(error_of(hand_npy(
                  "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", Bytes(4))),
              HasSubstr("malformed"));
}

// read_npy reads the header and then the data straight into the array; whatever a file holds,
// it must come to what parse_npy makes of the same bytes: the same array or the same error.
TEST(Npy, ReadingAFileAgreesWithParsingItsBytes) {
  const npukit::testing::ScratchDir scratch("npy_read");
  const auto path = (scratch / "a.npy").string();
  auto outcome = [&](auto&& f) -> std::string {
    try {
      const NpyArray a = f();
      return a.dtype + ":" + std::to_string(a.shape.size()) + ":" +
             std::string(a.data.begin(), a.data.end());
    } catch (const Error& e) {
      return std::string("error: ") + e.what();
    }
  };
  Bytes payload(40);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 13);
  const Bytes v1 = hand_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 5), }", payload);
  const Bytes v2 =
      hand_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (40,), }", payload, 2);
  // An unpadded header shorter than the 12 bytes read first: data arrives with the header.
  Bytes tiny = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  const std::string dict = "{'descr':'|u1','fortran_order':False,'shape':(1,)}";
  tiny[8] = static_cast<std::uint8_t>(dict.size());
  tiny.insert(tiny.end(), dict.begin(), dict.end());
  tiny.push_back(7);
  // A header length field far larger than the file.
  Bytes liar = v2;
  liar[8] = liar[9] = liar[10] = 0x7f;
  int checked = 0;
  for (const Bytes& whole : {v1, v2, tiny, liar}) {
    for (std::size_t n = 0; n <= whole.size() + 3; ++n) {
      Bytes file(whole.begin(), whole.begin() + std::min(n, whole.size()));
      file.resize(n, 0x55);  // past the end: trailing bytes
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(n));
      const std::string want = outcome([&] { return parse_npy(file, path); });
      EXPECT_EQ(outcome([&] { return read_npy(path); }), want) << "length " << n;
      ++checked;
    }
  }
  EXPECT_GT(checked, 400);
  // Many trailing bytes (more than one probe read) are refused too.
  Bytes big = v1;
  big.resize(v1.size() + 10000, 1);
  write_file_bytes(path, big);
  EXPECT_THAT(outcome([&] { return read_npy(path); }), HasSubstr("10000 bytes after the array"));
}

TEST(Npy, MissingFileNamesThePath) {
  try {
    read_npy("/nonexistent/dir/a.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/dir/a.npy"));
  }
}

}  // namespace
}  // namespace npukit
