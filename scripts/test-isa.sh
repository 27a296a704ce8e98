#!/usr/bin/env bash
# The test suite (without the `slow` label) again at every SIMD level this CPU can run, forced
# with NPUKIT_ISA (common/cpu.h): each kernel path, not only the best one, must give the results
# every test expects. Run after scripts/test.sh has built the tree (BUILD_DIR, default build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
levels=(scalar)
has avx2 && levels+=(avx2)
has avx_vnni && levels+=(avxvnni)
has avx512_vnni && has avx512f && has avx512bw && has avx512vl && levels+=(avx512vnni)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for level in "${levels[@]}"; do
  if NPUKIT_ISA=$level ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -LE slow \
    >"$log" 2>&1; then
    echo "NPUKIT_ISA=$level: $(grep -m1 'tests passed' "$log")"
  else
    grep -v -E '^ *(Start|[0-9]+/[0-9]+ Test) .*' "$log" | tail -200
    echo "NPUKIT_ISA=$level: tests fail" >&2
    exit 1
  fi
done
