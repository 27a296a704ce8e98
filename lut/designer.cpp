#include "lut/designer.h"

#include "common/error.h"
#include "lut/case_file.h"
#include "lut/nvdla_fp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace npukit::lut {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// LRN as NVDLA's software tabulates it: 1 / (k + alpha / n * x)^beta with Caffe's defaults.
double lrn(double x) { return std::pow(1.0 + 1e-4 / 5.0 * x, -0.75); }

}  // namespace

const std::vector<FunctionSpec>& functions() {
  static const std::vector<FunctionSpec> all = {
      {"sigmoid", "1 / (1 + exp(-x))", sigmoid, -8, 8, -kInf},
      {"tanh", "tanh(x)", [](double x) { return std::tanh(x); }, -4, 4, -kInf},
      {"exp", "exp(x)", [](double x) { return std::exp(x); }, -8, 0, -kInf},
      {"silu", "x * sigmoid(x)", [](double x) { return x * sigmoid(x); }, -8, 8, -kInf},
      {"gelu", "x / 2 * (1 + erf(x / sqrt(2)))",
       [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, -6, 6, -kInf},
      {"softplus", "log(1 + exp(x))", [](double x) { return std::log1p(std::exp(x)); }, -8, 8,
       -kInf},
      {"elu", "x > 0 ? x : exp(x) - 1", [](double x) { return x > 0 ? x : std::expm1(x); }, -8, 4,
       -kInf},
      {"lrn", "(1 + 1e-4 / 5 * x)^-0.75, x = local square sum", lrn, 0, 1048576, 0},
      {"rsqrt", "1 / sqrt(x)", [](double x) { return 1.0 / std::sqrt(x); }, 1.0 / 64, 1024, 1e-30},
      {"recip", "1 / x", [](double x) { return 1.0 / x; }, 1.0 / 16, 1024, 1e-30},
      {"sqrt", "sqrt(x)", [](double x) { return std::sqrt(x); }, 0, 1024, 0},
      {"log", "ln(x)", [](double x) { return std::log(x); }, 1.0 / 256, 256, 1e-30},
  };
  return all;
}

const FunctionSpec& find_function(const std::string& name) {
  for (const auto& f : functions()) {
    if (f.name == name) return f;
  }
  std::string names;
  for (const auto& f : functions()) names += (names.empty() ? "" : "|") + f.name;
  fail("unknown function '{}': choose one of {}", name, names);
}

double Mapping::x_real(std::int64_t code) const {
  return fp ? double(fp::fp32_value(std::uint32_t(code))) : double(code) * in_scale;
}
double Mapping::y_real(std::int64_t code) const {
  return fp ? double(fp::fp32_value(std::uint32_t(code))) : double(code) * out_scale;
}
std::int64_t Mapping::x_code(double real) const {
  if (fp) return fp::fp32_bits(float(real));
  return std::llround(real / in_scale);
}
double Mapping::ulp(double y) const {
  if (!fp) return out_scale;
  const double a = std::fabs(y);
  const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
  return std::ldexp(1.0, e - 10);
}

std::vector<std::int64_t> sample_inputs(const Mapping& m, Unit unit, Precision precision, double lo,
                                        double hi, std::size_t count) {
  std::vector<std::int64_t> out;
  const std::int64_t cmin = input_min(unit, precision), cmax = input_max(unit, precision);
  if (!m.fp) {
    const std::int64_t a =
        std::max<std::int64_t>(cmin, std::int64_t(std::ceil(lo / m.in_scale - 1e-9)));
    const std::int64_t b =
        std::min<std::int64_t>(cmax, std::int64_t(std::floor(hi / m.in_scale + 1e-9)));
    if (b < a) fail("the range [{}, {}] holds no input code at in-scale {}", lo, hi, m.in_scale);
    if (std::uint64_t(b - a) < count) {
      for (std::int64_t x = a; x <= b; ++x) out.push_back(x);
      return out;
    }
    for (std::size_t i = 0; i < count; ++i) {
      out.push_back(a + std::int64_t(std::llround(double(b - a) * double(i) / double(count - 1))));
    }
    if (lo > 0) {
      for (std::size_t i = 0; i < count / 2; ++i) {
        const double v =
            std::exp(std::log(double(a)) + (std::log(double(b)) - std::log(double(a))) * double(i) /
                                               double(count / 2 - 1));
        out.push_back(std::clamp<std::int64_t>(std::llround(v), a, b));
      }
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      out.push_back(m.x_code(lo + (hi - lo) * double(i) / double(count - 1)));
    }
    if (lo > 0) {
      for (std::size_t i = 0; i < count / 2; ++i) {
        out.push_back(m.x_code(std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * double(i) /
                                                           double(count / 2 - 1))));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [&](std::int64_t a, std::int64_t b) { return m.x_real(a) < m.x_real(b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

ErrorStats measure(const LutConfig& c, const Mapping& m, const FunctionSpec& fn,
                   const std::vector<std::int64_t>& inputs) {
  ErrorStats s;
  double sum = 0, sum_ulp = 0;
  for (std::int64_t x : inputs) {
    const double xr = m.x_real(x);
    const double truth = fn.f(std::max(xr, fn.domain_min));
    const double got = m.y_real(evaluate(c, x).output);
    const double err = std::fabs(got - truth);
    const double err_ulp = err / m.ulp(truth);
    if (err > s.max_abs) {
      s.max_abs = err;
      s.worst_x = xr;
    }
    s.max_ulp = std::max(s.max_ulp, err_ulp);
    sum += err;
    sum_ulp += err_ulp;
  }
  s.samples = inputs.size();
  if (!inputs.empty()) {
    s.mean_abs = sum / double(inputs.size());
    s.mean_ulp = sum_ulp / double(inputs.size());
  }
  return s;
}

LutConfig nvdla_sw_config(const std::string& function) {
  LutConfig c;
  c.unit = Unit::kSdp;
  c.precision = Precision::kFp16;
  c.le_linear = true;
  c.le_index_select = -128;  // "disables lut": any x > 0 overflows, x <= 0 underflows
  c.uflow_priority_lo = c.oflow_priority_lo = c.hybrid_priority_lo = true;
  double start, step;
  if (function == "sigmoid") {
    start = -16.0;
    c.lo_index_select = -3;
  } else if (function == "tanh") {
    start = -4.0;
    c.lo_index_select = -5;
  } else {
    fail("nvdla/sw ships FP16 tables only for sigmoid and tanh, not '{}'", function);
  }
  step = std::ldexp(1.0, c.lo_index_select);
  c.lo_start = fp::fp32_bits(float(start));
  const FunctionSpec& fn = find_function(function);
  // LutManager.cpp's constants are the nearest FP16 of f at each knot (checked entry by entry).
  for (int i = 0; i < kLoEntries; ++i) {
    c.lo[i] = std::uint16_t(fp::fp16_from_double(fn.f(start + step * i)));
  }
  return c;
}

namespace {

// One table's layout in code units (INT: input codes; FP: real input values).
struct Layout {
  bool exponent = false;
  double start = 0;
  int sel = 0;  // linear: step 2^sel
  int off = 0;  // exponent: knots at start + 2^(off + i)
};

struct Context {
  const FunctionSpec* fn;
  Unit unit;
  Precision precision;
  Mapping m;
  double lo, hi;    // real range
  double ua, ub;    // range in code units
  bool restricted;  // f is only defined from the range's low end upwards
};

double knot(const Layout& l, int i) {
  return l.exponent ? l.start + std::ldexp(1.0, l.off + i) : l.start + std::ldexp(double(i), l.sel);
}

double truth_at_code(const Context& ctx, double code) {
  double x = ctx.m.fp ? code : code * ctx.m.in_scale;
  if (ctx.restricted) x = std::max(x, ctx.lo);
  return ctx.fn->f(std::max(x, ctx.fn->domain_min));
}

std::uint16_t quantize(const Context& ctx, double y) {
  if (ctx.m.fp) return std::uint16_t(fp::fp16_from_double(y));
  const double q = std::isfinite(y) ? std::round(y / ctx.m.out_scale) : (y > 0 ? 32767 : -32768);
  return std::uint16_t(std::int16_t(std::clamp(q, -32768.0, 32767.0)));
}

std::int64_t start_code(const Context& ctx, double v) {
  if (ctx.m.fp) {
    const double max = std::numeric_limits<float>::max();
    return fp::fp32_bits(float(std::clamp(v, -max, max)));
  }
  const double limit = ctx.unit == Unit::kSdp ? double(INT32_MAX) : double((1ll << 37) - 1);
  return std::llround(std::clamp(v, -limit - 1, limit));
}

// Slope in output units per input code unit, encoded as the unit's scale/shift.
Slope encode_slope(const Context& ctx, double derivative) {
  if (!std::isfinite(derivative)) derivative = 0;
  if (ctx.m.fp) return {std::int16_t(fp::fp16_from_double(derivative)), 0};
  const double k = derivative * ctx.m.in_scale / ctx.m.out_scale;
  if (k == 0) return {0, 0};
  int shift = 15;
  while (shift > -16 && std::fabs(k * std::ldexp(1.0, shift)) > 32767) --shift;
  const double scale = std::clamp(std::round(k * std::ldexp(1.0, shift)), -32768.0, 32767.0);
  return {std::int16_t(scale), shift};
}

double derivative_at_code(const Context& ctx, double code) {
  const double x = ctx.m.fp ? code : code * ctx.m.in_scale;
  const double h = 1e-4 * std::max(1.0, std::fabs(x));
  double a = x - h, b = x + h;
  if (ctx.restricted) a = std::max(a, ctx.lo);
  if (b <= a) return 0;
  return (ctx.fn->f(std::max(b, ctx.fn->domain_min)) - ctx.fn->f(std::max(a, ctx.fn->domain_min))) /
         (b - a);
}

double end_of(const Layout& l, int entries) {
  return l.exponent ? l.start + std::ldexp(1.0, l.off + entries) : knot(l, entries);
}

struct Priorities {
  bool uflow_lo, oflow_lo, hybrid_lo;
};

LutConfig build(const Context& ctx, const Layout& le, const Layout& lo, Priorities p) {
  LutConfig c;
  c.unit = ctx.unit;
  c.precision = ctx.precision;
  c.le_linear = !le.exponent;
  c.le_index_select = le.exponent ? 0 : le.sel;
  c.le_index_offset = le.exponent ? le.off : 0;
  c.lo_index_select = lo.sel;
  c.uflow_priority_lo = p.uflow_lo;
  c.oflow_priority_lo = p.oflow_lo;
  c.hybrid_priority_lo = p.hybrid_lo;
  c.le_start = start_code(ctx, le.start);
  c.le_end = start_code(ctx, end_of(le, kLeEntries - 1));
  c.lo_start = start_code(ctx, lo.start);
  c.lo_end = start_code(ctx, end_of(lo, kLoEntries - 1));
  for (int i = 0; i < kLeEntries; ++i) c.le[i] = quantize(ctx, truth_at_code(ctx, knot(le, i)));
  for (int i = 0; i < kLoEntries; ++i) c.lo[i] = quantize(ctx, truth_at_code(ctx, knot(lo, i)));
  c.le_uflow = encode_slope(ctx, derivative_at_code(ctx, knot(le, 0)));
  c.le_oflow = encode_slope(ctx, derivative_at_code(ctx, knot(le, kLeEntries - 1)));
  c.lo_uflow = encode_slope(ctx, derivative_at_code(ctx, knot(lo, 0)));
  c.lo_oflow = encode_slope(ctx, derivative_at_code(ctx, knot(lo, kLoEntries - 1)));
  return c;
}

// Moves each entry by the average mid-error of its two segments (a minimax step for linear
// interpolation: it centres each segment's error band), keeping the best table seen.
LutConfig refine(const Context& ctx, LutConfig c, const std::vector<std::int64_t>& inputs) {
  LutConfig best = c;
  double best_err = measure(c, ctx.m, *ctx.fn, inputs).max_abs;
  for (int round = 0; round < 16; ++round) {
    std::vector<double> hi_le(kLeEntries, -kInf), lo_le(kLeEntries, kInf);
    std::vector<double> hi_lo(kLoEntries, -kInf), lo_lo(kLoEntries, kInf);
    for (std::int64_t x : inputs) {
      const Element e = evaluate(c, x);
      if (e.uflow || e.oflow) continue;
      const double truth = ctx.fn->f(std::max(ctx.m.x_real(x), ctx.fn->domain_min));
      const double err = (truth - ctx.m.y_real(e.output)) / (ctx.m.fp ? 1.0 : ctx.m.out_scale);
      auto& hi = e.selected == Table::kLe ? hi_le : hi_lo;
      auto& lo = e.selected == Table::kLe ? lo_le : lo_lo;
      hi[e.index] = std::max(hi[e.index], err);
      lo[e.index] = std::min(lo[e.index], err);
    }
    auto adjust = [&](auto& table, const std::vector<double>& hi, const std::vector<double>& lo) {
      const int n = int(table.size());
      for (int i = 0; i < n; ++i) {
        double sum = 0;
        int k = 0;
        for (int s : {i - 1, i}) {
          if (s < 0 || s >= n - 1 || hi[s] == -kInf) continue;
          sum += (hi[s] + lo[s]) / 2;
          ++k;
        }
        if (k == 0) continue;
        const double delta = sum / k;
        if (ctx.m.fp) {
          table[i] = std::uint16_t(fp::fp16_from_double(fp::fp16_value(table[i]) + delta));
        } else {
          const double v = std::int16_t(table[i]) + std::round(delta);
          table[i] = std::uint16_t(std::int16_t(std::clamp(v, -32768.0, 32767.0)));
        }
      }
    };
    adjust(c.le, hi_le, lo_le);
    adjust(c.lo, hi_lo, lo_lo);
    const double err = measure(c, ctx.m, *ctx.fn, inputs).max_abs;
    if (err < best_err) {
      best_err = err;
      best = c;
    }
  }
  return best;
}

// Exhaustive local search on the entries against the bit-exact model: try each entry one step
// (one LSB, or one FP16 ulp) up and down and keep the change if the inputs that read that entry
// get a lower maximum error (or the same maximum and a lower total). Which entry an input reads
// does not depend on the table contents, so each trial re-evaluates only those inputs. This
// removes the deterministic rounding noise of the FP17 datapath that averaging cannot see.
LutConfig polish(const Context& ctx, LutConfig c, const std::vector<std::int64_t>& inputs) {
  std::vector<double> truth(inputs.size());
  std::vector<std::vector<std::size_t>> users_le(kLeEntries), users_lo(kLoEntries);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    truth[k] = ctx.fn->f(std::max(ctx.m.x_real(inputs[k]), ctx.fn->domain_min));
    const Element e = evaluate(c, inputs[k]);
    auto& users = e.selected == Table::kLe ? users_le : users_lo;
    const int last = int(users.size()) - 1;
    if (e.uflow) {
      users[0].push_back(k);
    } else if (e.oflow) {
      users[last].push_back(k);
    } else {
      users[e.index].push_back(k);
      users[e.index + 1].push_back(k);
    }
  }
  auto score = [&](const std::vector<std::size_t>& users) {
    double worst = 0, total = 0;
    for (std::size_t k : users) {
      const double err = std::fabs(ctx.m.y_real(evaluate(c, inputs[k]).output) - truth[k]);
      worst = std::max(worst, err);
      total += err;
    }
    return std::pair{worst, total};
  };
  auto step = [&](std::uint16_t v, int dir) -> std::uint16_t {
    if (!ctx.m.fp) {
      const int x = std::int16_t(v) + dir;
      return std::uint16_t(std::int16_t(std::clamp(x, -32768, 32767)));
    }
    const double value = fp::fp16_value(v);
    const double ulp = ctx.m.ulp(value == 0 ? 1e-8 : value);
    return std::uint16_t(fp::fp16_from_double(value + dir * ulp));
  };
  for (int sweep = 0; sweep < 4; ++sweep) {
    bool changed = false;
    for (int t = 0; t < 2; ++t) {
      auto& users = t == 0 ? users_le : users_lo;
      for (std::size_t i = 0; i < users.size(); ++i) {
        if (users[i].empty()) continue;
        std::uint16_t& entry = t == 0 ? c.le[i] : c.lo[i];
        auto best = score(users[i]);
        for (int dir : {-1, 1}) {
          const std::uint16_t saved = entry;
          entry = step(saved, dir);
          if (entry == saved) continue;
          const auto trial = score(users[i]);
          if (trial.first < best.first ||
              (trial.first == best.first && trial.second < best.second)) {
            best = trial;
            changed = true;
          } else {
            entry = saved;
          }
        }
      }
    }
    if (!changed) break;
  }
  return c;
}

struct Candidate {
  Layout le, lo;
  Priorities priorities;
  std::string structure;
  bool lo_only = false;
};

int ceil_log2(double v) {
  return v <= 1 ? (v <= 0 ? -1074 : int(std::ceil(std::log2(v))))
                : int(std::ceil(std::log2(v) - 1e-12));
}

std::vector<Candidate> candidates(const Context& ctx) {
  std::vector<Candidate> out;
  const FieldRange le_range = le_select_range(ctx.unit, ctx.precision);
  const FieldRange lo_range = lo_select_range(ctx.unit, ctx.precision);
  const FieldRange off_range = offset_range(ctx.unit, ctx.precision);
  const bool fp = ctx.m.fp;
  const double span = std::max(ctx.ub - ctx.ua, fp ? 1e-30 : 1.0);
  const int min_sel = fp ? -1000 : 0;  // INT selects below 0 drop the fraction: never useful
  // A raw LO table over the whole range (centred when f is defined on both sides).
  // A code or two beyond the last knot overflows into T[last]'s slope: cheaper than halving.
  int s_lo = ceil_log2(span / 256);
  s_lo = std::clamp(std::max(s_lo, std::max(min_sel, lo_range.lo)), lo_range.lo, lo_range.hi);
  const double width_lo = std::ldexp(256.0, s_lo);
  auto raw_lo = [&](int sel) {
    Layout l;
    l.sel = sel;
    const double width = std::ldexp(256.0, sel);
    const double pad = ctx.restricted ? 0 : std::max(0.0, (width - span) / 2);
    if (fp) {
      const double step = std::ldexp(1.0, sel);
      l.start = std::floor((ctx.ua - pad) / step) * step;
    } else {
      l.start = std::floor(ctx.ua - pad) - 1;
    }
    return l;
  };
  const Layout lo_raw = raw_lo(s_lo);
  // LE parked beyond every input of interest (at the top of the input range), programmed
  // consistently (END - START = 2^(select + 6)); LO wins wherever both hit.
  Layout le_off;
  if (fp) {
    le_off.sel = 94;
    le_off.start = std::ldexp(1.0, 100);
  } else {
    le_off.sel = std::max(0, le_range.lo);
    le_off.start = double(input_max(ctx.unit, ctx.precision)) - std::ldexp(64.0, le_off.sel);
  }
  // LO alone, at the finest step covering the range and two coarser ones (a coarser table's
  // arithmetic rounding can land closer in the FP16 pipelines).
  for (int extra = 0; extra <= 2; ++extra) {
    if (s_lo + extra > lo_range.hi) break;
    out.push_back({le_off,
                   raw_lo(s_lo + extra),
                   {true, true, true},
                   fmt::format("LO linear raw table only (step 2^{})", s_lo + extra),
                   true});
  }

  // LE linear density window inside LO's range, LE wins where both hit.
  for (int d = 1; d <= 7; ++d) {
    const int s_le = s_lo - d;
    if (s_le < std::max(min_sel, le_range.lo) || s_le > le_range.hi) continue;
    const double width = std::ldexp(64.0, s_le);
    const int positions = width >= span ? 1 : 24;
    for (int j = 0; j < positions; ++j) {
      double ws = positions == 1 ? ctx.ua : ctx.ua + (span - width) * j / (positions - 1);
      Layout le;
      le.sel = s_le;
      if (fp) {
        const double step = std::ldexp(1.0, s_le);
        le.start = std::floor(ws / step) * step;
      } else {
        le.start = std::floor(ws) - 1;
      }
      out.push_back(
          {le,
           lo_raw,
           {true, true, false},
           fmt::format("LO linear raw (step 2^{}) + LE linear density (step 2^{})", s_lo, s_le)});
    }
  }

  // Functions on x >= lo: LE exponent raw table over the whole range, LO linear density at the
  // steep low end (NVDLA's recommended LRN layout).
  if (ctx.restricted || ctx.lo >= 0) {
    Layout le;
    le.exponent = true;
    if (fp) {
      le.start = ctx.ua > 0 ? 0.0 : ctx.ua - std::ldexp(1.0, std::ilogb(span) - 20);
      le.off = std::ilogb(ctx.ua - le.start);
    } else {
      le.start = ctx.ua - 1;
      le.off = 0;
    }
    le.off = std::clamp(le.off, off_range.lo, off_range.hi);
    for (int s = s_lo - 14; s <= s_lo; ++s) {
      if (s < std::max(min_sel, lo_range.lo) || s > lo_range.hi) continue;
      Layout lo;
      lo.sel = s;
      lo.start = le.start;
      out.push_back(
          {le,
           lo,
           {true, false, true},
           fmt::format("LE exponent raw (offset {}) + LO linear density (step 2^{})", le.off, s)});
    }
  }
  return out;
}

std::string number(double v) { return fmt::format("{:.6g}", v); }
std::string tick(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

Design design_lut(const DesignRequest& req) {
  const FunctionSpec& fn = find_function(req.function);
  Design d;
  d.request = req;
  d.lo = req.range_lo.value_or(fn.default_lo);
  d.hi = req.range_hi.value_or(fn.default_hi);
  if (!(d.lo < d.hi) || !std::isfinite(d.lo) || !std::isfinite(d.hi)) {
    fail("--range {}:{} is empty: give a:b with a < b", d.lo, d.hi);
  }
  if (d.lo < fn.domain_min) {
    fail("{} is defined for x >= {} only; the range starts at {}", fn.name, fn.domain_min, d.lo);
  }
  Mapping m;
  m.fp = is_float(req.precision);
  if (m.fp && (req.in_scale || req.out_scale)) {
    fail("--in-scale/--out-scale apply to the INT pipelines; FP16 pipelines carry real values");
  }
  if (!m.fp) {
    const double reach = std::max(std::fabs(d.lo), std::fabs(d.hi));
    const int input_bits = req.unit == Unit::kSdp              ? 24
                           : req.precision == Precision::kInt8 ? 20
                                                               : 36;
    m.in_scale = req.in_scale.value_or(std::ldexp(1.0, std::ilogb(reach) + 1 - input_bits));
    // The output scale leaves the table's largest |f| within int16.
    double fmax = 0;
    for (int i = 0; i <= 4096; ++i) {
      const double x = d.lo + (d.hi - d.lo) * i / 4096;
      fmax = std::max(fmax, std::fabs(fn.f(std::max(x, fn.domain_min))));
    }
    m.out_scale =
        req.out_scale.value_or(std::ldexp(1.0, std::ilogb(std::max(fmax, 1e-30) / 32767.0) + 1));
    if (!(m.in_scale > 0) || !(m.out_scale > 0))
      fail("--in-scale and --out-scale must be positive");
    const double cmin = double(input_min(req.unit, req.precision));
    const double cmax = double(input_max(req.unit, req.precision));
    if (d.lo / m.in_scale < cmin || d.hi / m.in_scale > cmax) {
      fail(
          "the range [{}, {}] at in-scale {} needs input codes beyond the {} {} LUT input "
          "[{}, {}]; use a larger --in-scale",
          d.lo, d.hi, m.in_scale, unit_name(req.unit), precision_name(req.precision), cmin, cmax);
    }
  }
  d.mapping = m;
  Context ctx{&fn, req.unit, req.precision, m, d.lo, d.hi, 0, 0, fn.domain_min > -kInf};
  ctx.ua = m.fp ? d.lo : std::ceil(d.lo / m.in_scale - 1e-9);
  ctx.ub = m.fp ? d.hi : std::floor(d.hi / m.in_scale + 1e-9);

  const auto coarse = sample_inputs(m, req.unit, req.precision, d.lo, d.hi, 2049);
  const auto fine = sample_inputs(m, req.unit, req.precision, d.lo, d.hi, 20001);
  // Rank every layout on a coarse sample, then refine the most promising few on the fine one and
  // keep the lowest maximum error (then mean error) after refinement.
  const std::vector<Candidate> all = candidates(ctx);
  std::vector<std::pair<double, std::size_t>> ranked;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const LutConfig c = build(ctx, all[i].le, all[i].lo, all[i].priorities);
    ranked.emplace_back(measure(c, m, fn, coarse).max_abs, i);
  }
  std::sort(ranked.begin(), ranked.end());
  bool have = false;
  std::vector<std::size_t> finalists;
  for (std::size_t k = 0; k < std::min<std::size_t>(5, ranked.size()); ++k) {
    finalists.push_back(ranked[k].second);
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].lo_only && std::find(finalists.begin(), finalists.end(), i) == finalists.end()) {
      finalists.push_back(i);
    }
  }
  for (std::size_t index : finalists) {
    const Candidate& cand = all[index];
    const LutConfig refined =
        polish(ctx, refine(ctx, build(ctx, cand.le, cand.lo, cand.priorities), fine), fine);
    const ErrorStats e = measure(refined, m, fn, fine);
    const bool better = !have || e.max_abs < d.error.max_abs * 0.999 ||
                        (e.max_abs <= d.error.max_abs * 1.001 && e.mean_abs < d.error.mean_abs);
    if (better) {
      d.config = refined;
      d.structure = cand.structure;
      d.error = e;
      have = true;
    }
  }
  if (req.unit == Unit::kSdp && m.fp && (fn.name == "sigmoid" || fn.name == "tanh")) {
    d.nvdla_sw_error = measure(nvdla_sw_config(fn.name), m, fn, fine);
  }
  return d;
}

nlohmann::ordered_json design_case_json(const Design& d, std::size_t sample_count) {
  CaseFile c;
  c.name = fmt::format("{} on {} {} over [{}, {}]", d.request.function, unit_name(d.config.unit),
                       precision_name(d.config.precision), number(d.lo), number(d.hi));
  c.unit = d.config.unit;
  c.precision = d.config.precision;
  c.precision_text = std::string(precision_name(d.config.precision));
  c.writes = register_writes(d.config);
  c.inputs = sample_inputs(d.mapping, c.unit, c.precision, d.lo, d.hi, sample_count);
  nlohmann::ordered_json j = case_to_json(c, run_case(c));
  j.erase("diagnostics");
  return j;
}

std::string design_c_header(const Design& d, const std::string& symbol) {
  std::string guard = symbol;
  std::transform(guard.begin(), guard.end(), guard.begin(), ::toupper);
  std::string out;
  out += fmt::format(
      "/* Generated by `npukit lut design --fn {} --unit {} --precision {}` over [{}, {}].\n"
      " * {}.\n * Max abs error {} ({} ULP), mean abs error {} ({} ULP) over {} inputs.\n",
      d.request.function, unit_name(d.config.unit), precision_name(d.config.precision),
      number(d.lo), number(d.hi), d.structure, number(d.error.max_abs), number(d.error.max_ulp),
      number(d.error.mean_abs), number(d.error.mean_ulp), d.error.samples);
  if (!d.mapping.fp) {
    out += fmt::format(" * LUT input = x / {}; output = y / {}.\n", number(d.mapping.in_scale),
                       number(d.mapping.out_scale));
  }
  out +=
      " * Apply the writes in order: tables through S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA, then\n"
      " * the configuration registers. Addresses are absolute (unit base + offset). */\n";
  out += fmt::format("#ifndef {0}_H\n#define {0}_H\n\n#include <stdint.h>\n\n", guard);
  out += fmt::format("#define {}_BASE 0x{:04x}u\n#define {}_COUNT {}u\n\n", guard,
                     unit_base_address(d.config.unit), guard, register_writes(d.config).size());
  out +=
      fmt::format("static const struct {{ uint32_t addr; uint32_t value; }} {}[] = {{\n", symbol);
  for (const auto& [reg, value] : register_writes(d.config)) {
    const RegisterInfo& info = find_register(d.config.unit, reg);
    out += fmt::format("  {{0x{:04x}u, 0x{:08x}u}}, /* {} */\n",
                       unit_base_address(d.config.unit) + info.offset, value, reg);
  }
  out += fmt::format("}};\n\n#endif /* {}_H */\n", guard);
  return out;
}

std::string design_report(const Design& d) {
  const LutConfig& c = d.config;
  std::string out;
  const FunctionSpec& fn = find_function(d.request.function);
  out += fmt::format("function   {} = {}\n", fn.name, fn.formula);
  out += fmt::format("unit       {} {}\n", unit_name(c.unit), precision_name(c.precision));
  out += fmt::format("range      [{}, {}]\n", number(d.lo), number(d.hi));
  if (!d.mapping.fp) {
    out += fmt::format("scales     in {} (LUT input = x / in), out {} (y = output * out)\n",
                       number(d.mapping.in_scale), number(d.mapping.out_scale));
  }
  out += fmt::format("layout     {}\n", d.structure);
  auto value = [&](std::int64_t v) {
    return d.mapping.fp ? number(fp::fp32_value(std::uint32_t(v))) : fmt::format("{}", v);
  };
  out += fmt::format("LE         {} start {} end {} {} {}\n", c.le_linear ? "linear" : "exponent",
                     value(c.le_start), value(c.le_end), c.le_linear ? "select" : "offset",
                     c.le_linear ? c.le_index_select : c.le_index_offset);
  out += fmt::format("LO         linear start {} end {} select {}\n", value(c.lo_start),
                     value(c.lo_end), c.lo_index_select);
  out += fmt::format("priorities uflow {} oflow {} hybrid {}\n", c.uflow_priority_lo ? "LO" : "LE",
                     c.oflow_priority_lo ? "LO" : "LE", c.hybrid_priority_lo ? "LO" : "LE");
  out += fmt::format("error      max {} ({} ULP) at x = {}; mean {} ({} ULP); {} inputs\n",
                     number(d.error.max_abs), number(d.error.max_ulp), number(d.error.worst_x),
                     number(d.error.mean_abs), number(d.error.mean_ulp), d.error.samples);
  if (d.nvdla_sw_error) {
    const ErrorStats& s = *d.nvdla_sw_error;
    out += fmt::format(
        "nvdla/sw   max {} ({} ULP), mean {} ({} ULP) on the same inputs: max error {}x lower, "
        "mean {}x lower\n",
        number(s.max_abs), number(s.max_ulp), number(s.mean_abs), number(s.mean_ulp),
        number(s.max_abs / std::max(d.error.max_abs, 1e-300)),
        number(s.mean_abs / std::max(d.error.mean_abs, 1e-300)));
  }
  return out;
}

namespace {

// Real-valued coverage [a, b) of one table, in input units.
std::pair<double, double> coverage(const Design& d, Table t) {
  const LutConfig& c = d.config;
  const Mapping& m = d.mapping;
  auto real = [&](std::int64_t v) {
    return m.fp ? double(fp::fp32_value(std::uint32_t(v))) : double(v) * m.in_scale;
  };
  const double unit = m.fp ? 1.0 : m.in_scale;
  if (t == Table::kLo) {
    const double a = real(c.lo_start);
    return {a, a + std::ldexp(256.0, c.lo_index_select) * unit};
  }
  const double a = real(c.le_start);
  if (c.le_linear) return {a, a + std::ldexp(64.0, c.le_index_select) * unit};
  return {a + std::ldexp(1.0, c.le_index_offset) * unit,
          a + std::ldexp(1.0, c.le_index_offset + 64) * unit};
}

}  // namespace

std::string design_svg(const Design& d) {
  const FunctionSpec& fn = find_function(d.request.function);
  const double W = 960, H = 660, left = 100, right = 30, top = 60, mid = 390, gap = 50, bottom = 50;
  const bool logx = d.lo > 0 && d.hi / d.lo > 100;
  auto tx = [&](double x) {
    const double u = logx ? (std::log(x) - std::log(d.lo)) / (std::log(d.hi) - std::log(d.lo))
                          : (x - d.lo) / (d.hi - d.lo);
    return left + u * (W - left - right);
  };
  // Samples: one per pixel column, evaluated through the model.
  std::vector<double> xs, ys, approx, errs;
  const int n = 800;
  for (int i = 0; i <= n; ++i) {
    const double u = double(i) / n;
    const double x = logx ? std::exp(std::log(d.lo) + u * (std::log(d.hi) - std::log(d.lo)))
                          : d.lo + u * (d.hi - d.lo);
    const std::int64_t code =
        std::clamp(d.mapping.x_code(x), input_min(d.config.unit, d.config.precision),
                   input_max(d.config.unit, d.config.precision));
    const double xr = d.mapping.x_real(code);
    xs.push_back(xr);
    ys.push_back(fn.f(std::max(xr, fn.domain_min)));
    approx.push_back(d.mapping.y_real(evaluate(d.config, code).output));
    errs.push_back(approx.back() - ys.back());
  }
  auto range_of = [](const std::vector<double>& a, const std::vector<double>& b) {
    double lo = kInf, hi = -kInf;
    for (const auto* v : {&a, &b}) {
      for (double x : *v) {
        if (!std::isfinite(x)) continue;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
    if (hi - lo < 1e-300) {
      lo -= 1;
      hi += 1;
    }
    const double pad = (hi - lo) * 0.05;
    return std::pair{lo - pad, hi + pad};
  };
  const auto y_range = range_of(ys, approx);  // no structured binding: captured below (clang 14)
  const double ylo = y_range.first, yhi = y_range.second;
  double emax = 0;
  for (double e : errs) emax = std::max(emax, std::fabs(e));
  if (emax == 0) emax = 1e-12;
  const double e_top = mid + gap, e_bottom = H - bottom;
  auto ty = [&](double y) { return top + (yhi - y) / (yhi - ylo) * (mid - top); };
  auto te = [&](double e) { return e_top + (emax * 1.1 - e) / (2.2 * emax) * (e_bottom - e_top); };
  std::string s;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      W, H);
  // Table coverage, shaded in both panels.
  for (auto [t, colour, label] :
       {std::tuple{Table::kLo, "#4e79a7", "LO"}, std::tuple{Table::kLe, "#f28e2b", "LE"}}) {
    auto [a, b] = coverage(d, t);
    a = std::max(a, d.lo);
    b = std::min(b, d.hi);
    if (!(a < b)) continue;
    if (logx && a <= 0) a = d.lo;
    const double x0 = tx(a), x1 = tx(b);
    for (auto [y0, y1] : {std::pair{top, mid}, std::pair{e_top, e_bottom}}) {
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "fill-opacity=\"0.12\"/>\n",
          x0, y0, std::max(0.5, x1 - x0), y1 - y0, colour);
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{} table</text>\n", x0 + 4,
                     t == Table::kLo ? top + 16 : top + 32, colour, label);
  }
  // Axes and frames.
  for (auto [y0, y1] : {std::pair{top, mid}, std::pair{e_top, e_bottom}}) {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
        left, y0, W - left - right, y1 - y0);
  }
  s += fmt::format(
      "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#999\" "
      "stroke-dasharray=\"4 3\"/>\n",
      left, te(0), W - right, te(0));
  auto polyline = [&](const std::vector<double>& v, auto map, const char* colour, double width,
                      const char* dash) {
    std::string pts;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (!std::isfinite(v[i])) continue;
      const double x = logx && xs[i] <= 0 ? d.lo : xs[i];
      pts += fmt::format("{:.1f},{:.1f} ", tx(x), map(v[i]));
    }
    s += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" {}/>\n", pts,
        colour, width, dash);
  };
  polyline(ys, ty, "#222", 2.5, "");
  polyline(approx, ty, "#e15759", 1.5, "stroke-dasharray=\"6 3\"");
  polyline(errs, te, "#59a14f", 1.2, "");
  // Labels and ticks.
  s += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"15\">{} on NVDLA {} {}: f (black), LUT "
      "output (red dashed)</text>\n<text x=\"{}\" y=\"42\">{}</text>\n",
      left, fn.name, unit_name(d.config.unit), precision_name(d.config.precision), left,
      d.structure);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\">error = LUT - f (green), max |error| {} ({} ULP), "
      "mean {}</text>\n",
      left, e_top - 8, number(d.error.max_abs), number(d.error.max_ulp), number(d.error.mean_abs));
  for (int i = 0; i <= 4; ++i) {
    const double u = i / 4.0;
    const double x = logx ? std::exp(std::log(d.lo) + u * (std::log(d.hi) - std::log(d.lo)))
                          : d.lo + u * (d.hi - d.lo);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", tx(x),
                     H - bottom + 18, tick(x));
    const double y = ylo + u * (yhi - ylo);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     ty(y) + 4, tick(y));
    const double e = -emax * 1.1 + u * 2.2 * emax;
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     te(e) + 4, tick(e));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">x{}</text>\n", (W + left) / 2,
                   H - 12, logx ? " (log scale)" : "");
  s += "</svg>\n";
  return s;
}

}  // namespace npukit::lut
