#include "xs3/case_file.h"

#include "common/error.h"
#include "common/file_io.h"
#include "xs3/kernels.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <sstream>

namespace npukit::xs3 {

using nlohmann::json;

const std::vector<std::string>& case_ops() {
  static const std::vector<std::string> ops = {"conv2d_deep",
                                               "conv2d_shallowin",
                                               "conv2d_1x1",
                                               "conv2d_depthwise",
                                               "fully_connected_8",
                                               "fully_connected_16",
                                               "maxpool2d",
                                               "avgpool2d",
                                               "avgpool2d_global",
                                               "requantize_16_to_8",
                                               "fc_deepin_shallowout_16",
                                               "fc_deepin_shallowout_8"};
  return ops;
}

json load_case(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON ({}); a case file is one JSON object, see docs/xs3.md", path,
         clip(e.what(), 200));
  }
}

namespace {

// Field access with errors that say where and what.
class Reader {
 public:
  Reader(const json& c, std::string where) : c_(c), where_(std::move(where)) {
    if (!c_.is_object()) fail("{}: a case file must be a JSON object", where_);
  }

  const json& field(const std::string& path) const {
    const json* node = &c_;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = path.find('.', start);
      const std::string key = path.substr(start, dot - start);
      if (!node->is_object() || !node->contains(key)) {
        fail("{}: missing field \"{}\" (op {})", where_, path, op());
      }
      node = &(*node)[key];
      if (dot == std::string::npos) return *node;
      start = dot + 1;
    }
  }

  bool has(const std::string& key) const { return c_.contains(key); }

  std::int64_t integer(const json& v, const std::string& what, std::int64_t lo,
                       std::int64_t hi) const {
    if (!v.is_number_integer()) {
      fail("{}: {} must be an integer, got {}", where_, what, v.dump());
    }
    const std::int64_t i = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi)
                               ? hi + 1
                               : v.get<std::int64_t>();
    if (i < lo || i > hi) fail("{}: {} = {} is outside [{}, {}]", where_, what, v.dump(), lo, hi);
    return i;
  }

  std::int64_t integer(const std::string& path, std::int64_t lo, std::int64_t hi) const {
    return integer(field(path), "\"" + path + "\"", lo, hi);
  }

  template <typename T>
  std::vector<T> array(const json& v, const std::string& what, std::int64_t lo,
                       std::int64_t hi) const {
    if (!v.is_array()) fail("{}: {} must be an array", where_, what);
    std::vector<T> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      out.push_back(static_cast<T>(integer(v[i], fmt::format("{}[{}]", what, i), lo, hi)));
    }
    return out;
  }

  template <typename T>
  std::vector<T> array(const std::string& path, std::int64_t lo, std::int64_t hi) const {
    return array<T>(field(path), "\"" + path + "\"", lo, hi);
  }

  std::vector<int> shape(const std::string& path, std::size_t rank) const {
    auto s = array<int>(path, 1, 1 << 24);
    if (s.size() != rank) {
      fail("{}: \"{}\" must have {} dimensions for {}, got {}", where_, path, rank, op(), s.size());
    }
    return s;
  }

  // Data of a tensor field {"shape", "data"}, checked against the shape's element count.
  template <typename T>
  std::vector<T> tensor(const std::string& name, std::size_t rank, std::int64_t lo, std::int64_t hi,
                        std::vector<int>* shape_out) const {
    const auto s = shape(name + ".shape", rank);
    std::uint64_t n = 1;
    for (int d : s) n *= std::uint64_t(d);
    if (n > (std::uint64_t{1} << 30)) fail("{}: \"{}\" is too large", where_, name);
    auto data = array<T>(name + ".data", lo, hi);
    if (data.size() != n) {
      fail("{}: \"{}.data\" has {} elements but shape {} needs {}", where_, name, data.size(),
           json(s).dump(), n);
    }
    if (shape_out) *shape_out = s;
    return data;
  }

  Window window() const {
    const auto s = shape("window.shape", 2);
    const auto start = array<int>("window.start", -(1 << 20), 1 << 20);
    const auto stride = array<int>("window.stride", 1, 1 << 20);
    if (start.size() != 2 || stride.size() != 2) {
      fail("{}: \"window.start\" and \"window.stride\" need 2 entries each", where_);
    }
    return Window{s[0], s[1], start[0], start[1], stride[0], stride[1]};
  }

  OutputOptions output() const {
    OutputOptions o;
    if (c_.contains("params") && c_["params"].is_object() &&
        c_["params"].contains("symmetric_saturation")) {
      const json& v = c_["params"]["symmetric_saturation"];
      if (!v.is_boolean()) {
        fail("{}: \"params.symmetric_saturation\" must be true or false", where_);
      }
      o.symmetric = v.get<bool>();
    }
    return o;
  }

  void reject(const std::string& key, const char* why) const {
    if (c_.contains(key)) fail("{}: op {} takes no \"{}\" ({})", where_, op(), key, why);
  }

  std::string op() const {
    return c_.contains("op") && c_["op"].is_string() ? c_["op"].get<std::string>() : "?";
  }
  const std::string& where() const { return where_; }

 private:
  const json& c_;
  std::string where_;
};

ImageShape image(const std::vector<int>& s) { return ImageShape{s[0], s[1], s[2]}; }

template <typename T>
std::vector<std::int64_t> widen(const std::vector<T>& v) {
  return std::vector<std::int64_t>(v.begin(), v.end());
}

constexpr std::int64_t kI8Lo = -128, kI8Hi = 127;

CaseOutput run_conv(const Reader& r, const std::string& op, Isa impl) {
  std::vector<int> xs, ks;
  const auto x = r.tensor<std::int8_t>("x", 3, kI8Lo, kI8Hi, &xs);
  const auto ys = r.shape("y_shape", 3);
  const auto bso = r.array<std::uint16_t>("bso", 0, 0xFFFF);
  CaseOutput out{ys, {}};
  if (op == "conv2d_1x1") {
    r.reject("window", "1x1, stride 1, start (0,0)");
    r.reject("zero_point", "no padding");
    const auto k = r.tensor<std::int8_t>("k", 4, kI8Lo, kI8Hi, &ks);
    if (ks[1] != 1 || ks[2] != 1 || ks[3] != xs[2] || ks[0] != ys[2]) {
      fail("{}: conv2d_1x1 \"k.shape\" must be [C_out={}, 1, 1, C_in={}], got {}", r.where(), ys[2],
           xs[2], json(ks).dump());
    }
    if (ys[0] != xs[0] || ys[1] != xs[1]) {
      fail("{}: conv2d_1x1 \"y_shape\" must keep the input's height and width [{}, {}]", r.where(),
           xs[0], xs[1]);
    }
    out.data = widen(conv2d_1x1(x, image(xs), k, ys[2], bso, r.output(), impl));
    return out;
  }
  ConvParams p;
  p.x = image(xs);
  p.y = image(ys);
  p.window = r.window();
  p.zero_point = static_cast<std::int8_t>(r.integer("zero_point", kI8Lo, kI8Hi));
  p.output = r.output();
  const int rank = op == "conv2d_depthwise" ? 3 : 4;
  const auto k = r.tensor<std::int8_t>("k", std::size_t(rank), kI8Lo, kI8Hi, &ks);
  if (op == "conv2d_depthwise") {
    if (ks != std::vector<int>{p.window.height, p.window.width, xs[2]}) {
      fail("{}: conv2d_depthwise \"k.shape\" must be [K_h, K_w, C] = [{}, {}, {}], got {}",
           r.where(), p.window.height, p.window.width, xs[2], json(ks).dump());
    }
    out.data = widen(conv2d_depthwise(x, k, bso, p, impl));
    return out;
  }
  if (ks[0] != ys[2] || ks[1] != p.window.height || ks[3] != xs[2]) {
    fail(
        "{}: {} \"k.shape\" {} does not match C_out = {} (y_shape), K_h = {} (window) and "
        "C_in = {} (x)",
        r.where(), op, json(ks).dump(), ys[2], p.window.height, xs[2]);
  }
  if (op == "conv2d_shallowin") {
    if (xs[2] > 32 || 32 % xs[2] != 0 || ks[2] != 32 / xs[2]) {
      fail(
          "{}: conv2d_shallowin \"k.shape\" must be [C_out, K_h, 32/C_in, C_in] with C_in in "
          "{{4, 8, 16, 32}}, got {}",
          r.where(), json(ks).dump());
    }
    out.data = widen(conv2d_shallowin(x, k, bso, p));
  } else {
    if (ks[2] != p.window.width) {
      fail("{}: conv2d_deep \"k.shape\"[2] = {} must equal the window width {}", r.where(), ks[2],
           p.window.width);
    }
    out.data = widen(conv2d_deep(x, k, bso, p, impl));
  }
  return out;
}

CaseOutput run_fc(const Reader& r, const std::string& op, Isa impl) {
  std::vector<int> xs, ks;
  const auto x = r.tensor<std::int8_t>("x", 1, kI8Lo, kI8Hi, &xs);
  const auto k = r.tensor<std::int8_t>("k", 2, kI8Lo, kI8Hi, &ks);
  const auto ys = r.shape("y_shape", 1);
  if (ks[0] != ys[0] || ks[1] != xs[0]) {
    fail("{}: {} \"k.shape\" must be [C_out={}, C_in={}], got {}", r.where(), op, ys[0], xs[0],
         json(ks).dump());
  }
  CaseOutput out{ys, {}};
  if (op == "fc_deepin_shallowout_16" || op == "fc_deepin_shallowout_8") {
    r.reject("bso", "the legacy API takes params bias, shifts and scales");
    LegacyFcParams p;
    p.bias = r.array<std::int32_t>("params.bias", -std::int64_t{0x7FFFFFFF} - 1, 0x7FFFFFFF);
    p.shifts = r.array<int>("params.shifts", -32768, 32767);
    p.scales = r.array<std::int16_t>("params.scales", -32768, 32767);
    out.data = op == "fc_deepin_shallowout_16" ? widen(fc_deepin_shallowout_16(x, k, ys[0], p))
                                               : widen(fc_deepin_shallowout_8(x, k, ys[0], p));
    return out;
  }
  const auto bso = r.array<std::uint16_t>("bso", 0, 0xFFFF);
  if (op == "fully_connected_16") {
    if (r.output().symmetric) {
      fail("{}: fully_connected_16 has no symmetric_saturation option (16-bit output)", r.where());
    }
    out.data = widen(fully_connected_16(x, k, ys[0], bso));
  } else {
    out.data = widen(fully_connected_8(x, k, ys[0], bso, r.output(), impl));
  }
  return out;
}

CaseOutput run_pool(const Reader& r, const std::string& op) {
  std::vector<int> xs;
  const auto x = r.tensor<std::int8_t>("x", 3, kI8Lo, kI8Hi, &xs);
  r.reject("zero_point", "pooling has no padding");
  r.reject("bso", "pooling has no BSO");
  if (op == "avgpool2d_global") {
    const auto ys = r.shape("y_shape", 1);
    if (ys[0] != xs[2]) fail("{}: \"y_shape\" must be [C] = [{}]", r.where(), xs[2]);
    const auto bias = r.integer("params.bias", -std::int64_t{0x7FFFFFFF} - 1, 0x7FFFFFFF);
    const auto scale = r.integer("params.scale", -128, 127);
    const auto shift = r.integer("params.shift", -32768, 65535);
    return {ys, widen(avgpool2d_global(x, image(xs), std::int32_t(bias), int(scale), int(shift),
                                       r.output()))};
  }
  PoolParams p;
  p.x = image(xs);
  p.y = image(r.shape("y_shape", 3));
  p.window = r.window();
  p.output = r.output();
  const std::vector<int> ys{p.y.height, p.y.width, p.y.channels};
  if (op == "maxpool2d") {
    if (p.output.symmetric) fail("{}: maxpool2d has no symmetric_saturation option", r.where());
    return {ys, widen(maxpool2d(x, p))};
  }
  return {ys, widen(avgpool2d(x, p))};
}

}  // namespace

CaseOutput run_case(const json& c, const std::string& where, Isa impl) {
  const Reader r(c, where);
  const json& op_field = r.field("op");
  if (!op_field.is_string()) fail("{}: \"op\" must be a string", where);
  const std::string op = op_field.get<std::string>();
  if (c.contains("params") && !c["params"].is_object()) {
    fail("{}: \"params\" must be an object", where);
  }
  try {
    if (op == "conv2d_deep" || op == "conv2d_shallowin" || op == "conv2d_1x1" ||
        op == "conv2d_depthwise") {
      return run_conv(r, op, impl);
    }
    if (op == "fully_connected_8" || op == "fully_connected_16" ||
        op == "fc_deepin_shallowout_16" || op == "fc_deepin_shallowout_8") {
      return run_fc(r, op, impl);
    }
    if (op == "maxpool2d" || op == "avgpool2d" || op == "avgpool2d_global") return run_pool(r, op);
    if (op == "requantize_16_to_8") {
      std::vector<int> xs;
      const auto& xshape = r.field("x.shape");
      const auto x =
          r.tensor<std::int16_t>("x", xshape.is_array() ? xshape.size() : 1, -32768, 32767, &xs);
      const auto ys = r.shape("y_shape", xs.size());
      if (ys != xs) fail("{}: \"y_shape\" must equal \"x.shape\" {}", where, json(xs).dump());
      return {ys, widen(requantize_16_to_8(x, r.output()))};
    }
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(where, 0) == 0) throw;
    fail("{}: {}", where, msg);  // kernel errors do not know the file name
  }
  std::string known;
  for (const auto& o : case_ops()) known += (known.empty() ? "" : ", ") + o;
  fail("{}: unknown op \"{}\"; known ops: {}", where, op, known);
}

CheckResult check_case(const json& c, const std::string& where, Isa impl,
                       std::size_t max_reported) {
  const CaseOutput out = run_case(c, where, impl);
  const Reader r(c, where);
  const auto expected = r.array<std::int64_t>("expected.data", -32768, 65535);
  CheckResult res;
  res.name = c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : where;
  if (expected.size() != out.data.size()) {
    fail("{}: \"expected.data\" has {} elements but y_shape {} has {}", where, expected.size(),
         json(out.shape).dump(), out.data.size());
  }
  res.compared = expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == out.data[i]) continue;
    ++res.mismatches;
    if (res.first.size() < max_reported) {
      Mismatch m;
      m.index = i;
      m.position.resize(out.shape.size());
      std::size_t rest = i;
      for (std::size_t d = out.shape.size(); d-- > 0;) {
        m.position[d] = int(rest % std::size_t(out.shape[d]));
        rest /= std::size_t(out.shape[d]);
      }
      m.expected = expected[i];
      m.got = out.data[i];
      res.first.push_back(m);
    }
  }
  res.pass = res.mismatches == 0;
  return res;
}

json output_json(const json& c, const CaseOutput& out) {
  json j;
  j["name"] = c.contains("name") ? c["name"] : json("");
  j["op"] = c.contains("op") ? c["op"] : json("");
  j["y_shape"] = out.shape;
  j["data"] = out.data;
  return j;
}

}  // namespace npukit::xs3
