// Hard-swish and hard-sigmoid as exporters write them, rewritten into the ONNX ops at import (see
// proto_util.h): x * Clip(x + 3, 0, 6) / 6 in its orders, and x * HardSigmoid(x) (torch below
// opset 14). The quantizer and compiler then see one activation instead of float arithmetic with
// scalar constants.
#include "ir/tensor_util.h"
#include "onnx/proto_util.h"

#include <cmath>
#include <map>
#include <set>

namespace npukit::onnxio {

namespace {

class Fuser {
 public:
  explicit Fuser(ir::Graph& g) : g_(g) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& o : g.nodes[i].outputs) producer_[o] = i;
    for (const auto& n : g.nodes)
      for (const auto& i : n.inputs) ++uses_[i];
    for (const auto& o : g.outputs) uses_[o] += 2;  // a graph output is never an inner value
  }

  int run() {
    int fused = 0;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      std::vector<std::size_t> inner;
      std::string x;
      if (auto kind = match(i, inner, x)) {
        ir::Node& n = g_.nodes[i];
        std::string out = n.outputs[0];
        n.op_type = *kind;
        n.domain.clear();
        n.inputs = {x};
        n.outputs = {out};
        n.attributes.clear();
        if (*kind == "HardSigmoid") {
          n.attributes["alpha"] = 1.f / 6.f;
          n.attributes["beta"] = 0.5f;
        }
        dead_.insert(inner.begin(), inner.end());
        ++fused;
      }
    }
    if (!fused) return 0;
    std::vector<ir::Node> kept;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_.count(i)) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    if (g_.opset < 14) {  // HardSwish is an opset 14 op; nothing used here changed from 13 to 14
      g_.opset = 14;
      g_.opsets[""] = 14;
    }
    return fused;
  }

 private:
  // The scalar value of a constant input, if it is one.
  std::optional<float> scalar(const std::string& name) const {
    const ir::Tensor* t = g_.find(name);
    if (!t || !t->is_constant() || ir::element_count(t->shape) != 1) return std::nullopt;
    if (t->dtype != ir::DType::kFloat32 && t->dtype != ir::DType::kFloat64) return std::nullopt;
    return ir::to_float_vector(*t).at(0);
  }
  static bool near(std::optional<float> v, float want) {
    return v && std::fabs(*v - want) <= 1e-6f * std::max(1.f, std::fabs(want));
  }
  // The node producing `value` when it is op `op`, not yet consumed by another pattern and used
  // only once.
  const ir::Node* inner(const std::string& value, const char* op,
                        std::vector<std::size_t>& seen) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || dead_.count(it->second)) return nullptr;
    auto u = uses_.find(value);
    if (u == uses_.end() || u->second != 1) return nullptr;
    const ir::Node& n = g_.nodes[it->second];
    if (n.op_type != op || !n.domain.empty() || n.outputs.size() != 1) return nullptr;
    seen.push_back(it->second);
    return &n;
  }
  // The constant operand of a two-input node and the other operand.
  bool split(const ir::Node& n, float want, std::string& other, bool commutative) const {
    if (n.inputs.size() != 2) return false;
    if (near(scalar(n.inputs[1]), want)) {
      other = n.inputs[0];
      return true;
    }
    if (commutative && near(scalar(n.inputs[0]), want)) {
      other = n.inputs[1];
      return true;
    }
    return false;
  }
  // `value` = Clip(x + 3, 0, 6) (Clip with constant bounds, or Relu6 written as Min(Max(..)));
  // returns x.
  std::optional<std::string> relu6_of_x_plus_3(const std::string& value,
                                               std::vector<std::size_t>& seen) const {
    std::vector<std::size_t> local;
    const ir::Node* clip = inner(value, "Clip", local);
    if (!clip || clip->inputs.size() != 3 || !near(scalar(clip->inputs[1]), 0.f) ||
        !near(scalar(clip->inputs[2]), 6.f))
      return std::nullopt;
    const ir::Node* add = inner(clip->inputs[0], "Add", local);
    std::string x;
    if (!add || !split(*add, 3.f, x, true)) return std::nullopt;
    seen.insert(seen.end(), local.begin(), local.end());
    return x;
  }
  // `value` = y / 6 or y * (1/6); returns y.
  std::optional<std::string> sixth_of(const std::string& value,
                                      std::vector<std::size_t>& seen) const {
    std::vector<std::size_t> local;
    std::string y;
    if (const ir::Node* div = inner(value, "Div", local); div && split(*div, 6.f, y, false)) {
      seen.insert(seen.end(), local.begin(), local.end());
      return y;
    }
    local.clear();
    if (const ir::Node* mul = inner(value, "Mul", local); mul && split(*mul, 1.f / 6.f, y, true)) {
      seen.insert(seen.end(), local.begin(), local.end());
      return y;
    }
    return std::nullopt;
  }
  // `value` = hard_sigmoid(x) in any exported form; returns x.
  std::optional<std::string> hard_sigmoid_of(const std::string& value,
                                             std::vector<std::size_t>& seen) const {
    std::vector<std::size_t> local;
    if (const ir::Node* hs = inner(value, "HardSigmoid", local)) {
      if (near(hs->get_float("alpha", 0.2f), 1.f / 6.f) &&
          near(hs->get_float("beta", 0.5f), 0.5f)) {
        seen.insert(seen.end(), local.begin(), local.end());
        return hs->inputs[0];
      }
      return std::nullopt;
    }
    local.clear();
    if (auto y = sixth_of(value, local))
      if (auto x = relu6_of_x_plus_3(*y, local)) {
        seen.insert(seen.end(), local.begin(), local.end());
        return x;
      }
    return std::nullopt;
  }

  // Node i as the last node of hard-swish (returns "HardSwish") or hard-sigmoid written out
  // (returns "HardSigmoid"); `inner` gets the nodes it replaces, `x` the input.
  std::optional<std::string> match(std::size_t i, std::vector<std::size_t>& seen, std::string& x) {
    const ir::Node& n = g_.nodes[i];
    if (!n.domain.empty() || n.outputs.size() != 1 || dead_.count(i)) return std::nullopt;
    if (n.op_type == "Mul" && n.inputs.size() == 2) {
      // x * hard_sigmoid(x)
      for (int k = 0; k < 2; ++k) {
        std::vector<std::size_t> local;
        auto hx = hard_sigmoid_of(n.inputs[1 - k], local);
        if (hx && *hx == n.inputs[k]) {
          seen = local;
          x = *hx;
          return "HardSwish";
        }
      }
    }
    if (n.op_type == "Div" || n.op_type == "Mul") {
      // (x * relu6(x + 3)) / 6, or hard_sigmoid written out as relu6(x + 3) / 6
      std::string y;
      if ((n.op_type == "Div" && split(n, 6.f, y, false)) ||
          (n.op_type == "Mul" && split(n, 1.f / 6.f, y, true))) {
        std::vector<std::size_t> local;
        if (const ir::Node* mul = inner(y, "Mul", local); mul && mul->inputs.size() == 2) {
          for (int k = 0; k < 2; ++k) {
            std::vector<std::size_t> l2 = local;
            auto rx = relu6_of_x_plus_3(mul->inputs[1 - k], l2);
            if (rx && *rx == mul->inputs[k]) {
              seen = l2;
              x = *rx;
              return "HardSwish";
            }
          }
        }
        local.clear();
        if (auto rx = relu6_of_x_plus_3(y, local)) {
          seen = local;
          x = *rx;
          return "HardSigmoid";
        }
      }
    }
    return std::nullopt;
  }

  ir::Graph& g_;
  std::map<std::string, std::size_t> producer_;
  std::map<std::string, int> uses_;
  std::set<std::size_t> dead_;
};

}  // namespace

int fuse_hard_activations(ir::Graph& graph) { return Fuser(graph).run(); }

}  // namespace npukit::onnxio
