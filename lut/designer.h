// LUT designer: chooses modes, ranges, index selects, offsets, table contents, slopes and
// priorities for a function so that the bit-exact model's maximum error over a range is small, and
// measures the result (max/mean absolute error and ULPs) with the register-exact model.
#pragma once

#include "lut/lut.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace npukit::lut {

struct FunctionSpec {
  std::string name;
  std::string formula;
  std::function<double(double)> f;
  double default_lo, default_hi;
  double domain_min;  // f is evaluated at max(x, domain_min) (e.g. rsqrt needs x > 0)
};
const FunctionSpec& find_function(const std::string& name);  // throws naming the choices
const std::vector<FunctionSpec>& functions();

// INT pipelines: real input = code * in_scale, real output = code * out_scale. FP16 pipelines carry
// real values (FP32 bits in, FP32 bits out) and ignore the scales.
struct Mapping {
  bool fp = false;
  double in_scale = 1, out_scale = 1;
  double x_real(std::int64_t code) const;
  double y_real(std::int64_t code) const;
  std::int64_t x_code(double real) const;  // nearest representable input
  double ulp(double y) const;              // INT: one output LSB; FP16: FP16 ulp at |y|
};

struct DesignRequest {
  std::string function;
  Unit unit = Unit::kSdp;
  Precision precision = Precision::kInt;
  std::optional<double> range_lo, range_hi;
  std::optional<double> in_scale, out_scale;
};

struct ErrorStats {
  double max_abs = 0, mean_abs = 0;  // real output units
  double max_ulp = 0, mean_ulp = 0;
  double worst_x = 0;
  std::size_t samples = 0;
};

struct Design {
  DesignRequest request;
  Mapping mapping;
  double lo = 0, hi = 0;  // the range, real input units
  LutConfig config;
  std::string structure;  // human-readable summary of the chosen layout
  ErrorStats error;
  // The nvdla/sw table for the same function (SDP FP16 sigmoid/tanh) on the same inputs.
  std::optional<ErrorStats> nvdla_sw_error;
};

Design design_lut(const DesignRequest& request);

// Inputs (codes) spread over [lo, hi]: every code if there are few, else evenly spaced, plus
// log-spaced ones when lo > 0.
std::vector<std::int64_t> sample_inputs(const Mapping& m, Unit unit, Precision precision, double lo,
                                        double hi, std::size_t count);
ErrorStats measure(const LutConfig& config, const Mapping& m, const FunctionSpec& fn,
                   const std::vector<std::int64_t>& inputs);

// The tables nvdla/sw's LutManager programs for FP16 sigmoid and tanh (LO linear, start -16 select
// -3 / start -4 select -5, FP16 of the function at each knot, slopes 0, all priorities LO).
LutConfig nvdla_sw_config(const std::string& function);

// Artifacts.
nlohmann::ordered_json design_case_json(const Design& d, std::size_t sample_count = 65);
std::string design_c_header(const Design& d, const std::string& symbol);
std::string design_svg(const Design& d);
std::string design_report(const Design& d);

}  // namespace npukit::lut
