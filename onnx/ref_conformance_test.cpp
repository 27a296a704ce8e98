// ONNX's own operator conformance data (Debian libonnx-testdata: node/<case>/model.onnx plus
// test_data_set_*/input_N.pb, output_N.pb) run through the real importer and the reference
// executor (ref/). Every case whose ops the executor supports must match ONNX's expected outputs
// (float: |a - e| <= 1e-7 + 1e-3 |e|, as ONNX's backend tests; integers: exactly).
// Owned by engineer "ref"; lives in onnx/ because it needs the importer.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

namespace npukit {
namespace {

namespace fs = std::filesystem;

fs::path node_test_root() {
  for (const char* p :
       {"/usr/include/onnx/backend/test/data/node", "/usr/share/onnx/backend/test/data/node",
        "/usr/lib/python3/dist-packages/onnx/backend/test/data/node"})
    if (fs::is_directory(p)) return p;
  return {};
}

// Ops whose definition did not change between the case's opset and 11 (the importer's minimum),
// so an older case can be run by declaring opset 11.
const std::set<std::string> kUnchangedSinceOld = {"ConstantOfShape", "GlobalAveragePool",
                                                  "QLinearConv", "QLinearMatMul"};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The model's bytes, with the opset raised to 11 when that changes nothing; empty if the case
// uses an op the executor lacks (`why` says which).
std::string model_bytes(const fs::path& dir, std::string& why) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(read_file(dir / "model.onnx"))) {
    why = "model.onnx does not parse";
    return {};
  }
  for (const auto& n : model.graph().node()) {
    if (!ref::is_supported(n.domain(), n.op_type())) {
      why = "op " + n.op_type();
      return {};
    }
  }
  for (auto& op : *model.mutable_opset_import()) {
    if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() < onnxio::kMinOpset) {
      for (const auto& n : model.graph().node())
        if (!kUnchangedSinceOld.count(n.op_type())) {
          why = "opset " + std::to_string(op.version());
          return {};
        }
      op.set_version(onnxio::kMinOpset);
      if (model.ir_version() < 6) model.set_ir_version(6);
    }
  }
  return model.SerializeAsString();
}

// Empty when equal, else a description of the first difference.
std::string compare(const ir::Tensor& got, const ir::Tensor& want) {
  if (got.dtype != want.dtype)
    return fmt::format("type {} vs expected {}", ir::dtype_name(got.dtype),
                       ir::dtype_name(want.dtype));
  if (got.shape != want.shape)
    return fmt::format("shape {} vs expected {}", ir::shape_string(got.shape),
                       ir::shape_string(want.shape));
  if (got.dtype == ir::DType::kFloat32) {
    for (std::int64_t i = 0; i < ir::element_count(want.shape); ++i) {
      const float g = got.as<float>()[i], w = want.as<float>()[i];
      if (std::isnan(w) ? !std::isnan(g) : !(std::fabs(g - w) <= 1e-7f + 1e-3f * std::fabs(w)))
        return fmt::format("element {}: {} vs expected {}", i, g, w);
    }
    return {};
  }
  if (got.data != want.data) return "integer values differ";
  return {};
}

TEST(RefConformance, OnnxNodeTests) {
  const fs::path root = node_test_root();
  if (root.empty()) GTEST_SKIP() << "libonnx-testdata is not installed";
  int passed = 0, unsupported = 0, refused = 0;
  std::vector<std::string> failures, passed_cases;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    std::string why;
    const std::string bytes = model_bytes(dir, why);
    if (bytes.empty()) {
      ++unsupported;
      continue;
    }
    ir::Graph graph;
    try {
      graph = onnxio::load_onnx_bytes(
          ByteSpan(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), name);
    } catch (const Error& e) {
      ++refused;  // the importer's own limits (e.g. sequence/optional types)
      continue;
    }
    bool ok = true;
    bool any_set = false;
    for (const auto& set : fs::directory_iterator(dir)) {
      if (!set.is_directory() || set.path().filename().string().rfind("test_data_set", 0) != 0)
        continue;
      any_set = true;
      ref::TensorMap inputs;
      // input_N.pb files carry the input's name; older ones may not, then order decides.
      for (std::size_t i = 0;; ++i) {
        const fs::path pb = set.path() / fmt::format("input_{}.pb", i);
        if (!fs::exists(pb)) break;
        ir::Tensor t = onnxio::load_tensor_pb(pb.string());
        std::string name = t.name;
        if (name.empty() && i < graph.inputs.size()) name = graph.inputs[i];
        inputs[name] = std::move(t);
      }
      try {
        auto outputs = ref::run_graph(graph, inputs);
        for (std::size_t i = 0; i < graph.outputs.size(); ++i) {
          const ir::Tensor want =
              onnxio::load_tensor_pb((set.path() / fmt::format("output_{}.pb", i)).string());
          const std::string diff = compare(outputs.at(graph.outputs[i]), want);
          if (!diff.empty()) {
            failures.push_back(name + ": output " + graph.outputs[i] + ": " + diff);
            ok = false;
          }
        }
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("not supported") != std::string::npos) {
          ++unsupported;  // an attribute or mode the reference does not implement
          ok = false;
          why = msg;
          break;
        }
        failures.push_back(name + ": " + msg);
        ok = false;
      }
      if (!ok) break;
    }
    if (ok && any_set) {
      ++passed;
      passed_cases.push_back(name);
    }
  }
  std::cout << "ONNX node conformance: " << passed << " passed, " << failures.size() << " failed, "
            << unsupported << " use unsupported ops or attributes, " << refused
            << " refused by the importer, of " << cases.size() << " cases\n";
  RecordProperty("passed", passed);
  for (const auto& f : failures) ADD_FAILURE() << f;
  // Guard against silently skipping everything (e.g. the executor losing an op).
  EXPECT_GE(passed, 370);
}

// Single-op QOperator models (ref/testdata/make_ort_cases.py) with onnxruntime-node's outputs:
// the quantized kernels must reproduce onnxruntime bit for bit (floats exactly too).
TEST(RefConformance, OnnxruntimeQuantizedOps) {
  const fs::path dir = fs::path(NPUKIT_SOURCE_DIR) / "ref" / "testdata" / "ort";
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".onnx") models.push_back(e.path());
  std::sort(models.begin(), models.end());
  ASSERT_GE(models.size(), 17u);
  for (const fs::path& model : models) {
    const std::string name = model.stem().string();
    SCOPED_TRACE(name);
    ir::Graph graph = onnxio::load_onnx(model.string());
    ref::TensorMap inputs;
    for (std::size_t i = 0; i < graph.inputs.size(); ++i)
      inputs[graph.inputs[i]] =
          onnxio::load_tensor_file((dir / fmt::format("{}.in{}.npy", name, i)).string());
    const ir::Tensor want = onnxio::load_tensor_file((dir / (name + ".out0.npy")).string());
    const ir::Tensor got = ref::run_graph(graph, inputs).at(graph.outputs.at(0));
    ASSERT_EQ(got.dtype, want.dtype);
    ASSERT_EQ(got.shape, want.shape);
    std::int64_t differing = 0;
    for (std::size_t b = 0; b < got.data.size(); b += ir::dtype_size(got.dtype))
      differing +=
          std::memcmp(got.data.data() + b, want.data.data() + b, ir::dtype_size(got.dtype)) != 0;
    EXPECT_EQ(differing, 0) << "of " << ir::element_count(want.shape) << " values";
  }
}

// Float models exported by torch with torch's own outputs: the fixture models of
// fixtures/models (make_models.py) and a tiny YOLO-style detector (ref/testdata/make_tiny_yolo.py).
TEST(RefConformance, FloatModelsMatchTorch) {
  int checked = 0;
  for (const fs::path dir : {fs::path(NPUKIT_SOURCE_DIR) / "fixtures" / "models",
                             fs::path(NPUKIT_SOURCE_DIR) / "ref" / "testdata" / "models"}) {
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> models;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".onnx") models.push_back(e.path());
    std::sort(models.begin(), models.end());
    for (const fs::path& model : models) {
      const std::string name = model.stem().string();
      SCOPED_TRACE(name);
      const ir::Graph graph = onnxio::load_onnx(model.string());
      for (int k = 0; fs::exists(dir / fmt::format("{}.input_{}.npy", name, k)); ++k) {
        ref::TensorMap inputs{
            {graph.inputs.at(0),
             onnxio::load_tensor_file((dir / fmt::format("{}.input_{}.npy", name, k)).string())}};
        const auto outputs = ref::run_graph(graph, inputs);
        for (std::size_t j = 0; j < graph.outputs.size(); ++j) {
          fs::path expected = dir / fmt::format("{}.output_{}.npy", name, k);
          if (graph.outputs.size() > 1 || !fs::exists(expected))
            expected = dir / fmt::format("{}.output_{}_{}.npy", name, k, j);
          const ir::Tensor want = onnxio::load_tensor_file(expected.string());
          const ir::Tensor& got = outputs.at(graph.outputs[j]);
          ASSERT_EQ(got.shape, want.shape) << expected;
          const auto g = ir::to_vector<float>(got), w = ir::to_vector<float>(want);
          for (std::size_t i = 0; i < w.size(); ++i)
            ASSERT_LE(std::fabs(g[i] - w[i]), 1e-4f + 1e-3f * std::fabs(w[i]))
                << expected << " element " << i;
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 10);
  std::cout << "float models matching torch: " << checked << " outputs\n";
}

}  // namespace
}  // namespace npukit
