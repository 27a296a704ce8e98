#include "compiler/dump.h"

#include <fmt/format.h>

#include <variant>

namespace npukit::compiler {

namespace {

std::string shape_str(const ir::Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string value_str(const ir::Graph& g, const std::string& name) {
  if (name.empty()) return "\"\"";
  const ir::Tensor* t = g.find(name);
  if (!t) return name + ":?";
  std::string s = fmt::format("{}:{}{}", name, ir::dtype_name(t->dtype), shape_str(t->shape));
  if (t->is_constant()) s += "=const";
  return s;
}

std::string attr_str(const ir::Attribute& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(v);
        if constexpr (std::is_same_v<T, float>) return fmt::format("{}", v);
        if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
        if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return shape_str(v);
        if constexpr (std::is_same_v<T, std::vector<float>>) {
          std::string s = "[";
          for (std::size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", v[i]);
          return s + "]";
        }
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
          return s + "]";
        }
        if constexpr (std::is_same_v<T, ir::Tensor>) return "<tensor>";
        return "?";
      },
      a);
}

}  // namespace

std::string dump_graph(const Context& ctx) {
  const ir::Graph& g = ctx.graph;
  std::string s = fmt::format("graph '{}' ({} nodes)\n", g.name, g.nodes.size());
  s += "  inputs:";
  for (const auto& i : g.inputs) s += " " + value_str(g, i);
  s += "\n";
  for (const auto& n : g.nodes) {
    std::string where;
    if (auto it = ctx.placement.find(n.name); it != ctx.placement.end())
      where = it->second.placement == Placement::kDevice ? "  [device]" : "  [host]";
    s += fmt::format("  {} = {}{}(", n.name, n.domain.empty() ? "" : n.domain + ".", n.op_type);
    for (std::size_t i = 0; i < n.inputs.size(); ++i)
      s += (i ? ", " : "") + value_str(g, n.inputs[i]);
    s += ") -> ";
    for (std::size_t i = 0; i < n.outputs.size(); ++i)
      s += (i ? ", " : "") + value_str(g, n.outputs[i]);
    if (!n.attributes.empty()) {
      s += " {";
      bool first = true;
      for (const auto& [k, v] : n.attributes) {
        s += fmt::format("{}{}={}", first ? "" : ", ", k, attr_str(v));
        first = false;
      }
      s += "}";
    }
    s += where + "\n";
  }
  s += "  outputs:";
  for (const auto& o : g.outputs) s += " " + value_str(g, o);
  s += "\n";
  return s;
}

}  // namespace npukit::compiler
