// Pass 9b, lower_concat: CONCAT never raises layer_done on the v1.0.0 RTL, so nothing after it
// runs and its dispatch never happens, and it drops data when H*W is not a multiple of 32/N_SA
// (gati.md 14.15). Unless --allow-errata, no CONCAT instruction is emitted. A GatiConcat of n
// inputs (any n, any channel counts and image shape) becomes:
//
// * In place, no layer: in the Gati's activation layout (gati.md 6.1) each group of N_SA channels
//   is one contiguous P' * N_SA byte range, so channels [o, o + C) of the output, o and C whole
//   N_SA groups, are a plain address range laid out like a tensor of C channels. An input made by a
//   device CONV, EltWise or POOL layer that nothing else reads is written by that layer straight
//   into its slice: the GatiConcat becomes an ONNX Concat *view* (as split_grouped_convs' pieces
//   write theirs; collect_device_program makes the input an alias of the output at its byte
//   offset). Nothing is recomputed: the producer writes the same int8 values the copy would have
//   copied (an input at another scale was already requantized by lower_to_gati's EltWise, which is
//   then the producer, or by the producer's own tail when fuse_tail folded that EltWise into it),
//   so the result is the concat's, bit for bit; the reference executor runs the Concat as written.
//   Conditions (else the input is copied): offset a whole number of N_SA groups; channel count
//   whole groups, or the last input (its padding channels are the output's); the producer's output
//   read only by this concat, not a graph output, not asked for with --dispatch, and not a grouped
//   conv split_grouped_convs may split; on 9,4,4 a conv producer with an even KernelItr (so
//   pad_kernel_iterations gives it no padding kernels that would spill into the next slice; a
//   copy run that is not the last must have an even KernelItr too, else the input after it is
//   copied as well). No input goes in place when the concat's output leaves the device or is
//   read by a host op or a channel copy (fold_channel_copies folds a shuffle into the copy chain
//   for free, which in-place producers cannot give).
// * Copied: every run of consecutive inputs that do not go in place is a chain of 1x1 GatiConvs
//   that copy input k into channels [o_k, o_k + C_k) of the run (the whole output when nothing
//   goes in place; else a view of its channels, which start and end on group boundaries):
//
//   conv k: x = input k, w[C, C_k, 1, 1] with w[o_k + j, j] = 1 (0 elsewhere), acc = the int32
//           output of conv k-1; every conv but the last outputs int32 sums (quant_en 0, as
//           split_kernels' pieces), the last requantizes with scale 1, shift 0.
//
//   Each output channel receives exactly one input value times 1, so the result equals the concat
//   bit for bit. On an image of more than 1024 pixels a copy that reads int32 sums may not need
//   several channel iterations, so every input wider than N_SA starts its own chain there; the
//   chains' int8 results (zeros outside their channels) are summed by EltWise adds with unit
//   weights, also exact.
// Each copy's placement note names the concat and the erratum, and the view's says which inputs
// went in place and why the others did not (--explain).
#include "common/error.h"
#include "compiler/errata_passes.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace npukit::compiler {

namespace {

struct Input {
  std::string value;
  std::int64_t offset = 0, channels = 0;
  std::string why_copied;  // empty: written in place by its producer
};

const std::string kErratum = "E7 CONCAT never completes / E8 CONCAT pixel padding";

// Why input k of concat `n` cannot be written in place by its producer ("" when it can).
std::string why_not_in_place(const Context& ctx, const ir::Node& n, const std::vector<Input>& in,
                             std::size_t k, const std::set<std::string>& leaves) {
  const ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  const Input& x = in[k];
  const bool last = k + 1 == in.size();
  if (x.offset % arch.n_sa != 0)
    return fmt::format("offset {} is not a whole N_SA group", x.offset);
  if (x.channels % arch.n_sa != 0 && !last)
    return fmt::format("{} channels are not whole N_SA groups", x.channels);
  const ir::Node* p = g.producer(x.value);
  if (!p || !is_gati(*p) || !ctx.on_device(p->name)) return "not made by a device layer";
  if (p->op_type != "GatiConv" && p->op_type != "GatiEltwise" && p->op_type != "GatiPool")
    return "made by a " + p->op_type + " layer";
  if (std::count(n.inputs.begin(), n.inputs.end(), x.value) != 1) return "concatenated twice";
  if (g.consumers(x.value).size() != 1) return "read by other layers too";
  if (leaves.count(x.value) || leaves.count(p->name)) return "a model output or dispatched";
  if (p->get_int("block_diagonal_groups", 0) > 1)
    return "a grouped conv (split_grouped_convs may split it)";
  if (p->op_type == "GatiConv" && arch == isa::kArch9x4x4 &&
      conv_geometry(g, *p, arch).kitr % 2 != 0)
    return "an odd KernelItr on 9,4,4 (its padding kernels would spill into the next slice)";
  return "";
}

// Appends to `out` the copy chains that put inputs `run` of concat `n` into channels
// [0, total) of `result` (offsets relative to the run); `result_name` names the last node.
void copy_run(Context& ctx, const ir::Node& n, const std::vector<Input>& in,
              const std::vector<std::size_t>& run, const std::string& result,
              const std::string& result_name, const std::string& how, std::vector<ir::Node>& out) {
  ir::Graph& g = ctx.graph;
  const ir::Shape shape = g.tensor(result).shape;
  const std::int64_t total = shape.at(1), base = in[run.front()].offset;
  // The copies run widest input first, because a conv that reads an int32 sum input and needs
  // several channel iterations is limited to 1024 output pixels (generate_instructions): only the
  // first copy may have both.
  std::vector<std::size_t> order = run;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return in[a].channels > in[b].channels; });
  // A conv that reads an int32 sum input needs one channel iteration when the image has more
  // than 1024 pixels, so there a copy of an input wider than N_SA must start a chain. Each such
  // input starts its own chain (the narrow inputs join the last one); every chain quantizes to
  // an int8 tensor of the full width (zeros outside its channels) and EltWise adds with
  // weights 1 merge them: each output value is one chain's value plus zeros, exact.
  const std::int64_t n_sa = ctx.options.arch.n_sa;
  const bool big = shape.at(2) * shape.at(3) > 1024;
  std::vector<std::vector<std::size_t>> chains;
  for (std::size_t k : order)
    if (chains.empty() || (big && in[k].channels > n_sa))
      chains.push_back({k});
    else
      chains.back().push_back(k);
  std::string merged;
  for (std::size_t ci = 0; ci < chains.size(); ++ci) {
    const bool last_chain = ci + 1 == chains.size();
    std::string previous;
    for (std::size_t i = 0; i < chains[ci].size(); ++i) {
      const std::size_t k = chains[ci][i];
      const std::int64_t offset = in[k].offset - base;
      const std::string& x = in[k].value;
      const ir::Tensor& xt = g.tensor(x);
      const std::int64_t ck = xt.shape.at(1);
      if (xt.shape.size() != 4 || xt.shape[2] != shape.at(2) || xt.shape[3] != shape.at(3))
        fail("layer '{}': concat input '{}' is not a [N, C, {}, {}] image", n.name, x, shape.at(2),
             shape.at(3));
      std::vector<std::int8_t> w(static_cast<std::size_t>(total * ck), 0);
      for (std::int64_t j = 0; j < ck; ++j) w[static_cast<std::size_t>((offset + j) * ck + j)] = 1;
      const bool last = i + 1 == chains[ci].size();
      const bool final_node = last && last_chain && chains.size() == 1;
      ir::Node c;
      c.name = final_node ? result_name : unique_name(g, n.name + "_copy" + std::to_string(k));
      c.op_type = "GatiConv";
      c.domain = kGatiDomain;
      c.inputs = {x,
                  add_constant(g, n.name + "_place" + std::to_string(k), ir::DType::kInt8,
                               {total, ck, 1, 1}, w.data()),
                  "", previous};
      if (previous.empty()) c.inputs.resize(3);
      c.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
      c.attributes["strides"] = std::vector<std::int64_t>{1, 1};
      c.attributes["pads"] = std::vector<std::int64_t>{0, 0, 0, 0};
      c.attributes["group"] = std::int64_t{1};
      if (last) {
        c.outputs = {final_node ? result
                                : add_value(g, n.name + "_part" + std::to_string(ci),
                                            ir::DType::kInt8, shape)};
        c.attributes["quant_en"] = std::int64_t{1};
        c.attributes["quant_scale"] = std::int64_t{1};
        c.attributes["quant_shift"] = std::int64_t{0};
      } else {
        previous = add_value(g, n.name + "_sums" + std::to_string(k), ir::DType::kInt32, shape);
        c.outputs = {previous};
        c.attributes["quant_en"] = std::int64_t{0};
      }
      note_errata_rewrite(ctx, c.name, n.name, "lower_concat", kErratum,
                          fmt::format("{}; this one copies '{}' into channels {}..{}", how, x,
                                      in[k].offset, in[k].offset + ck - 1));
      const std::string made = c.outputs[0];
      out.push_back(std::move(c));
      if (!last || chains.size() == 1) continue;
      if (ci == 0) {
        merged = made;
        continue;
      }
      // merged + this chain's part, both at the concat's scale: a_scale = b_scale = 1.0 in Q10,
      // M = 1.
      ir::Node e;
      e.name = last_chain ? result_name : unique_name(g, n.name + "_merge" + std::to_string(ci));
      e.op_type = "GatiEltwise";
      e.domain = kGatiDomain;
      e.inputs = {merged, made};
      e.outputs = {last_chain ? result
                              : add_value(g, n.name + "_merged" + std::to_string(ci),
                                          ir::DType::kInt8, shape)};
      e.attributes["op"] = std::string("add");
      e.attributes["a_scale"] = std::int64_t{1024};
      e.attributes["b_scale"] = std::int64_t{1024};
      const ScaleShift q = choose_scale_shift(1.0, "layer '" + n.name + "'");
      e.attributes["quant_en"] = std::int64_t{1};
      e.attributes["quant_scale"] = q.scale;
      e.attributes["quant_shift"] = q.shift;
      note_errata_rewrite(
          ctx, e.name, n.name, "lower_concat", kErratum,
          fmt::format("{}; on an image over 1024 pixels with {} inputs wider than N_SA, {} copy "
                      "chains merged by EltWise adds of disjoint channels; this one adds chain {}",
                      how, chains.size(), chains.size(), ci));
      merged = e.outputs[0];
      out.push_back(std::move(e));
    }
  }
}

// Runs of consecutive copied inputs, as index lists.
std::vector<std::vector<std::size_t>> copy_runs(const std::vector<Input>& in) {
  std::vector<std::vector<std::size_t>> runs;
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (in[k].why_copied.empty()) continue;
    if (runs.empty() || runs.back().back() + 1 != k) runs.emplace_back();
    runs.back().push_back(k);
  }
  return runs;
}

std::int64_t run_channels(const std::vector<Input>& in, const std::vector<std::size_t>& run) {
  std::int64_t c = 0;
  for (std::size_t k : run) c += in[k].channels;
  return c;
}

}  // namespace

void lower_concat(Context& ctx) {
  if (ctx.options.allow_errata) return;
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  std::set<std::string> leaves(g.outputs.begin(), g.outputs.end());
  leaves.insert(ctx.options.dispatch.begin(), ctx.options.dispatch.end());
  std::vector<ir::Node> out;
  for (const ir::Node& n : std::vector<ir::Node>(g.nodes)) {
    if (n.op_type != "GatiConcat" || !ctx.on_device(n.name)) {
      out.push_back(n);
      continue;
    }
    const ir::Tensor y = g.tensor(n.outputs.at(0));
    const std::int64_t total = y.shape.at(1);
    std::vector<Input> in;
    for (std::int64_t o = 0; const auto& v : n.inputs) {
      in.push_back({v, o, g.tensor(v).shape.at(1), ""});
      o += in.back().channels;
    }
    // Whether the output may be a view at all: read by device layers only, and no channel copy.
    std::string whole;
    if (leaves.count(n.outputs[0]) || leaves.count(n.name))
      whole = "its output is a model output or dispatched";
    for (const ir::Node* c : g.consumers(n.outputs[0]))
      if (whole.empty() && (!ctx.on_device(c->name) || !is_gati(*c)))
        whole = "its output is read by a host op";
      else if (whole.empty() && !channel_copy_sources(g, *c).empty())
        whole =
            "its output is read by a channel copy (fold_channel_copies makes the copies "
            "place the channels where the copy wants them, for free)";
    for (std::size_t k = 0; k < in.size(); ++k)
      in[k].why_copied = whole.empty() ? why_not_in_place(ctx, n, in, k, leaves) : whole;
    // On 9,4,4 a copy run before an in-place input must not get padding kernels
    // (pad_kernel_iterations) spilling into that input's slice: copy that input too.
    for (bool changed = arch == isa::kArch9x4x4; changed;) {
      changed = false;
      for (const auto& run : copy_runs(in)) {
        const std::size_t next = run.back() + 1;
        if (next == in.size()) continue;
        const std::int64_t c = run_channels(in, run);
        if ((c + arch.cols - 1) / arch.cols % 2 == 0) continue;
        in[next].why_copied =
            fmt::format("on 9,4,4 the copies before it ({} channels) have an odd KernelItr", c);
        changed = true;
      }
    }
    const auto runs = copy_runs(in);
    std::size_t placed = 0;
    for (const auto& x : in) placed += x.why_copied.empty();
    std::string copied_desc;
    for (const auto& x : in)
      if (!x.why_copied.empty())
        copied_desc +=
            fmt::format("{}'{}' ({})", copied_desc.empty() ? "" : ", ", x.value, x.why_copied);
    if (placed == 0) {
      const std::string how =
          fmt::format("concat of {} inputs ({} channels) as {} chained 1x1 copy convs",
                      n.inputs.size(), total, n.inputs.size());
      copy_run(ctx, n, in, runs.at(0), n.outputs[0], n.name, how, out);
      continue;
    }
    // The view: in-place inputs as they are, each copy run as one value of its channels.
    ir::Node view;
    view.op_type = "Concat";
    view.name = n.name;
    view.attributes["axis"] = std::int64_t{1};
    view.outputs = {n.outputs[0]};
    std::size_t copies = 0;
    for (const auto& run : runs) copies += run.size();
    const std::string how = fmt::format(
        "concat of {} inputs ({} channels): {} written in place by their producers, {} copied by "
        "1x1 copy convs",
        n.inputs.size(), total, placed, copies);
    std::string placed_desc;
    for (const auto& x : in)
      if (x.why_copied.empty())
        placed_desc += fmt::format("{}'{}' -> channels {}..{}", placed_desc.empty() ? "" : ", ",
                                   x.value, x.offset, x.offset + x.channels - 1);
    note_errata_rewrite(ctx, view.name, n.name, "lower_concat", kErratum,
                        fmt::format("{}; in place (no layer, a view): {}{}{}", how, placed_desc,
                                    copied_desc.empty() ? "" : "; copied: ", copied_desc));
    for (std::size_t k = 0; k < in.size();) {
      if (in[k].why_copied.empty()) {
        view.inputs.push_back(in[k].value);
        ++k;
        continue;
      }
      const auto& run =
          *std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.front() == k; });
      const std::string part =
          add_value(g, n.name + "_run" + std::to_string(k), ir::DType::kInt8,
                    {y.shape.at(0), run_channels(in, run), y.shape.at(2), y.shape.at(3)});
      if (auto q = ctx.quantization.find(n.outputs[0]); q != ctx.quantization.end())
        ctx.quantization[part] = q->second;
      copy_run(ctx, n, in, run, part, unique_name(g, n.name + "_copies" + std::to_string(k)), how,
               out);
      view.inputs.push_back(part);
      k = run.back() + 1;
    }
    out.push_back(std::move(view));
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
