#!/usr/bin/env bash
# The main job on the bundled example (needs a build in build/).
set -euo pipefail
cd "$(dirname "$0")/.."
npukit=${NPUKIT:-build/tools/npukit}
"$npukit" disasm examples/conv_relu_9x8x8.gml
