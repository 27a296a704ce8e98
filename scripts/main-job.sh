#!/usr/bin/env bash
# The main job on the bundled model: a LeNet-style CNN trained on sklearn's digits
# (fixtures/digits/train_lenet.py). npukit quantizes it to int8, compiles it for the Gati (9,8,8),
# runs the held-out test split through the bit-exact device model and prints top-1 accuracy,
# float versus int8, and device cycles per image. Needs a build in build/ (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
npukit=${NPUKIT:-build/tools/npukit}
out=${OUT:-out/digits}
mkdir -p "$out"

echo "== quantize (min-max calibration on 128 training images)"
"$npukit" quantize fixtures/digits/lenet_digits.onnx --calib fixtures/digits/calib.npy \
  -o "$out/lenet_digits.int8.onnx" --quiet
echo "== compile for Gati 9,8,8"
"$npukit" compile "$out/lenet_digits.int8.onnx" -o "$out/program"
echo "== evaluate the test split on the device model"
"$npukit" eval "$out/program" --float fixtures/digits/lenet_digits.onnx \
  --data fixtures/digits/X_test.npy --labels fixtures/digits/y_test.npy
echo "(GML to flash: $out/program/model.gml; its instructions: $npukit disasm $out/program/model.gml)"
