#include "lut/case_file.h"

#include "common/error.h"
#include "common/file_io.h"
#include "lut/nvdla_fp.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace npukit::lut {
namespace {

using json = nlohmann::json;

// A JSON integer, or a "0x..." string, within [lo, hi].
std::int64_t integer_of(const json& v, std::int64_t lo, std::int64_t hi, const std::string& where) {
  std::int64_t out = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
      fail("{}: {} is out of range [{}, {}]", where, v.dump(), lo, hi);
    }
    out = v.get<std::int64_t>();
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    try {
      std::size_t used = 0;
      out = std::stoll(s, &used, 0);
      if (used != s.size()) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      fail("{}: '{}' is not an integer (use a JSON number or a \"0x...\" string)", where, s);
    }
  } else {
    fail("{}: expected an integer, got {}", where, v.dump());
  }
  if (out < lo || out > hi) fail("{}: {} is out of range [{}, {}]", where, out, lo, hi);
  return out;
}

const json& member(const json& obj, const char* key, const std::string& source) {
  auto it = obj.find(key);
  if (it == obj.end()) fail("{}: missing \"{}\"", source, key);
  return *it;
}

std::string element_text(Precision p, std::int64_t v) {
  if (is_float(p)) {
    return fmt::format("0x{:08x} ({})", std::uint32_t(v), fp::fp32_value(std::uint32_t(v)));
  }
  return fmt::format("{}", v);
}

}  // namespace

CaseFile parse_case(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: a case file is one JSON object", source);
  CaseFile c;
  c.source = source;
  if (auto it = j.find("name"); it != j.end()) {
    if (!it->is_string()) fail("{}: \"name\" must be a string", source);
    c.name = it->get<std::string>();
  }
  const json& unit = member(j, "unit", source);
  const json& precision = member(j, "precision", source);
  if (!unit.is_string() || !precision.is_string()) {
    fail("{}: \"unit\" and \"precision\" must be strings", source);
  }
  try {
    c.unit = parse_unit(unit.get<std::string>());
    c.precision = parse_precision(c.unit, precision.get<std::string>());
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
  c.precision_text = precision.get<std::string>();

  const json& writes = member(j, "writes", source);
  if (!writes.is_array()) fail("{}: \"writes\" must be an array of [register, value]", source);
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const json& w = writes[i];
    const std::string where = fmt::format("{}: writes[{}]", source, i);
    if (!w.is_array() || w.size() != 2 || !w[0].is_string()) {
      fail("{}: expected [\"REGISTER\", value], got {}", where, w.dump());
    }
    const std::string reg = w[0].get<std::string>();
    try {
      find_register(c.unit, reg);
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
    // Negative values are accepted as their 32-bit two's complement (e.g. signed START).
    const std::int64_t v = integer_of(w[1], INT32_MIN, UINT32_MAX, where + " value");
    c.writes.emplace_back(reg, std::uint32_t(v));
  }

  const json& inputs = member(j, "inputs", source);
  if (!inputs.is_array()) fail("{}: \"inputs\" must be an array of integers", source);
  const std::int64_t lo = input_min(c.unit, c.precision), hi = input_max(c.unit, c.precision);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    c.inputs.push_back(integer_of(inputs[i], lo, hi,
                                  fmt::format("{}: inputs[{}] ({} {} LUT input)", source, i,
                                              unit_name(c.unit), precision_name(c.precision))));
  }

  if (auto it = j.find("expected"); it != j.end()) {
    const json& e = *it;
    if (!e.is_object()) fail("{}: \"expected\" must be an object", source);
    if (auto o = e.find("outputs"); o != e.end()) {
      if (!o->is_array()) fail("{}: expected.outputs must be an array", source);
      if (o->size() != c.inputs.size()) {
        fail("{}: expected.outputs has {} elements but inputs has {}", source, o->size(),
             c.inputs.size());
      }
      const bool fp = is_float(c.precision);
      const bool cdp_int = c.unit == Unit::kCdp && !fp;
      const std::int64_t olo = fp ? 0 : cdp_int ? INT16_MIN : INT32_MIN;
      const std::int64_t ohi = fp ? UINT32_MAX : cdp_int ? INT16_MAX : INT32_MAX;
      std::vector<std::int64_t> outs;
      for (std::size_t i = 0; i < o->size(); ++i) {
        outs.push_back(
            integer_of((*o)[i], olo, ohi, fmt::format("{}: expected.outputs[{}]", source, i)));
      }
      c.expected_outputs = std::move(outs);
    }
    if (auto s = e.find("stats"); s != e.end()) {
      if (!s->is_object()) fail("{}: expected.stats must be an object", source);
      Stats st;
      for (auto [key, field] : {std::pair{"le_hit", &st.le_hit}, std::pair{"lo_hit", &st.lo_hit},
                                std::pair{"uflow", &st.uflow}, std::pair{"oflow", &st.oflow},
                                std::pair{"hybrid", &st.hybrid}}) {
        auto f = s->find(key);
        if (f == s->end()) fail("{}: expected.stats is missing \"{}\"", source, key);
        *field = std::uint32_t(
            integer_of(*f, 0, UINT32_MAX, fmt::format("{}: expected.stats.{}", source, key)));
      }
      for (auto& [key, _] : s->items()) {
        if (key != "le_hit" && key != "lo_hit" && key != "uflow" && key != "oflow" &&
            key != "hybrid") {
          fail("{}: expected.stats has unknown counter \"{}\"", source, key);
        }
      }
      c.expected_stats = st;
    }
    if (auto d = e.find("errors"); d != e.end()) {
      if (!d->is_array()) fail("{}: expected.errors must be an array of codes", source);
      std::vector<std::string> codes;
      for (const auto& x : *d) {
        if (!x.is_string()) fail("{}: expected.errors must hold strings", source);
        codes.push_back(x.get<std::string>());
      }
      c.expected_errors = std::move(codes);
    }
  }
  return c;
}

CaseFile load_case(const std::string& path) {
  const std::string text = read_text_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON: {}", path, clip(e.what(), 200));
  }
  return parse_case(j, path);
}

CaseResult run_case(const CaseFile& c) {
  LutUnit unit(c.unit, c.precision);
  for (const auto& [reg, value] : c.writes) unit.write(reg, value);
  CaseResult r;
  r.outputs.reserve(c.inputs.size());
  for (std::int64_t x : c.inputs) r.outputs.push_back(unit.eval(x).output);
  r.stats = unit.stats();
  if (c.inputs.empty()) unit.eval(input_min(c.unit, c.precision));  // surface constraint warnings
  r.diagnostics = unit.diagnostics();
  return r;
}

std::vector<std::string> compare_case(const CaseFile& c, const CaseResult& r, std::size_t limit) {
  std::vector<std::string> out;
  if (c.expected_outputs) {
    std::size_t shown = 0, total = 0;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      if (r.outputs[i] == (*c.expected_outputs)[i]) continue;
      ++total;
      if (shown < limit) {
        out.push_back(fmt::format("outputs[{}] (input {}): got {}, expected {}", i,
                                  element_text(c.precision, c.inputs[i]),
                                  element_text(c.precision, r.outputs[i]),
                                  element_text(c.precision, (*c.expected_outputs)[i])));
        ++shown;
      }
    }
    if (total > shown)
      out.push_back(fmt::format("... and {} more mismatching outputs", total - shown));
  }
  if (c.expected_stats) {
    const Stats& e = *c.expected_stats;
    for (auto [key, got, want] :
         {std::tuple{"le_hit", r.stats.le_hit, e.le_hit},
          std::tuple{"lo_hit", r.stats.lo_hit, e.lo_hit},
          std::tuple{"uflow", r.stats.uflow, e.uflow}, std::tuple{"oflow", r.stats.oflow, e.oflow},
          std::tuple{"hybrid", r.stats.hybrid, e.hybrid}}) {
      if (got != want) out.push_back(fmt::format("stats.{}: got {}, expected {}", key, got, want));
    }
  }
  std::vector<std::string> got_errors;
  for (const auto& d : r.diagnostics) {
    if (d.is_error()) got_errors.push_back(d.code);
  }
  const std::vector<std::string> want_errors =
      c.expected_errors.value_or(std::vector<std::string>{});
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  if (sorted(got_errors) != sorted(want_errors)) {
    for (const auto& d : r.diagnostics) {
      if (d.is_error() &&
          std::find(want_errors.begin(), want_errors.end(), d.code) == want_errors.end()) {
        out.push_back(fmt::format("error {}: {}", d.code, d.message));
      }
    }
    for (const auto& code : want_errors) {
      if (std::find(got_errors.begin(), got_errors.end(), code) == got_errors.end()) {
        out.push_back(fmt::format("expected error '{}' was not reported", code));
      }
    }
  }
  return out;
}

nlohmann::ordered_json stats_to_json(const Stats& s) {
  return {{"le_hit", s.le_hit},
          {"lo_hit", s.lo_hit},
          {"uflow", s.uflow},
          {"oflow", s.oflow},
          {"hybrid", s.hybrid}};
}

nlohmann::ordered_json case_to_json(const CaseFile& c, const CaseResult& r) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["unit"] = std::string(unit_name(c.unit));
  j["precision"] = c.precision_text;
  nlohmann::ordered_json writes = nlohmann::ordered_json::array();
  for (const auto& [reg, v] : c.writes) writes.push_back({reg, v});
  j["writes"] = writes;
  j["inputs"] = c.inputs;
  nlohmann::ordered_json expected;
  expected["outputs"] = r.outputs;
  expected["stats"] = stats_to_json(r.stats);
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  nlohmann::ordered_json diags = nlohmann::ordered_json::array();
  for (const auto& d : r.diagnostics) {
    if (d.is_error()) errors.push_back(d.code);
    diags.push_back({{"severity", d.is_error() ? "error" : "warning"},
                     {"code", d.code},
                     {"message", d.message}});
  }
  if (!errors.empty()) expected["errors"] = errors;
  j["expected"] = expected;
  j["diagnostics"] = diags;
  return j;
}

}  // namespace npukit::lut
