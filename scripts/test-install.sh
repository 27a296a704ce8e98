#!/usr/bin/env bash
# Installs the build (cmake --install) into a temporary prefix, then builds and runs the two
# consumers in examples/ against that installed tree only: the C++ one through
# find_package(npukit), the Python one through the installed `npukit` package (when the build
# has the Python module: not under the sanitizers).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${BUILD_DIR:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
passed=0
cmake -S examples/cpp -B "$tmp/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cpp" >/dev/null
"$tmp/cpp/classify" fixtures/digits/lenet_digits.int8.onnx fixtures/digits/X_test.npy |
  tee "$tmp/cpp.txt"
grep -q "^class [0-9], [1-9][0-9]* device cycles" "$tmp/cpp.txt"
passed=$((passed + 1))
"$tmp/prefix/bin/npukit" --help >/dev/null
package=$(find "$tmp/prefix" -path '*dist-packages/npukit/__init__.py' | head -1)
if [ -n "$package" ]; then
  # -P and a neutral working directory: only the installed package can be imported.
  (cd "$tmp" && PYTHONPATH="$(dirname "$(dirname "$package")")" PYTHONDONTWRITEBYTECODE=1 \
    /usr/bin/python3 -P "$root/examples/python/classify_digits.py" "$root") | tee "$tmp/py.txt"
  grep -q "int8 top-1 on the device model" "$tmp/py.txt"
  grep -q "compare: PASS" "$tmp/py.txt"
  passed=$((passed + 1))
else
  echo "install test: no Python module in $build_dir (NPUKIT_PYTHON off or a sanitizer build)"
fi
echo "install test: $passed passed, 0 failed"
