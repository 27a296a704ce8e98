// Internal to ref/: how the executor finds a kernel for a node.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "ir/graph.h"

namespace npukit::ref {

// A node's input values; nullptr for an omitted optional input.
class ConvWeightCache;

struct OpInputs {
  std::vector<const ir::Tensor*> tensors;
  std::vector<bool> constant;  // per input: a constant of the graph (not computed per run)
  std::int64_t opset = 13;     // the graph's opset for the node's domain
  ConvWeightCache* conv_weights = nullptr;  // RunOptions::conv_weights
  // Per input: its tensor in the executor's values when no later node reads it and the run
  // releases dead values (RunOptions::release_dead_values), so a kernel may write its output
  // over it (output_over); else nullptr.
  std::vector<ir::Tensor*> donatable;
  // Per output: the same value's tensor from the previous run when RunOptions::buffers keeps
  // them, else nullptr (or shorter than the outputs).
  std::vector<ir::Tensor*> recycled;

  std::size_t size() const { return tensors.size(); }
  const ir::Tensor* optional(std::size_t i) const {
    return i < tensors.size() ? tensors[i] : nullptr;
  }
  const ir::Tensor& at(std::size_t i) const {
    if (!optional(i)) fail("required input {} is missing", i);
    return *tensors[i];
  }
  // The tensor to write an element-wise output of this type and shape into: input i's own
  // storage when it is donatable and has that type and shape (input i is then empty: read
  // its data pointer, shape and count first, and write element k only after reading element k),
  // else a new tensor.
  ir::Tensor output_over(std::size_t i, ir::DType dtype, const ir::Shape& shape) const;
  // Output k as a zeroed tensor of this type and shape (ir::make_tensor), in the storage the
  // previous run's output k had when RunOptions::buffers keeps it.
  ir::Tensor output(std::size_t k, ir::DType dtype, const ir::Shape& shape) const;
  // The same for a kernel that writes every element: kept storage is not zeroed first, so its
  // bytes are the previous run's until the kernel writes them (a new tensor is still zeroed).
  ir::Tensor output_for_overwrite(std::size_t k, ir::DType dtype, const ir::Shape& shape) const;

 private:
  // Whether output k's storage of the previous run is kept and of this type.
  bool keeps(std::size_t k, ir::DType dtype) const;
};

// Returns the node's outputs in order (names are filled in by the executor).
using Kernel = std::function<std::vector<ir::Tensor>(const ir::Node&, const OpInputs&)>;
using KernelTable = std::map<std::pair<std::string, std::string>, Kernel>;  // (domain, op_type)

void add_gati_kernels(KernelTable& table);
void add_float_kernels(KernelTable& table);
void add_quant_kernels(KernelTable& table);
void add_extra_kernels(KernelTable& table);
void add_conv_transpose_kernels(KernelTable& table);

}  // namespace npukit::ref
