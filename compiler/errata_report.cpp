// The "Errata rewrites" section of `npukit compile --explain`: each rewrite that steers around a
// v1.0.0 erratum (pools_as_convs, lower_concat, clear_resize_padding, pad_kernel_iterations), the
// erratum it avoids, the device layers doing the work now and, when the caller ran the program on
// the device model, their cycles (timing does not depend on the data).
#include "compiler/errata_passes.h"

#include "common/bytes.h"
#include "compiler/backend.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"
#include "isa/host_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace npukit::compiler {

namespace {
constexpr std::string_view kOf = "rewrite of '", kBy = "' by ",
                           kAvoiding = " avoiding v1.0.0 erratum ", kColon = ": ";
bool is_view(const Context& ctx, const std::string& name) {
  for (const auto& n : ctx.graph.nodes)
    if (n.name == name) return is_device_view(n);
  return false;
}

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
  // pad_kernel_iterations marks the layers it pads (attribute kernel_count_padded).
  for (const auto& n : ctx.graph.nodes) {
    if (!n.has("kernel_count_padded")) continue;
    ErrataRewrite rw;
    rw.original = n.name;
    rw.pass = "pad_kernel_iterations";
    rw.erratum = "E5 9,4,4 conv after odd KernelItr";
    rw.how = fmt::format("computes {} {} (the extra ones all zero) for an even KernelItr",
                         n.get_int("kernel_count_padded", 0),
                         conv_geometry(ctx.graph, n, ctx.options.arch).depthwise
                             ? "channels of a depthwise conv"
                             : "kernels");
    rw.layers = {n.name};
    rw.padded = true;
    out.push_back(rw);
  }
  // The row-band pieces split_kernels made of a rewrite's conv (a global pool's H x W kernel).
  for (auto& rw : out) {
    if (rw.padded) continue;
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

std::vector<isa::Instruction> unpadded_instructions(const CompileResult& r, std::size_t layer) {
  const DeviceLayer& l = r.program.layers.at(layer);
  std::vector<isa::Instruction> ins = l.instructions;
  const ir::Node& n = r.ctx.graph.nodes.at(l.node);
  if (!n.has("kernel_count_padded") || ins.size() < 3) return ins;
  const isa::SaArch& arch = r.program.arch;
  ir::Node plain = n;
  plain.attributes.erase("kernel_count_padded");
  const ConvGeometry c = conv_geometry(r.ctx.graph, plain, arch);
  using isa::Field;
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  isa::Instruction& m = ins[0];
  m.set(Field::CONV_KN, u(c.kn)).set(Field::CONV_IC, u(c.ic));
  m.set(Field::CONV_ImageEndAddress,
        m.get(Field::CONV_ImageStartAddress) + isa::activation_bytes(c.ic, c.ih, c.iw, arch));
  m.set(Field::CONV_WeightEndAddress,
        m.get(Field::CONV_WeightStartAddress) +
            ceil_mod(u(c.kitr * c.citr) * arch.rows * arch.cols * arch.n_sa, 32));
  ins[1].set(Field::OutputBlock_KernelItr, u(c.kitr));
  if (ins[2].opcode() == isa::Opcode::TailBlock && ins[2].get(Field::TailBlock_BiasEn) != 0)
    ins[2].set(Field::TailBlock_BiasEndAddress, ins[2].get(Field::TailBlock_BiasStartAddress) +
                                                    ceil_mod(ceil_mod(u(c.kn), arch.n_sa) * 4, 32));
  return ins;
}

std::string explain_errata(const CompileResult& r, const std::vector<std::uint64_t>& layer_cycles,
                           const LayerTimer& timer) {
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
    if (rw.padded) {
      std::size_t i = 0;
      while (i < r.program.layers.size() && r.program.layers[i].name != rw.original) ++i;
      if (timer && i < r.program.layers.size()) {
        const std::uint64_t padded = timer(r.program.layers[i].instructions),
                            plain = timer(unpadded_instructions(r, i));
        const std::uint64_t extra = padded > plain ? padded - plain : 0;
        s += fmt::format("    1 device layer, {} extra cycles ({} unpadded -> {} padded)\n", extra,
                         plain, padded);
        all += extra;
      } else {
        s += "    1 device layer\n";
      }
      continue;
    }
    std::uint64_t cycles = 0;
    std::size_t count = 0;
    bool known = !layer_cycles.empty();
    for (const auto& name : rw.layers) {
      if (is_view(r.ctx, name)) continue;  // lower_concat's in-place concat: no layer, no cycles
      ++count;
      std::size_t i = 0;
      while (i < r.program.layers.size() && r.program.layers[i].name != name) ++i;
      if (i < r.program.layers.size() && i < layer_cycles.size())
        cycles += layer_cycles[i];
      else
        known = false;
    }
    if (known) {
      s += fmt::format("    {} device layer(s), {} cycles on the device model\n", count, cycles);
      all += cycles;
    } else {
      s += fmt::format("    {} device layer(s)\n", count);
    }
  }
  if (!layer_cycles.empty()) {
    s += fmt::format("  rewrites: {} of the program's {} layer cycles\n", all, total);
  }
  return s;
}

}  // namespace npukit::compiler
