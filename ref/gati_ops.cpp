// Binds the npukit.gati ops (docs/ref-ops.md) to the Gati-exact kernels.
#include "common/error.h"
#include "ref/gati_kernels.h"
#include "ref/kernel_registry.h"

namespace npukit::ref {

namespace {

void check_inputs(const ir::Node& node, const OpInputs& in, std::size_t lo, std::size_t hi) {
  if (in.size() < lo || in.size() > hi) fail("takes {} to {} inputs, got {}", lo, hi, in.size());
}

}  // namespace

void add_gati_kernels(KernelTable& table) {
  const std::string d = "npukit.gati";
  table[{d, "GatiConv"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 2, 4);
    auto p = gati::conv_params(node);
    auto kernel = node.get_ints("kernel_shape", {});
    const ir::Tensor& w = in.at(1);
    if (!kernel.empty() && (kernel.size() != 2 || w.shape.size() != 4 || kernel[0] != w.shape[2] ||
                            kernel[1] != w.shape[3]))
      fail("kernel_shape does not match the weight shape");
    return std::vector<ir::Tensor>{gati::conv(in.at(0), w, in.optional(2), in.optional(3), p)};
  };
  table[{d, "GatiFC"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 2, 3);
    return std::vector<ir::Tensor>{
        gati::fully_connected(in.at(0), in.at(1), in.optional(2), gati::tail_params(node, false))};
  };
  table[{d, "GatiPool"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 1, 1);
    return std::vector<ir::Tensor>{gati::pool(in.at(0), gati::pool_params(node))};
  };
  table[{d, "GatiEltwise"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 1, 2);
    auto p = gati::eltwise_params(node);
    const bool unary = p.op == gati::EltOp::kSigmoid || p.op == gati::EltOp::kTanh;
    if (!unary && !in.optional(1)) fail("op '{}' needs input b", node.get_string("op", ""));
    return std::vector<ir::Tensor>{gati::eltwise(in.at(0), in.optional(1), p)};
  };
  table[{d, "GatiResize"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 1, 1);
    if (node.get_int("scale", 2) != 2) fail("only 2x nearest resize exists (attribute scale)");
    return std::vector<ir::Tensor>{gati::resize2x(in.at(0))};
  };
  table[{d, "GatiConcat"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 1, 4);
    if (node.get_int("axis", 1) != 1) fail("concatenates along axis 1 only");
    std::vector<const ir::Tensor*> xs;
    for (std::size_t i = 0; i < in.size(); ++i) xs.push_back(&in.at(i));
    return std::vector<ir::Tensor>{gati::concat_channels(xs)};
  };
  table[{d, "GatiTranspose"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 1, 1);
    if (node.get_ints("perm", {0, 2, 3, 1}) != std::vector<std::int64_t>{0, 2, 3, 1})
      fail("perm must be [0, 2, 3, 1] (CHW to HWC)");
    return std::vector<ir::Tensor>{gati::transpose_chw_to_hwc(in.at(0))};
  };
  table[{d, "GatiNms"}] = [](const ir::Node& node, const OpInputs& in) {
    check_inputs(node, in, 2, 2);
    return std::vector<ir::Tensor>{gati::nms(in.at(0), in.at(1), gati::nms_params(node))};
  };
}

}  // namespace npukit::ref
