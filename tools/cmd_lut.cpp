// npukit lut check|eval|design: NVDLA hybrid LUT case files and table design (docs/lut.md).
#include "common/error.h"
#include "common/file_io.h"
#include "lut/case_file.h"
#include "lut/designer.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace npukit;
using namespace npukit::lut;

// --in-scale / --out-scale: a scale of 0, a negative one, inf or nan has no meaning.
const CLI::Validator kPositiveFinite(
    [](std::string& text) -> std::string {
      try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size() && std::isfinite(v) && v > 0) return {};
      } catch (const std::exception&) {
      }
      return "must be a finite number > 0, got '" + text + "'";
    },
    "POSITIVE");

void run_check(const std::vector<std::string>& files) {
  int failed = 0;
  for (const auto& path : files) {
    try {
      const CaseFile c = load_case(path);
      const CaseResult r = run_case(c);
      for (const auto& d : r.diagnostics) {
        if (!d.is_error()) fmt::print("{}: warning: {}: {}\n", path, d.code, d.message);
      }
      if (!c.expected_outputs && !c.expected_stats) {
        fmt::print("FAIL {}: the case has no \"expected\" outputs or stats to check\n", path);
        ++failed;
        continue;
      }
      const auto mismatches = compare_case(c, r);
      if (mismatches.empty()) {
        fmt::print("PASS {} ({}, {} inputs)\n", path, c.name.empty() ? "unnamed" : c.name,
                   c.inputs.size());
      } else {
        ++failed;
        fmt::print("FAIL {} ({})\n", path, c.name.empty() ? "unnamed" : c.name);
        for (const auto& m : mismatches) fmt::print("  {}\n", m);
      }
    } catch (const Error& e) {
      ++failed;
      fmt::print("FAIL {}: error: {}\n", path, e.what());
    }
  }
  if (files.size() > 1)
    fmt::print("{} of {} case files pass\n", files.size() - failed, files.size());
  if (failed) tools::set_exit_status(1);
}

std::pair<double, double> parse_range(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) fail("--range '{}': expected a:b, e.g. -8:8", text);
  try {
    std::size_t used_a = 0, used_b = 0;
    const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
    const double lo = std::stod(a, &used_a), hi = std::stod(b, &used_b);
    if (used_a != a.size() || used_b != b.size() || !std::isfinite(lo) || !std::isfinite(hi) ||
        !(lo < hi))
      throw std::invalid_argument(text);
    return {lo, hi};
  } catch (const std::exception&) {
    fail("--range '{}': expected two finite numbers a:b with a < b, e.g. -8:8", text);
  }
}

struct DesignOptions {
  std::string fn, unit = "sdp", precision, range, case_out, header_out, plot_out, symbol;
  double in_scale = 0, out_scale = 0;
};

void run_design(const DesignOptions& o) {
  DesignRequest req;
  req.function = o.fn;
  req.unit = parse_unit(o.unit);
  req.precision = parse_precision(
      req.unit, o.precision.empty() ? (req.unit == Unit::kSdp ? "int" : "int16") : o.precision);
  if (!o.range.empty()) {
    const auto [lo, hi] = parse_range(o.range);
    req.range_lo = lo;
    req.range_hi = hi;
  }
  if (o.in_scale != 0) req.in_scale = o.in_scale;
  if (o.out_scale != 0) req.out_scale = o.out_scale;
  const Design d = design_lut(req);
  fmt::print("{}", design_report(d));
  const std::string symbol = o.symbol.empty()
                                 ? fmt::format("npukit_lut_{}_{}_{}", o.fn, unit_name(req.unit),
                                               precision_name(req.precision))
                                 : o.symbol;
  // All outputs or none: each is staged and renamed into place once every one was written.
  PendingOutputs out;
  if (!o.case_out.empty()) out.write_text(o.case_out, design_case_json(d).dump(1) + "\n");
  if (!o.header_out.empty()) out.write_text(o.header_out, design_c_header(d, symbol));
  if (!o.plot_out.empty()) out.write_text(o.plot_out, design_svg(d));
  out.commit();
  if (!o.case_out.empty()) fmt::print("wrote case file {}\n", o.case_out);
  if (!o.header_out.empty()) fmt::print("wrote C header {}\n", o.header_out);
  if (!o.plot_out.empty()) fmt::print("wrote plot {}\n", o.plot_out);
}

const tools::CommandRegistrar kReg{
    "lut", "NVDLA hybrid LUT: check and evaluate case files, design tables", [](CLI::App& sub) {
      sub.require_subcommand(1);
      auto files = std::make_shared<std::vector<std::string>>();
      CLI::App* check = sub.add_subcommand(
          "check", "Run LUT case files; print pass or the first mismatches (exit 1 if any fail)");
      check->add_option("FILE", *files, "case files (JSON)")->required();
      check->callback([files] { run_check(*files); });

      auto file = std::make_shared<std::string>();
      CLI::App* eval = sub.add_subcommand(
          "eval", "Print a case file with the computed outputs, stats and diagnostics as JSON");
      eval->add_option("FILE", *file, "case file (JSON)")->required();
      eval->callback([file] {
        const CaseFile c = load_case(*file);
        fmt::print("{}\n", case_to_json(c, run_case(c)).dump(1));
      });

      auto o = std::make_shared<DesignOptions>();
      std::string names;
      for (const auto& f : functions()) names += (names.empty() ? "" : "|") + f.name;
      CLI::App* design = sub.add_subcommand(
          "design", "Choose LUT modes, ranges, tables, slopes and priorities for a function");
      design->add_option("--fn", o->fn, names)->required();
      design->add_option("--unit", o->unit, "sdp|cdp (default sdp)");
      design->add_option("--precision", o->precision,
                         "sdp: int|fp16 (default int); cdp: int8|int16|fp16 (default int16)");
      design->add_option("--range", o->range,
                         "input range a:b in real units (default per function)");
      design->add_option("--in-scale", o->in_scale, "INT: real input = LUT input code * in-scale")
          ->check(kPositiveFinite);
      design
          ->add_option("--out-scale", o->out_scale,
                       "INT: real output = LUT output code * out-scale")
          ->check(kPositiveFinite);
      design->add_option("-o,--case", o->case_out, "write the register writes as a case file");
      design->add_option("--header", o->header_out, "write the register writes as a C header");
      design->add_option("--symbol", o->symbol, "C array name in the header");
      design->add_option("--plot", o->plot_out, "draw function, approximation and error as SVG");
      design->callback([o] { run_design(*o); });
    }};

}  // namespace
