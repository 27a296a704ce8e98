// Pass 6, partition: cuts the graph into an ordered list of segments, each run entirely by the
// host or entirely by the Gati, as many as the model needs (docs/compiler.md, "Segments").
//
// assign_devices has said, node by node, what the Gati could run. partition gives every node a
// segment index (Context::segment_of) and sorts the graph so each segment's nodes are contiguous:
// a node goes into the earliest segment of its kind that comes after the segments of everything
// it reads, with host and device segments alternating. That is the fewest segments any schedule
// of this placement has (the longest host/device alternation along a path), and a host op in the
// middle of the network becomes a host segment between two device segments.
//
// Cuts cost time on a real board: what a device segment reads from the host goes over DWP, what
// the host reads from it comes back in dispatch frames, and each segment is one more start. A
// device segment whose estimated transfer cycles exceed its estimated device cycles buys nothing,
// so it goes back to the host (unless it is the model's biggest device segment), and the
// placement is recomputed until every remaining cut pays for itself.
//
// It runs twice: on the ONNX graph right after assign_devices (where it decides, and counts the
// model's MACs), and at the end of the lowering, where it only re-derives the segments of the
// npukit.gati graph (lowering never moves work across a cut, so the device segments stay the same).
#include "common/error.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"
#include "isa/host_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace npukit::compiler {

namespace {

// gati.md 14.12: a 3x3 conv keeps about 77 % of the array's ROW*COLS*N_SA MACs per cycle busy.
constexpr double kArrayEfficiency = 0.77;
constexpr std::uint64_t kDramLatency = 12;  // cycles, the figure of gati.md 14.12
constexpr std::uint64_t kDwpHeaderBytes = 12;
constexpr std::uint64_t kDispatchOverheadBytes = 24;  // header + footer of a dispatch frame
// The device model's timing constants (least-squares fit to the RTL cycle recordings, gati.md
// 14.14; `npukit profile` lists them): every megablock pays a START/prefetch overhead, every conv
// pass (channel iteration x kernel iteration) re-requests its image and fills/drains the array,
// and a pass that writes output pays more. On small images these, not the MACs, are the cost.
constexpr double kLayerCycles = 90.6;
constexpr double kConvPassCycles = 78.3;
constexpr double kConvWritePassCycles = 48.1;

std::uint64_t element_count(const ir::Tensor& t) {
  std::uint64_t n = 1;
  for (auto d : t.shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1));
  return n;
}

}  // namespace

std::uint64_t node_macs(const ir::Graph& g, const ir::Node& n) {
  const std::string& op = n.op_type;
  auto tensor = [&](std::size_t i) -> const ir::Tensor* {
    return i < n.inputs.size() && !n.inputs[i].empty() ? g.find(n.inputs[i]) : nullptr;
  };
  const ir::Tensor* out = n.outputs.empty() ? nullptr : g.find(n.outputs[0]);
  if (!out) return 0;
  std::size_t w = 0;
  if (op == "ConvTranspose" || op == "QLinearConvTranspose") {
    // Every input element meets M/group * KH * KW weights (W is [C, M/group, k...]).
    const ir::Tensor* x = tensor(0);
    const ir::Tensor* wt = tensor(op == "ConvTranspose" ? 1 : 3);
    if (!x || !wt || wt->shape.size() < 3 || ir::element_count(x->shape) < 0) return 0;
    std::uint64_t per = 1;
    for (std::size_t d = 1; d < wt->shape.size(); ++d)
      per *= static_cast<std::uint64_t>(std::max<std::int64_t>(wt->shape[d], 1));
    return per * static_cast<std::uint64_t>(ir::element_count(x->shape));
  }
  if ((op == "QLinearConv" || op == "GatiConv") && !channel_copy_sources(g, n).empty())
    return 0;  // a channel shuffle or Slice (channel_copies): data movement, no model MACs
  if (op == "Conv" || op == "GatiConv" || op == "ConvInteger")
    w = 1;
  else if (op == "QLinearConv")
    w = 3;
  else if (op == "Gemm" || op == "MatMul" || op == "GatiFC" || op == "MatMulInteger")
    w = 1;
  else if (op == "QGemm" || op == "QLinearMatMul")
    w = 3;
  else
    return 0;
  const ir::Tensor* wt = tensor(w);
  if (!wt || wt->shape.empty()) return 0;
  const bool conv = op.find("Conv") != std::string::npos;
  if (conv) {
    // Every output element takes C_in/group * KH * KW products: the weight's [1:] dimensions.
    std::uint64_t per = 1;
    for (std::size_t d = 1; d < wt->shape.size(); ++d)
      per *= static_cast<std::uint64_t>(std::max<std::int64_t>(wt->shape[d], 1));
    // Kernel-split pieces (split_kernels) carry their rows; count only those.
    if (n.has("kernel_rows") && wt->shape.size() == 4 && wt->shape[2] > 0) {
      const auto rows = n.get_ints("kernel_rows", {});
      if (rows.size() == 2)
        per = per / static_cast<std::uint64_t>(wt->shape[2]) *
              static_cast<std::uint64_t>(rows[1] - rows[0]);
    }
    return element_count(*out) * per;
  }
  // Fully connected: every output element takes K products, K = the weight's other dimension.
  if (wt->shape.size() != 2) return 0;
  const std::uint64_t outs = element_count(*out);
  const std::uint64_t a = static_cast<std::uint64_t>(std::max<std::int64_t>(wt->shape[0], 1));
  const std::uint64_t b = static_cast<std::uint64_t>(std::max<std::int64_t>(wt->shape[1], 1));
  const std::uint64_t m = out->shape.empty() ? 1 : static_cast<std::uint64_t>(out->shape.back());
  const std::uint64_t k = (m == b) ? a : b;  // [K, M] or transposed [M, K]
  return outs * k;
}

namespace {

// Fixed cycles of one device node beside its MACs: the layer overhead, and for a conv its passes
// (regular: ceil(C / N_SA) channel x ceil(KN / COLS) kernel iterations, a grouped conv as its
// block-diagonal form; depthwise: ceil(KN / N_SA) kernel iterations).
double overhead_cycles(const ir::Graph& g, const ir::Node& n, const isa::SaArch& arch) {
  // Folded into the FC (FC.Flatten) or into a producer's TailBlock: no megablock of their own.
  if (n.op_type == "Flatten" || n.op_type == "Reshape" || n.op_type == "Relu" ||
      n.op_type == "Clip")
    return 0;
  if (n.op_type != "QLinearConv" && n.op_type != "GatiConv") return kLayerCycles;
  const std::size_t wi = n.op_type == "QLinearConv" ? 3 : 1;
  const ir::Tensor* w = wi < n.inputs.size() ? g.find(n.inputs[wi]) : nullptr;
  const ir::Tensor* x = n.inputs.empty() ? nullptr : g.find(n.inputs[0]);
  if (!w || !x || w->shape.size() != 4 || x->shape.size() != 4) return kLayerCycles;
  auto up = [](std::int64_t a, std::int64_t b) {
    return (std::max<std::int64_t>(a, 1) + b - 1) / b;
  };
  const std::int64_t kn = w->shape[0], c = x->shape[1], group = n.get_int("group", 1);
  const bool depthwise = group > 1 && group == c && w->shape[1] == 1;
  const std::int64_t kitr = depthwise ? up(kn, arch.n_sa) : up(kn, arch.cols);
  const std::int64_t citr = depthwise ? 1 : up(c, arch.n_sa);
  return kLayerCycles + static_cast<double>(kitr * citr) * kConvPassCycles +
         static_cast<double>(kitr) * kConvWritePassCycles;
}

}  // namespace

std::uint64_t device_bytes_of(const ir::Tensor& t, const isa::SaArch& arch) {
  if (t.shape.size() == 4)
    return isa::activation_bytes(std::max<std::int64_t>(t.shape[1], 1),
                                 std::max<std::int64_t>(t.shape[2], 1),
                                 std::max<std::int64_t>(t.shape[3], 1), arch);
  return isa::vector_bytes(static_cast<std::int64_t>(element_count(t)));
}

std::uint64_t dwp_cycles(std::uint64_t bytes) { return (kDwpHeaderBytes + bytes + 3) / 4; }

std::uint64_t dispatch_cycles(std::uint64_t bytes) {
  return kDramLatency + (bytes + 31) / 32 + (bytes + kDispatchOverheadBytes + 3) / 4;
}

std::uint64_t segment_start_cycles() {
  // The zeroth instruction rewritten (one 32-byte DWP packet), the start packet, the
  // configuration block's two DRAM reads before the first instruction.
  return dwp_cycles(32) + dwp_cycles(0) + 2 * kDramLatency + 1;
}

namespace {

bool device_node(const Context& ctx, const ir::Node& n) { return ctx.on_device(n.name); }

// Segment index per node: host segments even, device segments odd, each node in the earliest one
// of its kind after its producers'. Only index 0 can be empty, so the numbers are compacted.
std::vector<int> asap_segments(const Context& ctx) {
  const ir::Graph& g = ctx.graph;
  std::map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::vector<int> seg(g.nodes.size(), -1);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const int kind = device_node(ctx, n) ? 1 : 0;
    int lo = 0;
    for (const auto& in : n.inputs) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      const int sp = seg[it->second];
      if (sp < 0)
        fail(
            "partition: node '{}' reads '{}' before '{}' produces it (the graph is not in "
            "topological order)",
            n.name, in, g.nodes[it->second].name);
      const int pk = device_node(ctx, g.nodes[it->second]) ? 1 : 0;
      lo = std::max(lo, pk == kind ? sp : sp + 1);
    }
    if (lo % 2 != kind) ++lo;
    seg[i] = lo;
  }
  std::set<int> used(seg.begin(), seg.end());
  std::map<int, int> compact;
  for (int s : used) compact[s] = static_cast<int>(compact.size());
  for (int& s : seg) s = compact[s];
  return seg;
}

// Sorts the graph by segment (stable, so still topological) and fills ctx.segments/segment_of.
void build_segments(Context& ctx, const std::vector<int>& seg) {
  ir::Graph& g = ctx.graph;
  std::vector<std::size_t> order(g.nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return seg[a] < seg[b]; });
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  std::vector<Segment> segments;
  ctx.segment_of.clear();
  for (std::size_t i : order) {
    const int s = seg[i];
    while (static_cast<int>(segments.size()) <= s) segments.emplace_back();
    Segment& S = segments[static_cast<std::size_t>(s)];
    S.placement = device_node(ctx, g.nodes[i]) ? Placement::kDevice : Placement::kHost;
    S.nodes.push_back(g.nodes[i].name);
    ctx.segment_of[g.nodes[i].name] = s;
    nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
  ctx.segments = std::move(segments);
}

// Estimated cycles and bytes of each device segment, and why each cut exists.
void estimate(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  const double macs_per_cycle =
      kArrayEfficiency * static_cast<double>(arch.rows * arch.cols * arch.n_sa);
  std::map<std::string, int> made_in;  // value -> segment that produces it
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) made_in[o] = ctx.segment_of.at(n.name);
  std::set<std::string> host_reads(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes)
    if (!device_node(ctx, n)) host_reads.insert(n.inputs.begin(), n.inputs.end());
  std::set<std::string> sent;  // values already written to DRAM by an earlier segment
  const auto by_name = [&] {
    std::map<std::string, const ir::Node*> m;
    for (const auto& n : g.nodes) m[n.name] = &n;
    return m;
  }();
  for (std::size_t s = 0; s < ctx.segments.size(); ++s) {
    Segment& S = ctx.segments[s];
    S.macs = S.bytes_in = S.bytes_out = S.compute_cycles = S.transfer_cycles = 0;
    const ir::Node& first = *by_name.at(S.nodes.front());
    if (S.placement == Placement::kHost) {
      // The reason of the first node that is more than a (de)quantization says why the cut is here.
      const ir::Node* why = &first;
      bool found = false;
      for (const auto& name : S.nodes) {
        const ir::Node& n = *by_name.at(name);
        S.macs += node_macs(g, n);
        if (!found && n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") {
          why = &n;
          found = true;
        }
      }
      const std::string reason =
          ctx.placement.count(why->name) ? ctx.placement.at(why->name).reason : "host work";
      S.why = (s == 0 ? "host work before the device: " : "cut: ") + why->name + " (" +
              why->op_type + "): " + reason;
      continue;
    }
    double compute = 0;
    std::uint64_t transfer = segment_start_cycles();
    for (const auto& name : S.nodes) {
      const ir::Node& n = *by_name.at(name);
      const std::uint64_t macs = node_macs(g, n);
      S.macs += macs;
      compute += static_cast<double>(macs) / macs_per_cycle + overhead_cycles(g, n, arch);
      std::uint64_t beats = 0;
      for (const auto& in : n.inputs) {
        const ir::Tensor* t = in.empty() ? nullptr : g.find(in);
        if (!t) continue;
        const std::uint64_t bytes = t->is_constant() ? 0 : device_bytes_of(*t, arch);
        beats += (bytes + 31) / 32;
        auto it = made_in.find(in);
        const bool from_host =
            t && !t->is_constant() &&
            (it == made_in.end() ||
             ctx.segments[static_cast<std::size_t>(it->second)].placement == Placement::kHost);
        if (from_host && !sent.count(in)) {
          sent.insert(in);
          S.bytes_in += bytes;
          transfer += dwp_cycles(bytes);
        }
      }
      for (const auto& o : n.outputs) {
        const ir::Tensor* t = o.empty() ? nullptr : g.find(o);
        if (!t) continue;
        const std::uint64_t bytes = device_bytes_of(*t, arch);
        beats += (bytes + 31) / 32;
        if (host_reads.count(o)) {
          S.bytes_out += bytes;
          transfer += dispatch_cycles(bytes);
        }
      }
      compute += static_cast<double>(beats);
    }
    S.compute_cycles = static_cast<std::uint64_t>(compute);
    S.transfer_cycles = transfer;
    S.why = fmt::format(
        "device: {} nodes from {} ({}), {} MACs, ~{} device cycles; the cut costs ~{} cycles "
        "({} B in over DWP, {} B out in dispatch frames, one start)",
        S.nodes.size(), first.name, first.op_type, S.macs, S.compute_cycles, S.transfer_cycles,
        S.bytes_in, S.bytes_out);
  }
}

// Device nodes whose lowering needs a neighbour on the device too: a Flatten/Reshape only folds
// into a device FC, a Relu/Clip on a [1, K] vector only into its device FC's tail.
bool fix_dependents(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  bool changed = false;
  for (const auto& n : g.nodes) {
    if (!device_node(ctx, n) || n.inputs.empty() || n.outputs.empty()) continue;
    std::string why;
    if (n.op_type == "Flatten" || n.op_type == "Reshape") {
      for (const auto* c : g.consumers(n.outputs[0]))
        if (!device_node(ctx, *c))
          why = "its fully connected consumer '" + c->name +
                "' runs on the host, so there is no FC.Flatten to fold into";
    } else if (n.op_type == "Relu" || n.op_type == "Clip") {
      const ir::Tensor* x = g.find(n.inputs[0]);
      const ir::Node* p = g.producer(n.inputs[0]);
      if (x && x->shape.size() != 4 && (!p || !device_node(ctx, *p)))
        why = "its fully connected producer runs on the host, so it has no TailBlock to join";
    }
    if (!why.empty()) {
      ctx.place(n.name, Placement::kHost, "host: " + why);
      changed = true;
    }
  }
  return changed;
}

}  // namespace

void partition(Context& ctx) {
  const bool refresh = !ctx.segments.empty();
  std::vector<Segment> decided;  // the first run's device segments, by order
  for (const auto& S : ctx.segments)
    if (S.placement == Placement::kDevice) decided.push_back(S);
  if (!refresh) {
    while (fix_dependents(ctx)) {
    }
  } else {
    // After lowering, the device runs npukit.gati nodes only (the back end's device layers).
    for (const auto& n : ctx.graph.nodes)
      if (ctx.on_device(n.name) && !is_gati(n) && !is_device_view(n))
        ctx.place(n.name, Placement::kHost,
                  "host: placed on the device but not lowered to a Gati op");
  }
  for (;;) {
    build_segments(ctx, asap_segments(ctx));
    estimate(ctx);
    if (refresh) {
      // Keep the decision's numbers (counted on the ONNX graph the cuts were chosen on).
      std::size_t k = 0;
      for (auto& S : ctx.segments)
        if (S.placement == Placement::kDevice && k < decided.size()) {
          const Segment& D = decided[k++];
          S.macs = D.macs;
          S.bytes_in = D.bytes_in;
          S.bytes_out = D.bytes_out;
          S.compute_cycles = D.compute_cycles;
          S.transfer_cycles = D.transfer_cycles;
          S.why = D.why;
        }
      return;
    }
    // Small islands go back to the host: never a cut that costs more than the work it moves.
    std::size_t devices = 0, biggest = 0;
    for (std::size_t s = 0; s < ctx.segments.size(); ++s)
      if (ctx.segments[s].placement == Placement::kDevice) {
        ++devices;
        if (ctx.segments[biggest].placement != Placement::kDevice ||
            ctx.segments[s].macs > ctx.segments[biggest].macs ||
            (ctx.segments[s].macs == ctx.segments[biggest].macs &&
             ctx.segments[s].compute_cycles > ctx.segments[biggest].compute_cycles))
          biggest = s;
      }
    bool demoted = false;
    if (devices > 1)
      for (std::size_t s = 0; s < ctx.segments.size(); ++s) {
        const Segment& S = ctx.segments[s];
        if (S.placement != Placement::kDevice || s == biggest ||
            S.compute_cycles >= S.transfer_cycles)
          continue;
        for (const auto& name : S.nodes)
          ctx.place(
              name, Placement::kHost,
              fmt::format("host: a small device island ({} MACs, ~{} device cycles) would "
                          "cost ~{} cycles of DWP/dispatch transfer ({} B in, {} B out); "
                          "running it on the host is cheaper",
                          S.macs, S.compute_cycles, S.transfer_cycles, S.bytes_in, S.bytes_out));
        demoted = true;
        break;  // one at a time: the neighbours' costs change
      }
    if (!demoted && !fix_dependents(ctx)) break;
  }
  ctx.model_macs = ctx.device_macs = 0;
  for (const auto& S : ctx.segments) {
    ctx.model_macs += S.macs;
    if (S.placement == Placement::kDevice) ctx.device_macs += S.macs;
  }
}

}  // namespace npukit::compiler
