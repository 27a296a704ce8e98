#!/usr/bin/env bash
# The whole test suite: installs dependencies if missing, builds, runs every test through CTest
# (C++ and the Python module's pytest), then installs the build and runs examples/ against it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" ${CTEST_ARGS:-}
scripts/test-install.sh
