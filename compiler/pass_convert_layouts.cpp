// Pass 13, convert_layouts: turns each layer's logical weights and biases into the DRAM blobs the
// megablocks read (compiler/layout.h has the arithmetic; gati.md 6.2 and 14.1). Blobs are listed in
// the stream order of gati.md 4: per layer in execution order, its weights then its bias.
// Activations are converted at run time by the runtime with the same layout functions.
//
// Every CONV and FC gets a bias blob, zeros when the model has none: the RTL-confirmed TailBlock
// (gati.md 3.2) always has BiasEn = 1, and a zero bias is exact.
#include "common/error.h"
#include "compiler/backend.h"
#include "compiler/geometry.h"
#include "compiler/layout.h"

#include <span>

namespace npukit::compiler {

namespace {

std::vector<std::int32_t> bias_values(const ir::Graph& g, const ir::Node& n, std::size_t input,
                                      std::int64_t count) {
  std::vector<std::int32_t> b(static_cast<std::size_t>(count), 0);
  if (input < n.inputs.size() && !n.inputs[input].empty()) {
    const ir::Tensor& t = g.tensor(n.inputs[input]);
    if (t.dtype != ir::DType::kInt32 || ir::element_count(t.shape) != count)
      fail("layer '{}': bias '{}' must be int32 with {} elements", n.name, t.name, count);
    for (std::int64_t i = 0; i < count; ++i) b[i] = t.as<std::int32_t>()[i];
  }
  return b;
}

std::span<const std::int8_t> int8_data(const ir::Tensor& t, const ir::Node& n) {
  if (t.dtype != ir::DType::kInt8 || !t.is_constant())
    fail("layer '{}': weights '{}' must be an int8 constant", n.name, t.name);
  return {t.as<std::int8_t>(), static_cast<std::size_t>(ir::element_count(t.shape))};
}

}  // namespace

void convert_layouts(const Context& ctx, DeviceProgram& prog) {
  const ir::Graph& g = ctx.graph;
  prog.blobs.clear();
  for (auto& layer : prog.layers) {
    const ir::Node& n = g.nodes[layer.node];
    if (layer.opcode == isa::Opcode::CONV) {
      const auto geo = conv_geometry(g, n, prog.arch);
      const ir::Tensor& w = g.tensor(n.inputs[1]);
      auto data = int8_data(w, n);
      std::vector<std::int8_t> rows;  // a split piece: only its kernel rows go to the array
      if (geo.kh != w.shape.at(2)) {
        const std::int64_t full = w.shape[2], kw = w.shape[3], per = w.shape[0] * w.shape[1];
        for (std::int64_t i = 0; i < per; ++i)
          for (std::int64_t r = geo.row_offset; r < geo.row_offset + geo.kh; ++r)
            for (std::int64_t s = 0; s < kw; ++s) rows.push_back(data[(i * full + r) * kw + s]);
        data = rows;
      }
      layer.weights = static_cast<int>(prog.blobs.size());
      prog.blobs.push_back({n.name, "weights", pack_conv_weights(data, geo, prog.arch)});
      layer.bias = static_cast<int>(prog.blobs.size());
      prog.blobs.push_back(
          {n.name, "bias",
           pack_conv_bias(bias_values(g, n, 2, geo.kn_weights), geo.kn, prog.arch)});
    } else if (layer.opcode == isa::Opcode::FC) {
      const ir::Tensor& w = g.tensor(n.inputs[1]);
      const std::int64_t m = w.shape.at(0), k = w.shape.at(1);
      layer.weights = static_cast<int>(prog.blobs.size());
      prog.blobs.push_back({n.name, "weights", pack_fc_weights(int8_data(w, n), m, k)});
      layer.bias = static_cast<int>(prog.blobs.size());
      prog.blobs.push_back({n.name, "bias", pack_fc_bias(bias_values(g, n, 2, m), m, prog.arch)});
    }
  }
}

}  // namespace npukit::compiler
