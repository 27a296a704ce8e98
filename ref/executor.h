// The reference executor: runs an ir::Graph node by node with ref/'s kernels (standard ONNX
// float and QOperator ops, and the npukit.gati megablock ops), inferring shapes at run time.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/graph.h"

namespace npukit::ref {

using TensorMap = std::map<std::string, ir::Tensor>;
// Inputs by reference: each points at a tensor the caller keeps alive, unchanged, for the run.
using TensorRefs = std::map<std::string, const ir::Tensor*>;

// Value buffers kept from one run of a graph to the next (RunOptions::buffers): a kernel that
// makes its output with OpInputs::output gets the storage of the same value from the run before
// (zeroed, as a new tensor would be); with run_graph's output form, a graph output is made in the
// storage the caller's map holds for it. Repeated runs of one graph on same-shaped inputs then
// allocate no tensor storage after the first (host segments run once per image). One RunBuffers
// per graph and thread.
class RunBuffers {
 public:
  // Tensor storage bytes the kept buffers hold (for tests and reports).
  std::size_t kept_bytes() const;

 private:
  friend struct RunBuffersAccess;
  const ir::Graph* graph_ = nullptr;
  TensorMap kept_;  // by value name
};

class ConvWeightCache;  // ref/float_conv.h

struct RunOptions {
  // Called after every node with all values computed so far (inputs, intermediates; constants
  // stay in the graph).
  std::function<void(const ir::Node&, const TensorMap& values)> after_node;
  // Optional, owned by the caller: float Conv weights that are constants of `graph` keep their
  // oneDNN layout here from run to run. Use one cache with one graph, unchanged (threads running
  // that graph may share it).
  ConvWeightCache* conv_weights = nullptr;
  // Memory: a value no later node reads is dropped after its last reader (graph outputs are
  // kept), and an element-wise kernel (Relu, Add, ...) may write
  // its output over such an input of the same type and shape instead of allocating: a network's
  // intermediates then take the memory of the live ones, not of all of them. after_node still
  // sees each node's outputs and its inputs (but for one written over).
  bool release_dead_values = false;
  // Optional, owned by the caller: buffers kept between runs of this one graph (see RunBuffers).
  RunBuffers* buffers = nullptr;
};

// Runs `graph` on `inputs` (every non-constant graph input, by name) and returns the graph
// outputs by name. Throws npukit::Error naming the node and op for unsupported ops or
// attributes and for inputs that do not fit.
TensorMap run_graph(const ir::Graph& graph, const TensorMap& inputs,
                    const RunOptions& options = {});
// The same with the inputs by reference (not copied, so not written over; after_node then sees
// them among the values only if it is set). The outputs go into `outputs` by name (with
// RunOptions::buffers, made in the storage it held; after an error its values are unspecified).
void run_graph(const ir::Graph& graph, const TensorRefs& inputs, const RunOptions& options,
               TensorMap& outputs);

// Whether run_graph has a kernel for this op ("" or "ai.onnx" for the default domain).
bool is_supported(const std::string& domain, const std::string& op_type);

}  // namespace npukit::ref
