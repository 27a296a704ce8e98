#!/usr/bin/env bash
# The README's first command: installs dependencies, builds npukit and runs the main job on the
# bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec scripts/main-job.sh
