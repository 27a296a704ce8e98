#include "common/npy.h"

#include "common/error.h"
#include "common/file_io.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>

namespace npukit {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

struct DtypeInfo {
  const char* name;
  char kind;  // NumPy type character: f, i, u, b
  std::size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"float32", 'f', 4}, {"float64", 'f', 8}, {"int8", 'i', 1},  {"uint8", 'u', 1},
    {"int16", 'i', 2},   {"int32", 'i', 4},   {"int64", 'i', 8}, {"bool", 'b', 1},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo* find_dtype(char kind, std::size_t size) {
  for (const auto& d : kDtypes)
    if (d.kind == kind && d.size == size) return &d;
  return nullptr;
}

// A cursor over the header's Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string text, const std::string& what) : text_(std::move(text)), what_(what) {}

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) bad(fmt::format("expected '{}'", c));
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      bad("expected a quoted string");
    char quote = text_[pos_++];
    std::size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) bad("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    bad("expected True or False");
  }
  std::int64_t integer() {
    skip_space();
    std::size_t start = pos_;
    std::int64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int digit = text_[pos_] - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) bad("dimension too large");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) bad("expected a non-negative dimension");
    // Python 2 era writers append L to longs.
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return v;
  }
  std::vector<std::int64_t> shape_tuple() {
    expect('(');
    std::vector<std::int64_t> shape;
    while (!accept(')')) {
      shape.push_back(integer());
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }
  bool at_end() {
    skip_space();
    return pos_ >= text_.size();
  }
  [[noreturn]] void bad(const std::string& why) {
    fail("{}: malformed .npy header at character {} ({}): {}", what_, pos_, why, clip(text_));
  }

 private:
  std::string text_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

std::uint32_t load_le(const std::uint8_t* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string descr_for(const DtypeInfo& d) {
  char order = d.size == 1 ? '|' : '<';
  return fmt::format("{}{}{}", order, d.kind, d.size);
}

}  // namespace

std::size_t npy_dtype_size(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d)
    fail(
        "unsupported array dtype '{}' (supported: float32 float64 int8 uint8 int16 int32 int64 "
        "bool)",
        dtype);
  return d->size;
}

std::int64_t NpyArray::element_count() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace {

// Where the header ends (magic, version, length field and header text): checks the magic and the
// version; `bytes` needs to hold the first 12 bytes, or the whole file when it is shorter.
std::size_t npy_header_end(ByteSpan bytes, const std::string& what) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail("{}: not a .npy file (missing the \\x93NUMPY magic at byte 0)", what);
  int major = bytes[6];
  int minor = bytes[7];
  std::size_t len_bytes;
  if (major == 1)
    len_bytes = 2;
  else if (major == 2 || major == 3)
    len_bytes = 4;
  else
    fail("{}: unsupported .npy format version {}.{} (npukit reads 1.0, 2.0 and 3.0)", what, major,
         minor);
  std::size_t prefix = kMagicSize + 2 + len_bytes;
  if (bytes.size() < prefix) fail("{}: truncated .npy file: header length field cut off", what);
  return prefix + load_le(bytes.data() + kMagicSize + 2, static_cast<int>(len_bytes));
}

// The array a header describes, without its data, and how many data bytes follow the header.
struct NpyHeader {
  NpyArray array;
  std::size_t data_offset = 0;
  std::uint64_t data_bytes = 0;
};

// Parses the header at the start of `bytes`, which holds at least npy_header_end bytes or else
// the whole file (then the header is reported truncated).
NpyHeader parse_npy_header(ByteSpan bytes, const std::string& what) {
  const std::size_t end = npy_header_end(bytes, what);
  const std::size_t prefix = bytes[6] == 1 ? kMagicSize + 4 : kMagicSize + 6;
  const std::size_t header_len = end - prefix;
  if (bytes.size() - prefix < header_len)
    fail("{}: truncated .npy file: header says {} bytes but only {} follow", what, header_len,
         bytes.size() - prefix);
  std::string header(reinterpret_cast<const char*>(bytes.data() + prefix), header_len);

  HeaderParser p(header, what);
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
  p.expect('{');
  while (!p.accept('}')) {
    std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr")
      descr = p.string_literal();
    else if (key == "fortran_order")
      fortran_order = p.boolean();
    else if (key == "shape")
      shape = p.shape_tuple();
    else
      p.bad(fmt::format("unknown key '{}'", key));
    if (!p.accept(',')) {
      p.expect('}');
      break;
    }
  }
  if (!p.at_end()) p.bad("text after the closing brace");
  if (!descr || !fortran_order || !shape)
    fail("{}: .npy header lacks one of 'descr', 'fortran_order', 'shape': {}", what, clip(header));

  if (*fortran_order)
    fail(
        "{}: array is stored in Fortran order; npukit needs C order "
        "(re-save with np.save(path, np.ascontiguousarray(a)))",
        what);
  const std::string& d = *descr;
  if (d.size() < 3)
    fail("{}: unsupported dtype descr '{}' (structured or unknown dtypes are not supported)", what,
         clip(d));
  char order = d[0];
  char kind = d[1];
  std::size_t size = 0;
  for (std::size_t i = 2; i < d.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(d[i])) || size > 64)
      fail("{}: unsupported dtype descr '{}'", what, clip(d));
    size = size * 10 + static_cast<std::size_t>(d[i] - '0');
  }
  if (order == '>' && size > 1)
    fail(
        "{}: array is big-endian ('{}'); npukit reads little-endian only "
        "(re-save with a.astype(a.dtype.newbyteorder('<')))",
        what, clip(d));
  if (order != '<' && order != '|' && order != '=' && order != '>')
    fail("{}: unsupported dtype descr '{}'", what, clip(d));
  const DtypeInfo* info = find_dtype(kind, size);
  if (!info)
    fail(
        "{}: unsupported dtype '{}' (supported: float32 float64 int8 uint8 int16 int32 int64 "
        "bool)",
        what, clip(d));

  NpyHeader h;
  NpyArray& array = h.array;
  array.dtype = info->name;
  array.shape = *shape;
  std::uint64_t count = 1;
  for (auto dim : array.shape) {
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / 16 / dim)
      fail("{}: shape is too large", what);
    count *= static_cast<std::uint64_t>(dim);
  }
  h.data_offset = end;
  h.data_bytes = count * info->size;
  return h;
}

[[noreturn]] void npy_truncated(const std::string& what, const NpyHeader& h, std::uint64_t have) {
  fail("{}: truncated .npy data: shape needs {} bytes of {} but the file holds {}", what,
       h.data_bytes, h.array.dtype, have);
}

[[noreturn]] void npy_trailing(const std::string& what, std::uint64_t extra) {
  fail("{}: .npy file has {} bytes after the array data (corrupt or not a single array)", what,
       extra);
}

}  // namespace

NpyArray parse_npy(ByteSpan bytes, const std::string& what) {
  NpyHeader h = parse_npy_header(bytes, what);
  const std::uint64_t have = bytes.size() - h.data_offset;
  if (have < h.data_bytes) npy_truncated(what, h, have);
  if (have > h.data_bytes) npy_trailing(what, have - h.data_bytes);
  const std::uint8_t* data = bytes.data() + h.data_offset;
  h.array.data.assign(data, data + h.data_bytes);
  return std::move(h.array);
}

NpyArray read_npy(const std::string& path) {
  // The header first, then the data read once, straight into the array (read whole and parsed,
  // a 20 MB test set was copied three times: 4 % of `npukit eval`).
  const InputFile f(path, kMaxBinaryFileBytes);
  Bytes head(kMagicSize + 2 + 4);
  head.resize(f.read(head.data(), head.size(), path));
  const std::size_t end = npy_header_end(head, path);
  if (end > head.size()) {
    const std::size_t had = head.size();
    // Bounded by the file's size: a length field cannot make this allocate more than the file.
    head.resize(std::max<std::uint64_t>(had, std::min<std::uint64_t>(end, f.size())));
    head.resize(had + f.read(head.data() + had, head.size() - had, path));
  }
  NpyHeader h = parse_npy_header(head, path);
  // Bytes of data already read with the header (a header shorter than 12 bytes).
  const std::uint64_t early = head.size() - end;
  if (early > h.data_bytes) npy_trailing(path, early - h.data_bytes);
  const std::uint64_t on_disk = f.size() > end ? f.size() - end : 0;
  if (on_disk < h.data_bytes) npy_truncated(path, h, on_disk);  // before allocating for it
  if (on_disk > h.data_bytes) npy_trailing(path, on_disk - h.data_bytes);
  Bytes& data = h.array.data;
  data.resize(static_cast<std::size_t>(h.data_bytes));
  std::copy(head.begin() + static_cast<std::ptrdiff_t>(end), head.end(), data.begin());
  const std::size_t got =
      early + f.read(data.data() + early, static_cast<std::size_t>(h.data_bytes - early), path);
  if (got < h.data_bytes) npy_truncated(path, h, got);  // the file shrank since it was opened
  std::uint8_t more[4096];
  if (const std::size_t extra = f.read(more, sizeof more, path); extra > 0)
    npy_trailing(path, extra);  // or grew
  return std::move(h.array);
}

Bytes encode_npy(const NpyArray& array) {
  const DtypeInfo* info = find_dtype(array.dtype);
  if (!info) npy_dtype_size(array.dtype);  // throws the standard message
  std::uint64_t count = 1;
  for (auto d : array.shape) {
    if (d < 0) fail("cannot write .npy: shape has a negative dimension {}", d);
    count *= static_cast<std::uint64_t>(d);
  }
  if (array.data.size() != count * info->size)
    fail("cannot write .npy: {} bytes of data for a {} array of {} elements", array.data.size(),
         array.dtype, count);

  std::string shape_text = "(";
  for (std::size_t i = 0; i < array.shape.size(); ++i)
    shape_text += fmt::format("{}{}", i ? ", " : "", array.shape[i]);
  if (array.shape.size() == 1) shape_text += ",";
  shape_text += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr_for(*info), shape_text);
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  std::size_t len_bytes = 2;
  int major = 1;
  if (kMagicSize + 2 + 2 + header.size() + 1 > 65535) {
    len_bytes = 4;
    major = 2;
  }
  std::size_t total = kMagicSize + 2 + len_bytes + header.size() + 1;
  header.append(ceil_mod(total, 64) - total, ' ');
  header.push_back('\n');

  Bytes out(kMagic, kMagic + kMagicSize);
  out.push_back(static_cast<std::uint8_t>(major));
  out.push_back(0);
  for (std::size_t i = 0; i < len_bytes; ++i)
    out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  write_file_bytes(path, encode_npy(array));
}

}  // namespace npukit
