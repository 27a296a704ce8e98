// Pass 16, generate_instructions: per layer, in execution order, exactly the group the v1.0.0 RTL
// ran (gati.md 4 and 14.10): MEGA_i, OutputBlock_i, [one merged TailBlock_i], START(i, N).
// Field values follow the RTL-confirmed notes of gati.md 3.2:
//   * all end addresses exclusive (End = Start + size), every address 32-byte aligned;
//   * CONV: real IW/IH/IC, KC = IC (1 for depthwise), Im2colPrefetch = [OH*OW < 1024];
//   * OutputBlock: ImageDimOutput = ceil_mod(OH*OW, 32/N_SA), ImageDimAcc = ceil_mod(OH*OW,
//     max(1, 8/N_SA)), OnChipAcc = [OH*OW <= 1024], AccEn from conv_geometry (0 for POOL),
//     OpWidth 1 (4 for int32 kernel-split partials), DispatchEn/DispatchID for outputs;
//   * TailBlock: BiasEn = 1, BiasWidth = 32, exclusive BiasEnd, QuantEn with scale and shift,
//     ActEn/ActType for the fused activation, GblPool* for a fused global average pool;
//   * a START after every megablock, POOL included; TotalLayers counts them all.
// Kernel-split pieces (split_kernels) turn negative pads into StartRowSkip/EndRowSkip and read
// the previous piece's int32 sums with AccumulantReadFirst = 1 from AccumulantAddr.
#include "common/error.h"
#include "compiler/backend.h"
#include "compiler/geometry.h"
#include "isa/host_layout.h"

#include <algorithm>
#include <set>

namespace npukit::compiler {

namespace {

using isa::Field;
using isa::Instruction;
using isa::Opcode;

std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }

struct Gen {
  const ir::Graph& g;
  DeviceProgram& prog;

  const DeviceTensor& tensor(const std::string& name) const { return prog.tensors.at(name); }
  std::uint64_t end_of(const DeviceTensor& t) const { return t.address + t.bytes; }

  Instruction output_block(const DeviceLayer& layer, const DeviceTensor& out, std::int64_t kitr,
                           std::int64_t citr, std::int64_t oh, std::int64_t ow, bool acc_en) const {
    Instruction o(Opcode::OutputBlock);
    const std::int64_t pixels = oh * ow;
    o.set(Field::OutputBlock_AccumulantAddr, prog.accumulant_address)
        .set(Field::OutputBlock_OutputAddr, out.address)
        .set(Field::OutputBlock_ChannelItr, u(citr))
        .set(Field::OutputBlock_KernelItr, u(kitr))
        .set(Field::OutputBlock_ImageDimOutput, aligned_pixels(pixels, prog.arch))
        .set(Field::OutputBlock_ImageDimAcc, acc_pixels(pixels, prog.arch))
        .set(Field::OutputBlock_AccEn, acc_en ? 1 : 0)
        .set(Field::OutputBlock_OnChipAcc, pixels <= kOnChipAccPixels ? 1 : 0)
        .set(Field::OutputBlock_OH, u(oh))
        .set(Field::OutputBlock_OW, u(ow))
        .set(Field::OutputBlock_OpWidth, out.kind == TensorKind::kActivation32 ? 4 : 1);
    if (layer.dispatch)
      o.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, layer.dispatch_id);
    return o;
  }

  // The merged TailBlock: bias, quantizer, activation, global pool (docs/ref-ops.md tail).
  Instruction tail_block(const DeviceLayer& layer, const ir::Node& n) const {
    Instruction t(Opcode::TailBlock);
    if (layer.bias >= 0) {
      const auto& b = prog.blobs[static_cast<std::size_t>(layer.bias)];
      t.set(Field::TailBlock_BiasEn, 1)
          .set(Field::TailBlock_BiasWidth, 32)
          .set(Field::TailBlock_BiasStartAddress, b.address)
          .set(Field::TailBlock_BiasEndAddress, b.address + b.bytes.size());
    }
    if (n.get_int("quant_en", 1) != 0) {
      t.set(Field::TailBlock_QuantEn, 1)
          .set_signed(Field::TailBlock_QuantScale, n.get_int("quant_scale", 1))
          .set(Field::TailBlock_QuantShift, u(n.get_int("quant_shift", 0)));
    }
    const std::string act = n.get_string("act", "none");
    if (act == "relu") {
      t.set(Field::TailBlock_ActEn, 1)
          .set(Field::TailBlock_ActType, u(static_cast<int>(isa::ActType::kRelu)));
    } else if (act == "clip") {
      t.set(Field::TailBlock_ActEn, 1)
          .set(Field::TailBlock_ActType, u(static_cast<int>(isa::ActType::kClip)))
          .set(Field::TailBlock_ActParam, u(n.get_int("act_param", 0)));
    } else if (act == "leaky") {
      t.set(Field::TailBlock_ActEn, 1)
          .set(Field::TailBlock_ActType, u(static_cast<int>(isa::ActType::kLeakyRelu)))
          .set(Field::TailBlock_NegAlpha, u(n.get_int("neg_alpha", 0)))
          .set(Field::TailBlock_PosAlpha, u(n.get_int("pos_alpha", 256)));
    } else if (act != "none") {
      fail("layer '{}': unknown activation '{}'", n.name, act);
    }
    if (n.get_int("global_pool", 0) != 0)
      t.set(Field::TailBlock_GblPoolEn, 1)
          .set(Field::TailBlock_GblPoolScale, u(n.get_int("global_pool_scale", 0)))
          .set(Field::TailBlock_GblPoolShift, u(n.get_int("global_pool_shift", 0)));
    return t;
  }

  void conv(DeviceLayer& layer, const ir::Node& n) const {
    const auto c = conv_geometry(g, n, prog.arch);
    const auto& x = tensor(n.inputs[0]);
    const auto& out = tensor(n.outputs[0]);
    const auto& w = prog.blobs[static_cast<std::size_t>(layer.weights)];
    // A padded depthwise conv reads its padding channel groups too (c.ic > the tensor's channels).
    const std::uint64_t image_end =
        c.depthwise
            ? std::max(end_of(x), x.address + isa::activation_bytes(c.ic, c.ih, c.iw, prog.arch))
            : end_of(x);
    Instruction m(Opcode::CONV);
    m.set(Field::CONV_IW, u(c.iw))
        .set(Field::CONV_IH, u(c.ih))
        .set(Field::CONV_IC, u(c.ic))
        .set(Field::CONV_KN, u(c.kn))
        .set(Field::CONV_KW, u(c.kw))
        .set(Field::CONV_KH, u(c.kh))
        .set(Field::CONV_Stride, u(c.stride_h))
        .set(Field::CONV_PadLeft, u(c.pad_left))
        .set(Field::CONV_PadRight, u(c.pad_right))
        .set(Field::CONV_PadTop, u(std::max<std::int64_t>(0, c.pad_top)))
        .set(Field::CONV_PadBottom, u(std::max<std::int64_t>(0, c.pad_bottom)))
        .set(Field::CONV_StartRowSkip, u(std::max<std::int64_t>(0, -c.pad_top)))
        .set(Field::CONV_EndRowSkip, u(std::max<std::int64_t>(0, -c.pad_bottom)))
        .set(Field::CONV_ImageStartAddress, x.address)
        .set(Field::CONV_ImageEndAddress, image_end)
        .set(Field::CONV_WeightStartAddress, w.address)
        .set(Field::CONV_WeightEndAddress, w.address + w.bytes.size())
        .set(Field::CONV_Im2colPrefetch, c.oh * c.ow < 1024 ? 1 : 0)
        .set(Field::CONV_KC, u(c.kc))
        .set(Field::CONV_ConvType, u(static_cast<int>(c.type)))
        .set(Field::CONV_ChannelDuplicate, c.channel_duplicate ? 1 : 0);
    layer.instructions.push_back(m);
    Instruction o = output_block(layer, out, c.kitr, c.citr, c.oh, c.ow, c.acc_en);
    if (n.get_int("global_pool", 0) != 0)  // the tail pool leaves one pixel per channel
      o.set(Field::OutputBlock_ImageDimOutput, aligned_pixels(1, prog.arch));
    if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
      const auto& acc = tensor(n.inputs[3]);
      if (c.acc_en && c.oh * c.ow > kOnChipAccPixels)
        fail(
            "layer '{}': a kernel-split piece with {} output pixels and {} input channels would "
            "need AccumulantAddr both for its own partial sums and for the previous piece's",
            n.name, c.oh * c.ow, c.ic);
      o.set(Field::OutputBlock_AccumulantAddr, acc.address)
          .set(Field::OutputBlock_AccumulantReadFirst, 1);
    }
    layer.instructions.push_back(o);
    layer.instructions.push_back(tail_block(layer, n));
  }

  void pool(DeviceLayer& layer, const ir::Node& n, bool first) const {
    const auto p = pool_geometry(g, n);
    const auto& x = tensor(n.inputs[0]);
    const auto& out = tensor(n.outputs[0]);
    Instruction m(Opcode::POOL);
    const bool global = p.type == isa::PoolType::kGlobalAverage;
    m.set(Field::POOL_IW, u(p.iw))
        .set(Field::POOL_IH, u(p.ih))
        .set(Field::POOL_IC, u(p.ic))
        .set(Field::POOL_ImageStartAddress, x.address)
        .set(Field::POOL_ImageEndAddress, end_of(x))
        .set(Field::POOL_PoolType, u(static_cast<int>(p.type)))
        .set(Field::POOL_PoolScale, u(n.get_int("pool_scale", 0)))
        .set(Field::POOL_PoolShift, u(n.get_int("pool_shift", 0)))
        .set(Field::POOL_PoolWidth, global ? 0 : u(p.kw))
        .set(Field::POOL_PoolHeight, global ? 0 : u(p.kh))
        .set(Field::POOL_PoolStrideWidth, global ? 0 : u(p.stride_w))
        .set(Field::POOL_PoolStrideHeight, global ? 0 : u(p.stride_h))
        .set(Field::POOL_PoolCeil, p.ceil_mode ? 1 : 0)
        .set(Field::POOL_PadLeft, u(p.pad_left))
        .set(Field::POOL_PadBottom, u(p.pad_bottom))
        .set(Field::POOL_PadRight, u(p.pad_right))
        .set(Field::POOL_PadTop, u(p.pad_top))
        .set(Field::POOL_Im2colPrefetch, p.oh * p.ow < 1024 ? 1 : 0);
    layer.instructions.push_back(m);
    layer.instructions.push_back(
        output_block(layer, out, static_cast<std::int64_t>(ceil_div(p.ic, prog.arch.n_sa)), 1, p.oh,
                     p.ow, false));
    if (first) layer.instructions.push_back(Instruction(Opcode::TailBlock));  // erratum workaround
  }

  void fc(DeviceLayer& layer, const ir::Node& n) const {
    const auto& x = tensor(n.inputs[0]);
    const auto& out = tensor(n.outputs[0]);
    const ir::Tensor& wt = g.tensor(n.inputs[1]);
    const std::int64_t m_out = wt.shape[0], k_in = wt.shape[1];
    if (k_in != x.c * x.h * x.w)
      fail("layer '{}': FC weights have {} inputs but its input '{}' has {} values", n.name, k_in,
           x.name, x.c * x.h * x.w);
    const auto& w = prog.blobs[static_cast<std::size_t>(layer.weights)];
    const bool flatten = x.kind == TensorKind::kActivation;
    Instruction f(Opcode::FC);
    f.set(Field::FC_WeightRows, u(k_in))
        .set(Field::FC_WeightCols, u(m_out))
        .set(Field::FC_InputRows, u(k_in))
        .set(Field::FC_Flatten, flatten ? 1 : 0)
        .set(Field::FC_ImageDim, flatten ? u(x.h * x.w) : 0)
        .set(Field::FC_ImageStartAddress, x.address)
        .set(Field::FC_ImageEndAddr, end_of(x))
        .set(Field::FC_WeightStartAddress, w.address)
        .set(Field::FC_WeightEndAddress, w.address + w.bytes.size())
        .set(Field::FC_Vec2MatCols, x.bytes / isa::kFcEngineCols);
    layer.instructions.push_back(f);
    Instruction o = output_block(
        layer, out, static_cast<std::int64_t>(ceil_div(m_out, isa::kFcEngineCols)), 1, 1, 1, false);
    o.set(Field::OutputBlock_ImageDimOutput,
          static_cast<std::uint64_t>(isa::kFcEngineCols / prog.arch.n_sa));
    layer.instructions.push_back(o);
    layer.instructions.push_back(tail_block(layer, n));
  }

  void eltwise(DeviceLayer& layer, const ir::Node& n) const {
    const auto& a = tensor(n.inputs[0]);
    const bool has_b = n.inputs.size() > 1 && !n.inputs[1].empty();
    const auto& b = has_b ? tensor(n.inputs[1]) : a;
    const auto& out = tensor(n.outputs[0]);
    static const std::map<std::string, isa::EltType> kTypes = {{"add", isa::EltType::kAdd},
                                                               {"sub", isa::EltType::kSub},
                                                               {"mult", isa::EltType::kMult},
                                                               {"sigmoid", isa::EltType::kSigmoid},
                                                               {"tanh", isa::EltType::kTanh}};
    const auto op = n.get_string("op", "add");
    auto it = kTypes.find(op);
    if (it == kTypes.end()) fail("layer '{}': unknown EltWise op '{}'", n.name, op);
    // A vector operand (ceil_mod(K, 32) bytes, an FC's output) is read as an image of N_SA
    // channels and bytes / N_SA pixels: that layout (gati.md 6.1) covers exactly the same bytes
    // with no padding, and an element-wise op does not care where its elements sit.
    std::int64_t ic = a.c, ih = a.h, iw = a.w;
    if (a.kind == TensorKind::kVector || b.kind == TensorKind::kVector) {
      if (a.kind != b.kind || a.bytes != b.bytes || out.kind != TensorKind::kVector)
        fail("layer '{}': an EltWise cannot mix an FC vector with an image", n.name);
      ic = prog.arch.n_sa;
      ih = 1;
      iw = static_cast<std::int64_t>(a.bytes) / prog.arch.n_sa;
    }
    Instruction e(Opcode::EltWise);
    e.set(Field::EltWise_EltType, u(static_cast<int>(it->second)))
        .set(Field::EltWise_IW, u(iw))
        .set(Field::EltWise_IH, u(ih))
        .set(Field::EltWise_IC, u(ic))
        .set(Field::EltWise_LeftOperandStartAddress, a.address)
        .set(Field::EltWise_LeftOperandEndAddress, end_of(a))
        .set(Field::EltWise_RightOperandStartAddress, b.address)
        .set(Field::EltWise_RightOperandEndAddress, end_of(b))
        .set_signed(Field::EltWise_AScale, n.get_int("a_scale", 0))
        .set_signed(Field::EltWise_BScale, n.get_int("b_scale", 0))
        .set_signed(Field::EltWise_AZeroPoint, n.get_int("a_zero_point", 0))
        .set_signed(Field::EltWise_BZeroPoint, n.get_int("b_zero_point", 0));
    layer.instructions.push_back(e);
    layer.instructions.push_back(output_block(
        layer, out, static_cast<std::int64_t>(ceil_div(ic, prog.arch.n_sa)), 1, ih, iw, false));
    layer.instructions.push_back(tail_block(layer, n));
  }

  void resize(DeviceLayer& layer, const ir::Node& n, bool first) const {
    const auto& x = tensor(n.inputs[0]);
    const auto& out = tensor(n.outputs[0]);
    Instruction r(Opcode::RESIZE);
    r.set(Field::RESIZE_IW, u(x.w))
        .set(Field::RESIZE_IH, u(x.h))
        .set(Field::RESIZE_IC, u(x.c))
        .set(Field::RESIZE_ImageStartAddress, x.address)
        .set(Field::RESIZE_ImageEndAddress, end_of(x));
    layer.instructions.push_back(r);
    layer.instructions.push_back(
        output_block(layer, out, static_cast<std::int64_t>(ceil_div(x.c, prog.arch.n_sa)), 1,
                     2 * x.h, 2 * x.w, false));
    if (first) layer.instructions.push_back(Instruction(Opcode::TailBlock));
  }

  void concat(DeviceLayer& layer, const ir::Node& n, bool first) const {
    static const Field kStart[] = {
        Field::CONCAT_Image1StartAddress, Field::CONCAT_Image2StartAddress,
        Field::CONCAT_Image3StartAddress, Field::CONCAT_Image4StartAddress};
    static const Field kIh[] = {Field::CONCAT_IH1, Field::CONCAT_IH2, Field::CONCAT_IH3,
                                Field::CONCAT_IH4};
    static const Field kKn[] = {Field::CONCAT_KN1, Field::CONCAT_KN2, Field::CONCAT_KN3,
                                Field::CONCAT_KN4};
    Instruction c(Opcode::CONCAT);
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const auto& x = tensor(n.inputs[k]);
      c.set(kStart[k], x.address).set(kIh[k], u(x.h)).set(kKn[k], u(x.c));
    }
    c.set(Field::CONCAT_InNum, n.inputs.size());
    layer.instructions.push_back(c);
    const auto& out = tensor(n.outputs[0]);
    layer.instructions.push_back(
        output_block(layer, out, static_cast<std::int64_t>(ceil_div(out.c, prog.arch.n_sa)), 1,
                     out.h, out.w, false));
    if (first) layer.instructions.push_back(Instruction(Opcode::TailBlock));
  }
};

}  // namespace

void generate_instructions(Context& ctx, DeviceProgram& prog) {
  const ir::Graph& g = ctx.graph;
  // Dispatch ids: gaticc's hash of the layer name, made unique (the runtime tells frames apart by
  // id; two layers with anagram names would otherwise collide).
  std::set<std::uint32_t> used;
  for (auto& layer : prog.layers) {
    if (!layer.dispatch) continue;
    std::uint32_t id = dispatch_hash(layer.name);
    while (used.count(id)) {
      ctx.warnings.push_back("dispatch id of layer '" + layer.name + "' collides; using " +
                             std::to_string(id + 1));
      ++id;
    }
    used.insert(id);
    layer.dispatch_id = id;
  }
  Gen gen{g, prog};
  const std::size_t total = prog.layers.size();
  for (const auto& seg : prog.segments)
    if (seg.layer_count > 4095)
      fail("a device segment has {} layers; START.TotalLayers holds at most 4095", seg.layer_count);
  prog.instructions.clear();
  std::size_t seg_index = 0;
  for (std::size_t i = 0; i < total; ++i) {
    DeviceLayer& layer = prog.layers[i];
    while (seg_index + 1 < prog.segments.size() && prog.segments[seg_index + 1].first_layer <= i)
      ++seg_index;
    DeviceSegment& seg = prog.segments.at(seg_index);
    if (i == seg.first_layer) seg.first_instruction = prog.instructions.size();
    const ir::Node& n = g.nodes[layer.node];
    layer.instructions.clear();
    switch (layer.opcode) {
      case Opcode::CONV:
        gen.conv(layer, n);
        break;
      case Opcode::POOL:
        gen.pool(layer, n, first_in_segment(prog, i));
        break;
      case Opcode::FC:
        gen.fc(layer, n);
        break;
      case Opcode::EltWise:
        gen.eltwise(layer, n);
        break;
      case Opcode::RESIZE:
        gen.resize(layer, n, first_in_segment(prog, i));
        break;
      case Opcode::CONCAT:
        gen.concat(layer, n, first_in_segment(prog, i));
        break;
      default:
        fail("layer '{}': no instruction generator for {}", layer.name, isa::name(layer.opcode));
    }
    isa::Instruction start(Opcode::START);
    // Each segment is started on its own, so it counts its layers from 1 (gati.md 4).
    start.set(Field::START_LayerNumber, i - seg.first_layer + 1)
        .set(Field::START_TotalLayers, seg.layer_count);
    layer.instructions.push_back(start);
    if (layer.instructions.size() != instruction_count(prog, i))
      fail("internal: layer '{}' has {} instructions, the DRAM map reserved {}", layer.name,
           layer.instructions.size(), instruction_count(prog, i));
    prog.instructions.insert(prog.instructions.end(), layer.instructions.begin(),
                             layer.instructions.end());
    seg.instruction_count = prog.instructions.size() - seg.first_instruction;
  }
  for (const auto& seg : prog.segments)
    if (prog.layers[seg.first_layer].opcode == Opcode::POOL)
      ctx.warnings.push_back("layer '" + prog.layers[seg.first_layer].name +
                             "': a POOL as the first megablock needs a TailBlock on v1.0.0 "
                             "(gati.md 14.6); an empty one was added");
}

}  // namespace npukit::compiler
