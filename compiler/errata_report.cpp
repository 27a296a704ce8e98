// The "Errata rewrites" section of `npukit compile --explain`: each rewrite that steers around a
// v1.0.0 erratum of the optional blocks (pools_as_convs, lower_concat, clear_resize_padding), the
// erratum it avoids, the device layers doing the work now and, when the caller ran the program on
// the device model, their cycles (timing does not depend on the data).
#include "compiler/errata_passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace npukit::compiler {

namespace {
constexpr std::string_view kOf = "rewrite of '", kBy = "' by ",
                           kAvoiding = " avoiding v1.0.0 erratum ", kColon = ": ";
}  // namespace

void note_errata_rewrite(Context& ctx, const std::string& layer, const std::string& original,
                         const std::string& pass, const std::string& erratum,
                         const std::string& how) {
  ctx.place(
      layer, Placement::kDevice,
      fmt::format("{}{}{}{}{}{}{}{}", kOf, original, kBy, pass, kAvoiding, erratum, kColon, how));
}

std::vector<ErrataRewrite> errata_rewrites(const Context& ctx) {
  std::vector<ErrataRewrite> out;
  for (const auto& name : ctx.placement_order) {
    const std::string& r = ctx.placement.at(name).reason;
    if (r.rfind(kOf, 0) != 0) continue;
    const auto by = r.find(kBy), avoiding = r.find(kAvoiding);
    if (by == std::string::npos || avoiding == std::string::npos) continue;
    const auto colon = r.find(kColon, avoiding);
    ErrataRewrite rw;
    rw.original = r.substr(kOf.size(), by - kOf.size());
    rw.pass = r.substr(by + kBy.size(), avoiding - by - kBy.size());
    rw.erratum = r.substr(avoiding + kAvoiding.size(), colon - avoiding - kAvoiding.size());
    rw.how = colon == std::string::npos ? "" : r.substr(colon + kColon.size());
    rw.how = rw.how.substr(0, rw.how.find("; this one"));  // the per-layer detail
    auto it = std::find_if(out.begin(), out.end(), [&](const ErrataRewrite& e) {
      return e.original == rw.original && e.pass == rw.pass;
    });
    if (it == out.end()) {
      out.push_back(rw);
      it = out.end() - 1;
    }
    it->layers.push_back(name);
  }
  // The row-band pieces split_kernels made of a rewrite's conv (a global pool's H x W kernel).
  for (auto& rw : out) {
    std::vector<std::string> pieces;
    for (const auto& layer : rw.layers)
      for (const auto& name : ctx.placement_order)
        if (ctx.placement.at(name).reason.find("kernel of '" + layer + "' (split_kernels)") !=
            std::string::npos)
          pieces.push_back(name);
    rw.layers.insert(rw.layers.begin(), pieces.begin(), pieces.end());
  }
  return out;
}

std::string explain_errata(const CompileResult& r, const std::vector<std::uint64_t>& layer_cycles) {
  const auto rewrites = errata_rewrites(r.ctx);
  std::string s = "\nErrata rewrites (gati.md 14.15, DECISIONS.md 19):\n";
  std::uint64_t total = 0;
  for (auto c : layer_cycles) total += c;
  if (rewrites.empty()) {
    s += r.ctx.options.allow_errata ? "  none: --allow-errata keeps the erratum-hitting lowering\n"
                                    : "  none needed\n";
    if (!layer_cycles.empty())
      s += fmt::format("  the program takes {} layer cycles on the device model\n", total);
    return s;
  }
  std::uint64_t all = 0;
  for (const auto& rw : rewrites) {
    s += fmt::format("  '{}' avoids erratum {} ({}): {}\n", rw.original, rw.erratum, rw.pass,
                     rw.how);
    std::uint64_t cycles = 0;
    bool known = !layer_cycles.empty();
    for (const auto& name : rw.layers) {
      std::size_t i = 0;
      while (i < r.program.layers.size() && r.program.layers[i].name != name) ++i;
      if (i < r.program.layers.size() && i < layer_cycles.size())
        cycles += layer_cycles[i];
      else
        known = false;
    }
    if (known) {
      s += fmt::format("    {} device layer(s), {} cycles on the device model\n", rw.layers.size(),
                       cycles);
      all += cycles;
    } else {
      s += fmt::format("    {} device layer(s)\n", rw.layers.size());
    }
  }
  if (!layer_cycles.empty()) {
    s += fmt::format("  rewrites: {} of the program's {} layer cycles\n", all, total);
  }
  return s;
}

}  // namespace npukit::compiler
