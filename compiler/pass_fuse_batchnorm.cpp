// Pass 1, fuse_batchnorm: the v16 tail has no batch-norm stage (gati.md 7.2: "BatchNorm:
// documented as fused into conv by the compiler"). A float Conv whose only consumer is an
// inference BatchNormalization becomes one Conv with
//   W'[k] = W[k] * g[k] / sqrt(var[k] + eps),   B'[k] = (B[k] - mean[k]) * g[k] / sqrt(var[k] +
//   eps) + beta[k]
// so a later quantization (npukit quantize, or the QDQ pass) sees a plain conv. Int8 models have
// their batch norms folded already by whoever quantized them.
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>
#include <cmath>

namespace npukit::compiler {

namespace {

bool float_constant(const ir::Graph& g, const std::string& name) {
  const ir::Tensor* t = g.find(name);
  return t && t->is_constant() && t->dtype == ir::DType::kFloat32;
}

}  // namespace

void fuse_batchnorm(Context& ctx) {
  ir::Graph& g = ctx.graph;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& conv = g.nodes[i];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1) continue;
    if (conv.inputs.size() < 2 || !float_constant(g, conv.inputs[1])) continue;
    const bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
    if (has_bias && !float_constant(g, conv.inputs[2])) continue;
    auto consumers = g.consumers(conv.outputs[0]);
    if (consumers.size() != 1 || consumers[0]->op_type != "BatchNormalization") continue;
    const ir::Node* bn = consumers[0];
    if (bn->inputs.size() < 5 || bn->outputs.empty()) continue;
    if (std::find(g.outputs.begin(), g.outputs.end(), conv.outputs[0]) != g.outputs.end()) continue;
    bool constants = true;
    for (int k = 1; k <= 4; ++k) constants = constants && float_constant(g, bn->inputs[k]);
    if (!constants) continue;

    const auto gamma = constant_values(g.tensor(bn->inputs[1]));
    const auto beta = constant_values(g.tensor(bn->inputs[2]));
    const auto mean = constant_values(g.tensor(bn->inputs[3]));
    const auto var = constant_values(g.tensor(bn->inputs[4]));
    const double eps = bn->get_float("epsilon", 1e-5f);
    const ir::Tensor& w = g.tensor(conv.inputs[1]);
    const std::int64_t kn = w.shape.at(0);
    if (static_cast<std::int64_t>(gamma.size()) != kn || beta.size() != gamma.size() ||
        mean.size() != gamma.size() || var.size() != gamma.size())
      fail("BatchNormalization '{}' has {} channels but conv '{}' has {} kernels", bn->name,
           gamma.size(), conv.name, kn);
    std::vector<double> bias(kn, 0.0);
    if (has_bias) bias = constant_values(g.tensor(conv.inputs[2]));

    const auto wv = constant_values(w);
    const std::size_t per_kernel = wv.size() / static_cast<std::size_t>(kn);
    std::vector<float> new_w(wv.size());
    std::vector<float> new_b(kn);
    for (std::int64_t k = 0; k < kn; ++k) {
      const double f = gamma[k] / std::sqrt(var[k] + eps);
      for (std::size_t j = 0; j < per_kernel; ++j)
        new_w[k * per_kernel + j] = static_cast<float>(wv[k * per_kernel + j] * f);
      new_b[k] = static_cast<float>((bias[k] - mean[k]) * f + beta[k]);
    }
    const std::string bn_name = bn->name;
    const std::string bn_out = bn->outputs[0];
    const std::string w_name =
        add_constant(g, conv.name + "_bn_weight", ir::DType::kFloat32, w.shape, new_w.data());
    const std::string b_name =
        add_constant(g, conv.name + "_bn_bias", ir::DType::kFloat32, {kn}, new_b.data());
    ir::Node& c = g.nodes[i];  // add_constant does not touch nodes; re-take the reference anyway
    c.inputs.resize(3);
    c.inputs[1] = w_name;
    c.inputs[2] = b_name;
    const std::string old_out = c.outputs[0];
    c.outputs[0] = bn_out;
    g.tensors.erase(old_out);
    for (std::size_t j = 0; j < g.nodes.size(); ++j)
      if (g.nodes[j].name == bn_name && g.nodes[j].op_type == "BatchNormalization") {
        g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
  }
}

}  // namespace npukit::compiler
