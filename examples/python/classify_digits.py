#!/usr/bin/python3
"""npukit from Python: quantize the bundled digits model with its 128 calibration images, compile
it for a 9,8,8 Gati, run a batch on the device model, measure top-1 accuracy on the test split
beside the float model, check every layer against the reference executor and profile the
cycles; numpy arrays in and out, no files written.  Usage: classify_digits.py [REPO_ROOT]"""
import os
import sys

import numpy as np

import npukit

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
d = os.path.join(root, "fixtures", "digits")
int8 = npukit.quantize(os.path.join(d, "lenet_digits.onnx"), np.load(os.path.join(d, "calib.npy")))
program = npukit.compile(int8, sa_arch="9,8,8")
print(program)
x, y = np.load(os.path.join(d, "X_test.npy")), np.load(os.path.join(d, "y_test.npy"))
with npukit.Session(program) as session:
    logits = session.run(x[:4])[session.output_names[0]]
    print("first 4 images: classes", np.argmax(logits, axis=1).tolist(), "labels", y[:4].tolist(),
          f"{session.stats['device_cycles']} device cycles")
r = npukit.eval(program, x, y, float_model=os.path.join(d, "lenet_digits.onnx"))
print(f"int8 top-1 on the device model: {100 * r['int8_top1']:.2f} % "
      f"({r['int8_correct']}/{r['images']}), float {100 * r['float_top1']:.2f} %, "
      f"{r['device_cycles_per_image']:.0f} device cycles per image")
c = npukit.compare(int8, x[:1])
print(f"compare: {'PASS' if c['pass'] else 'FAIL'}, {c['layers_compared']} layers bit-exact")
p = npukit.profile(program)
print(f"profile: {p['total_cycles']} cycles = {1e6 * p['total_seconds']:.1f} us at "
      f"{npukit.CLOCK_HZ / 1e6:g} MHz")
