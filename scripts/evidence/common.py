"""Shared helpers of the evidence scripts (run by hand with /usr/bin/python3, never in CI).

NPUKIT names the npukit binary (default: the newest build-*/tools/npukit in the checkout);
EVIDENCE_OUT the working directory for generated models and outputs (default /tmp/npukit-evidence).
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.environ.get("EVIDENCE_OUT", "/tmp/npukit-evidence")
ORT_RUN = os.path.join(ROOT, "bench", "ort", "run.mjs")


def npukit_bin():
    if os.environ.get("NPUKIT"):
        return os.environ["NPUKIT"]
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "tools", "npukit")), key=os.path.getmtime)
    if not found:
        sys.exit("no npukit binary: build it (cmake --build BUILD --target npukit) or set NPUKIT")
    return found[-1]


def run(cmd, check=True, **kw):
    """Runs cmd, returns CompletedProcess with text stdout/stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr.strip()}")
    return p


def model_inputs(path):
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def fixture_inputs(onnx_path):
    """The committed inputs next to a fixture model: NAME.input_K.npy, sorted by K."""
    stem = onnx_path[: -len(".onnx")]
    return sorted(glob.glob(stem + ".input_*.npy"))


def quantize(float_model, calib_npy, out_model):
    run([npukit_bin(), "quantize", float_model, "--calib", calib_npy, "-o", out_model, "-q"])


def stack_inputs(files, out_npy):
    """One calibration batch from single-image .npy files (axis 0)."""
    np.save(out_npy, np.concatenate([np.load(f) for f in files], axis=0))


def output_quantization(model_path):
    """For each graph output produced by a DequantizeLinear with constant scale and zero point:
    (scale, zero_point); None for outputs computed otherwise (compared as floats)."""
    m = onnx.load(model_path)
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    result = {}
    for o in m.graph.output:
        result[o.name] = None
        for n in m.graph.node:
            if o.name in n.output and n.op_type == "DequantizeLinear":
                scale = consts.get(n.input[1])
                zp = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else np.int8(0)
                if scale is not None and zp is not None and scale.size == 1:
                    result[o.name] = (float(scale.reshape(())), int(zp.reshape(())))
    return result


def to_int8_units(values, quant):
    """Dequantized float outputs back to the integers the last DequantizeLinear read."""
    scale, zp = quant
    return np.rint(values.astype(np.float64) / scale).astype(np.int64) + zp


def safe_name(name):
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
