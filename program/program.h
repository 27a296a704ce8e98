// The compiled program: the one artifact the compiler hands to the runtime (IREE-style, the
// only thing they share). It is the manifest (isa/manifest.h), the GML bytes the board loads and
// the host segments' ONNX subgraphs. In memory it is a Program value; on disk it is the
// directory `npukit compile -o DIR` writes (DIR/manifest.json, DIR/<gml>, DIR/<host files>), and
// load() / save() are the only places that touch those files.
#pragma once

#include "common/bytes.h"
#include "ir/graph.h"
#include "isa/manifest.h"

#include <cstddef>
#include <map>
#include <string>

namespace npukit::program {

struct Program {
  isa::Manifest manifest;
  SharedBytes gml;
  // The host segments' subgraphs by segment index (manifest.segments[i].host->file names the
  // file each is saved as).
  std::map<std::size_t, ir::Graph> host_graphs;

  // The subgraph of host segment `s`; an Error naming the segment when there is none.
  const ir::Graph& host_graph(std::size_t s) const;
};

// The GML agrees with the manifest: its length (manifest.gml_bytes) and its framing
// (isa::decode_gml). `where` names the program in the message (the GML's path when loaded).
void check_gml(const Program& program, const std::string& where);

// Reads DIR/manifest.json, the GML and every host subgraph it names. Errors name the directory
// and the missing or broken file.
Program load(const std::string& dir);

// Writes the program directory. Everything goes into a fresh sibling directory first, which
// replaces DIR only once complete: a failure leaves no partial program (and an older program in
// DIR untouched). Refuses to replace a non-empty directory that holds no program.
void save(const Program& program, const std::string& dir);

}  // namespace npukit::program
