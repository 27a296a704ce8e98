// Shared by the tests of the errata rewrites (pools_as_convs, lower_concat, clear_resize_padding):
// a rewrite must keep the meaning of the lowered graph (the reference executor gives the same
// bytes for the --allow-errata lowering, which still has the GatiPool/GatiConcat/bare GatiResize,
// and for the rewritten one), and the device must then equal the reference and warn about no
// erratum (testing::run_on_device checks that for programs compiled without --allow-errata).
#pragma once

#include "compiler/device_run.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler::testing {

inline std::map<std::string, ir::Tensor> seeded_inputs(const ir::Graph& g, unsigned seed) {
  std::map<std::string, ir::Tensor> in;
  for (const auto& name : g.inputs) {
    const ir::Tensor& t = g.tensor(name);
    in[name] = int8_tensor(
        name, t.shape, random_int8(static_cast<std::size_t>(ir::element_count(t.shape)), seed++));
  }
  return in;
}

inline ref::TensorMap run_lowered(const ir::Graph& model, const CompileOptions& opt,
                                  const std::map<std::string, ir::Tensor>& inputs) {
  const Context ctx = lower(model, opt);
  ref::TensorMap in(inputs.begin(), inputs.end());
  return ref::run_graph(ctx.graph, in);
}

// The rewritten lowering means what the --allow-errata lowering means, then the device program
// equals the reference bit for bit. Returns the compiled program for structural checks.
inline CompileResult expect_rewrite_exact(const ir::Graph& model, const isa::SaArch& arch,
                                          unsigned seed) {
  CompileOptions opt;
  opt.arch = arch;
  CompileOptions errata = opt;
  errata.allow_errata = true;
  const auto inputs = seeded_inputs(model, seed);
  const auto fixed = run_lowered(model, opt, inputs);
  const auto old = run_lowered(model, errata, inputs);
  for (const auto& out : model.outputs) {
    EXPECT_EQ(fixed.at(out).data, old.at(out).data) << out << " on " << arch.str();
    std::size_t nonzero = 0;
    for (auto b : fixed.at(out).data) nonzero += b != 0;
    EXPECT_GT(nonzero, 0u) << out << ": an all-zero output tests nothing";
  }
  CompileResult r = compile(model, opt);
  const auto dev = run_on_device(r, inputs);
  for (const auto& out : model.outputs) {
    const auto& want = fixed.at(out).data;
    EXPECT_TRUE(dev.count(out)) << out;
    if (!dev.count(out)) continue;
    EXPECT_EQ(dev.at(out).size(), want.size());
    if (dev.at(out).size() != want.size()) continue;
    EXPECT_EQ(std::memcmp(dev.at(out).data(), want.data(), want.size()), 0)
        << out << " on " << arch.str();
  }
  return r;
}

inline std::size_t count_op(const Context& ctx, const std::string& op) {
  std::size_t n = 0;
  for (const auto& node : ctx.graph.nodes) n += node.op_type == op;
  return n;
}

}  // namespace npukit::compiler::testing
