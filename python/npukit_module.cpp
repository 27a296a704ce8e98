// _npukit: the C++ half of `import npukit` (pybind11). It converts numpy arrays to and from
// ir::Tensor, models to and from ONNX bytes, and npukit::Error to npukit.Error; everything else
// is the library's own code. python/npukit/__init__.py gives it the documented, Pythonic API
// (docs/python.md). Long calls release the GIL.
#include "analysis/compare.h"
#include "analysis/evaluate.h"
#include "analysis/profile.h"
#include "common/error.h"
#include "common/parallel.h"
#include "compiler/compiler.h"
#include "ir/graph.h"
#include "ir/tensor_util.h"
#include "isa/arch.h"
#include "lut/designer.h"
#include "onnx/onnx_io.h"
#include "program/program.h"
#include "quant/quantize.h"
#include "runtime/session.h"
#include "xs3/bso.h"
#include "xs3/kernels.h"

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace npukit::python {
namespace {

ir::DType dtype_of(const py::array& a) {
  const py::dtype d = a.dtype();
  if (d.is(py::dtype::of<float>())) return ir::DType::kFloat32;
  if (d.is(py::dtype::of<double>())) return ir::DType::kFloat64;
  if (d.is(py::dtype::of<std::int8_t>())) return ir::DType::kInt8;
  if (d.is(py::dtype::of<std::uint8_t>())) return ir::DType::kUInt8;
  if (d.is(py::dtype::of<std::int16_t>())) return ir::DType::kInt16;
  if (d.is(py::dtype::of<std::int32_t>())) return ir::DType::kInt32;
  if (d.is(py::dtype::of<std::int64_t>())) return ir::DType::kInt64;
  if (d.is(py::dtype::of<bool>())) return ir::DType::kBool;
  fail("numpy dtype '{}' has no npukit tensor type (use float32, int8, uint8, int32 or int64)",
       d.attr("name").cast<std::string>());
}

py::dtype numpy_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::kFloat32:
      return py::dtype::of<float>();
    case ir::DType::kFloat64:
      return py::dtype::of<double>();
    case ir::DType::kInt8:
      return py::dtype::of<std::int8_t>();
    case ir::DType::kUInt8:
      return py::dtype::of<std::uint8_t>();
    case ir::DType::kInt16:
      return py::dtype::of<std::int16_t>();
    case ir::DType::kInt32:
      return py::dtype::of<std::int32_t>();
    case ir::DType::kInt64:
      return py::dtype::of<std::int64_t>();
    case ir::DType::kBool:
      return py::dtype::of<bool>();
    default:
      fail("tensor type {} has no numpy dtype", ir::dtype_name(t));
  }
}

ir::Tensor to_tensor(const std::string& name, const py::handle& value) {
  const auto a = py::array::ensure(value, py::array::c_style);
  if (!a) fail("input '{}' is not an array (give a numpy array)", name);
  ir::Tensor t;
  t.name = name;
  t.dtype = dtype_of(a);
  for (py::ssize_t i = 0; i < a.ndim(); ++i) t.shape.push_back(a.shape(i));
  t.data.resize(static_cast<std::size_t>(a.nbytes()));
  if (a.nbytes()) std::memcpy(t.data.data(), a.data(), t.data.size());
  return t;
}

py::array to_array(const ir::Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array a(numpy_dtype(t.dtype), shape);
  if (t.data.size() != static_cast<std::size_t>(a.nbytes()))
    fail("tensor '{}' holds {} bytes, its shape {} needs {}", t.name, t.data.size(),
         ir::shape_string(t.shape), a.nbytes());
  if (!t.data.empty()) std::memcpy(a.mutable_data(), t.data.data(), t.data.size());
  return a;
}

ref::TensorMap to_tensor_map(const py::dict& feeds) {
  ref::TensorMap m;
  for (const auto& [k, v] : feeds) {
    const std::string name = py::str(k);
    m[name] = to_tensor(name, v);
  }
  return m;
}

py::dict to_dict(const ref::TensorMap& m) {
  py::dict d;
  for (const auto& [name, t] : m) d[py::str(name)] = to_array(t);
  return d;
}

ir::Graph graph_from_bytes(const py::bytes& model) {
  const std::string s = model;
  return onnxio::load_onnx_bytes(
      ByteSpan(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()), "model");
}

py::bytes bytes_of(ByteSpan b) {
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

py::dict error_dict(const lut::ErrorStats& e) {
  py::dict d;
  d["max_abs"] = e.max_abs;
  d["mean_abs"] = e.mean_abs;
  d["max_ulp"] = e.max_ulp;
  d["mean_ulp"] = e.mean_ulp;
  d["worst_x"] = e.worst_x;
  d["samples"] = e.samples;
  return d;
}

// A compiled program held in memory (program/program.h), and, when it was compiled in this
// process, the compile result its --explain report is made from.
struct PyProgram {
  program::Program program;
  std::shared_ptr<const compiler::CompileResult> compiled;
};

compiler::CompileOptions compile_options(const std::string& sa_arch, std::uint64_t ramsize_mb,
                                         const std::vector<std::string>& dispatch,
                                         bool allow_errata) {
  compiler::CompileOptions o;
  o.arch = isa::SaArch::parse(sa_arch);
  if (ramsize_mb == 0 || ramsize_mb > 4096)
    fail("ramsize_mb {} is out of range (1..4096 MB of board DRAM)", ramsize_mb);
  o.ramsize_mb = ramsize_mb;
  o.dispatch = dispatch;
  o.allow_errata = allow_errata;
  return o;
}

py::object json_value(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

py::dict layer_list_stats(const runtime::RunResult& r) {
  py::dict stats;
  stats["device_cycles"] = r.device_cycles;
  py::list layers;
  for (const auto& l : r.layers) {
    py::dict d;
    d["name"] = l.name;
    d["opcode"] = l.opcode;
    d["cycles"] = l.cycles;
    d["model_seconds"] = l.model_seconds;
    layers.append(d);
  }
  stats["layers"] = layers;
  py::list segments;
  for (const auto& s : r.segments) {
    py::dict d;
    d["index"] = s.index;
    d["where"] = s.device ? "device" : "host";
    if (s.device)
      d["cycles"] = s.cycles;
    else
      d["host_seconds"] = s.host_seconds;
    d["bytes_to_device"] = s.bytes_to_device;
    d["bytes_from_device"] = s.bytes_from_device;
    segments.append(d);
  }
  stats["segments"] = segments;
  return stats;
}

// A session and the lock that keeps two Python threads (the GIL released) from driving its one
// device at the same time.
struct PySession {
  std::unique_ptr<runtime::Session> session;
  std::mutex mutex;
};

void set_threads(std::optional<unsigned> threads) {
  if (!threads) return;
  if (*threads > 1024) fail("threads {} is out of range (0 = every core, at most 1024)", *threads);
  set_thread_count(*threads);
}

}  // namespace
}  // namespace npukit::python

PYBIND11_MODULE(_npukit, m) {
  using namespace npukit;
  using namespace npukit::python;
  m.doc() = "npukit's C++ core; use the `npukit` package, not this module";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  m.def(
      "load_model_info",
      [](const py::bytes& model) {
        const ir::Graph g = graph_from_bytes(model);
        py::list inputs;
        for (const auto& name : g.inputs) {
          const ir::Tensor& t = g.tensor(name);
          inputs.append(py::make_tuple(name, t.shape, ir::dtype_name(t.dtype)));
        }
        return py::make_tuple(g.name, inputs, g.outputs);
      },
      py::arg("model"));

  m.def(
      "quantize",
      [](const py::bytes& model, const py::list& samples, const std::string& method,
         double percentile, int bins, std::function<void(std::size_t, std::size_t)> progress) {
        const ir::Graph g = graph_from_bytes(model);
        std::vector<ref::TensorMap> data;
        for (const auto& s : samples) data.push_back(to_tensor_map(s.cast<py::dict>()));
        quant::QuantizeOptions o;
        o.method = quant::parse_calibration(method);
        o.percentile = percentile;
        o.histogram_bins = bins;
        if (progress)
          o.progress = [progress](std::size_t done, std::size_t total) {
            py::gil_scoped_acquire gil;
            progress(done, total);
          };
        quant::QuantizeSummary summary;
        Bytes out;
        {
          py::gil_scoped_release release;
          out = onnxio::save_onnx_bytes(quant::quantize(g, data, o, &summary));
        }
        return py::make_tuple(bytes_of(out), summary.quantized_ops, summary.float_nodes);
      },
      py::arg("model"), py::arg("samples"), py::arg("method"), py::arg("percentile"),
      py::arg("bins"), py::arg("progress") = nullptr);

  m.def(
      "set_threads", [](unsigned n) { set_threads(n); }, py::arg("n"));
  m.def("threads", [] { return thread_count(); });

  py::class_<PyProgram, std::shared_ptr<PyProgram>>(m, "Program")
      .def_property_readonly("gml", [](const PyProgram& p) { return bytes_of(p.program.gml); })
      .def_property_readonly(
          "manifest_json",
          [](const PyProgram& p) { return isa::manifest_to_json(p.program.manifest); })
      .def_property_readonly("host_segments",
                             [](const PyProgram& p) {
                               py::dict d;
                               for (const auto& [i, g] : p.program.host_graphs)
                                 d[py::int_(i)] = bytes_of(onnxio::save_onnx_bytes(g));
                               return d;
                             })
      .def_property_readonly("compiled_here", [](const PyProgram& p) { return bool(p.compiled); })
      .def("explain",
           [](const PyProgram& p) {
             if (!p.compiled)
               fail(
                   "explain() needs a program compiled in this process, not one loaded from "
                   "disk (npukit.compile(model).explain())");
             return compiler::explain(*p.compiled);
           })
      .def(
          "save",
          [](const PyProgram& p, const std::string& dir) {
            py::gil_scoped_release release;
            program::save(p.program, dir);
          },
          py::arg("dir"));

  m.def(
      "load",
      [](const std::string& dir) {
        auto p = std::make_shared<PyProgram>();
        py::gil_scoped_release release;
        p->program = program::load(dir);
        return p;
      },
      py::arg("dir"));

  m.def(
      "compile",
      [](const py::bytes& model, const std::string& sa_arch, std::uint64_t ramsize_mb,
         const std::vector<std::string>& dispatch, bool allow_errata) {
        const auto o = compile_options(sa_arch, ramsize_mb, dispatch, allow_errata);
        const ir::Graph g = graph_from_bytes(model);
        auto p = std::make_shared<PyProgram>();
        {
          py::gil_scoped_release release;
          auto result = std::make_shared<compiler::CompileResult>(compiler::compile(g, o));
          p->program = result->artifact();
          p->compiled = std::move(result);
        }
        return p;
      },
      py::arg("model"), py::arg("sa_arch"), py::arg("ramsize_mb"), py::arg("dispatch"),
      py::arg("allow_errata"));

  py::class_<PySession>(m, "Session")
      .def(py::init([](const PyProgram& p, const std::string& transport,
                       std::optional<unsigned> threads) {
             set_threads(threads);
             runtime::SessionOptions o;
             o.transport = transport;
             auto s = std::make_unique<PySession>();
             py::gil_scoped_release release;
             s->session = std::make_unique<runtime::Session>(p.program, o);
             return s;
           }),
           py::arg("program"), py::arg("transport"), py::arg("threads") = py::none())
      .def_property_readonly(
          "manifest_json",
          [](const PySession& s) { return isa::manifest_to_json(s.session->manifest()); })
      .def(
          "run",
          [](PySession& s, const py::dict& feeds) {
            const ref::TensorMap inputs = to_tensor_map(feeds);
            runtime::RunResult r;
            {
              py::gil_scoped_release release;
              std::lock_guard lock(s.mutex);
              r = s.session->run(inputs);
            }
            return py::make_tuple(to_dict(r.outputs), layer_list_stats(r));
          },
          py::arg("inputs"));

  m.def(
      "evaluate",
      [](PySession& s, const py::handle& data, const py::handle& labels, std::int64_t limit,
         std::optional<py::bytes> float_model,
         std::function<void(std::int64_t, std::int64_t, std::int64_t)> progress) {
        const ir::Tensor x = to_tensor("data", data);
        const auto y = analysis::labels_of(to_tensor("labels", labels), "labels");
        std::optional<ir::Graph> fm;
        if (float_model) fm = graph_from_bytes(*float_model);
        analysis::EvalOptions o;
        o.limit = limit;
        o.float_model = fm ? &*fm : nullptr;
        if (progress)
          o.progress = [progress](std::int64_t done, std::int64_t total, std::int64_t correct) {
            py::gil_scoped_acquire gil;
            progress(done, total, correct);
          };
        analysis::EvalResult r;
        {
          py::gil_scoped_release release;
          std::lock_guard lock(s.mutex);
          r = analysis::evaluate(*s.session, x, y, o);
        }
        py::dict d;
        d["images"] = r.images;
        d["int8_correct"] = r.int8_correct;
        d["int8_top1"] = r.int8_top1();
        if (r.has_float) {
          d["float_correct"] = r.float_correct;
          d["float_top1"] = r.float_top1();
          d["top1_agreement"] = r.agreement();
        }
        d["device_cycles_per_image"] = r.cycles_per_image();
        d["seconds_per_image"] = r.images ? r.seconds / r.images : 0.0;
        // Wall time only: the session's layers may run on the pool's threads.
        d["warm_seconds_per_image"] = r.warm_seconds_per_image();
        d["predictions"] =
            to_array(ir::make_tensor(ir::Shape{static_cast<std::int64_t>(r.predictions.size())},
                                     r.predictions, "predictions"));
        return d;
      },
      py::arg("session"), py::arg("data"), py::arg("labels"), py::arg("limit"),
      py::arg("float_model"), py::arg("progress") = nullptr);

  m.def(
      "compare",
      [](const py::bytes& model, const py::dict& feeds, const std::string& sa_arch,
         std::uint64_t ramsize_mb, bool allow_errata, const std::string& transport) {
        const auto base = compile_options(sa_arch, ramsize_mb, {}, allow_errata);
        const ir::Graph g = graph_from_bytes(model);
        const ref::TensorMap inputs = to_tensor_map(feeds);
        nlohmann::json j;
        {
          py::gil_scoped_release release;
          const auto options = analysis::dispatch_every_layer(g, base);
          const auto compiled = compiler::compile(g, options);
          runtime::SessionOptions so;
          so.transport = transport;
          runtime::Session session(compiled.artifact(), so);
          j = analysis::compare(g, options, session, inputs).to_json(g.name);
        }
        return json_value(j);
      },
      py::arg("model"), py::arg("inputs"), py::arg("sa_arch"), py::arg("ramsize_mb"),
      py::arg("allow_errata"), py::arg("transport"));

  m.def(
      "profile",
      [](const PyProgram& p, double clock_hz) {
        std::string j;
        {
          py::gil_scoped_release release;
          j = analysis::profile_json(
              analysis::profile_program(p.program.manifest, p.program.gml, clock_hz));
        }
        return py::module_::import("json").attr("loads")(j);
      },
      py::arg("program"), py::arg("clock_hz"));
  m.attr("CLOCK_HZ") = isa::kClockHz;

  py::module_ lut_m = m.def_submodule("lut", "NVDLA SDP/CDP hybrid LUT designer");
  lut_m.def("functions", [] {
    py::list names;
    for (const auto& f : lut::functions()) names.append(py::make_tuple(f.name, f.formula));
    return names;
  });
  lut_m.def(
      "design",
      [](const std::string& function, const std::string& unit, const std::string& precision,
         std::optional<double> lo, std::optional<double> hi, std::optional<double> in_scale,
         std::optional<double> out_scale) {
        lut::DesignRequest r;
        r.function = function;
        r.unit = lut::parse_unit(unit);
        r.precision = lut::parse_precision(r.unit, precision);
        r.range_lo = lo;
        r.range_hi = hi;
        r.in_scale = in_scale;
        r.out_scale = out_scale;
        lut::Design d;
        {
          py::gil_scoped_release release;
          d = lut::design_lut(r);
        }
        py::dict out;
        out["function"] = function;
        out["lo"] = d.lo;
        out["hi"] = d.hi;
        out["structure"] = d.structure;
        out["error"] = error_dict(d.error);
        if (d.nvdla_sw_error) out["nvdla_sw_error"] = error_dict(*d.nvdla_sw_error);
        out["le"] = std::vector<int>(d.config.le.begin(), d.config.le.end());
        out["lo_table"] = std::vector<int>(d.config.lo.begin(), d.config.lo.end());
        out["registers"] = lut::register_writes(d.config);
        out["case_json"] = lut::design_case_json(d).dump();
        out["c_header"] = lut::design_c_header(d, "npukit_" + function + "_lut");
        out["svg"] = lut::design_svg(d);
        return out;
      },
      py::arg("function"), py::arg("unit"), py::arg("precision"), py::arg("lo"), py::arg("hi"),
      py::arg("in_scale"), py::arg("out_scale"));

  py::module_ xs3_m = m.def_submodule("xs3", "XS3 / lib_nn int8 kernels");
  xs3_m.def(
      "pack_bso",
      [](const py::list& channels) {
        std::vector<xs3::BsoChannel> ch;
        for (const auto& c : channels) {
          const auto t = c.cast<
              std::tuple<std::int32_t, int, std::int16_t, std::int16_t, std::int16_t, int>>();
          ch.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t),
                        std::get<4>(t), std::get<5>(t)});
        }
        const auto bso = xs3::pack_bso(ch);
        py::array_t<std::uint16_t> out(static_cast<py::ssize_t>(bso.size()));
        std::memcpy(out.mutable_data(), bso.data(), bso.size() * sizeof(std::uint16_t));
        return out;
      },
      py::arg("channels"));
  xs3_m.def(
      "conv2d",
      [](py::array_t<std::int8_t, py::array::c_style> x,
         py::array_t<std::int8_t, py::array::c_style> k,
         py::array_t<std::uint16_t, py::array::c_style> bso, std::pair<int, int> start,
         std::pair<int, int> stride, std::pair<int, int> out_hw, int zero_point, bool symmetric,
         bool scalar) {
        if (x.ndim() != 3 || k.ndim() != 4)
          fail(
              "xs3.conv2d: x must be [H, W, C_in] and k [C_out, K_h, K_w, C_in]; got {} and {} "
              "dimensions",
              x.ndim(), k.ndim());
        if (zero_point < -128 || zero_point > 127)
          fail("xs3.conv2d: zero_point {} is not an int8", zero_point);
        if (out_hw.first <= 0 || out_hw.second <= 0)
          fail("xs3.conv2d: out_hw ({}, {}) must be positive", out_hw.first, out_hw.second);
        xs3::ConvParams p;
        p.x = {static_cast<int>(x.shape(0)), static_cast<int>(x.shape(1)),
               static_cast<int>(x.shape(2))};
        const int c_out = static_cast<int>(k.shape(0));
        p.y = {out_hw.first, out_hw.second, c_out};
        p.window = {static_cast<int>(k.shape(1)),
                    static_cast<int>(k.shape(2)),
                    start.first,
                    start.second,
                    stride.first,
                    stride.second};
        p.zero_point = static_cast<std::int8_t>(zero_point);
        p.output.symmetric = symmetric;
        std::vector<std::int8_t> y;
        {
          py::gil_scoped_release release;
          y = xs3::conv2d_deep({x.data(), static_cast<std::size_t>(x.size())},
                               {k.data(), static_cast<std::size_t>(k.size())},
                               {bso.data(), static_cast<std::size_t>(bso.size())}, p,
                               scalar ? Isa::kScalar : Isa::kAuto);
        }
        py::array_t<std::int8_t> out({out_hw.first, out_hw.second, c_out});
        std::memcpy(out.mutable_data(), y.data(), y.size());
        return out;
      },
      py::arg("x"), py::arg("k"), py::arg("bso"), py::arg("start"), py::arg("stride"),
      py::arg("out_hw"), py::arg("zero_point"), py::arg("symmetric"), py::arg("scalar"));
}
