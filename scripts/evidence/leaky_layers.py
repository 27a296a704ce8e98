#!/usr/bin/python3
"""LeakyReLU exactness on a YOLO-like model: every conv + LeakyReLU layer in isolation.

Quantizes ref/testdata/models/tiny_yolo.onnx with `npukit quantize` (min-max on its input),
runs the int8 model on onnxruntime-node (graph optimizations disabled) with every conv input and
every LeakyReLU output exposed, then for each QLinearConv -> QLinearLeakyRelu pair builds a model
of just those two nodes, feeds it onnxruntime's own int8 conv input through `npukit run` (device
model) and compares with onnxruntime's int8 LeakyReLU output. Prints, per layer, the share equal,
the share within 1, the mean difference and the device cycles per layer.

  NPUKIT=path/to/npukit /usr/bin/python3 scripts/evidence/leaky_layers.py [--sa-arch 9,8,8]
Needs `cd bench/ort && npm ci --ignore-scripts`. Offline only.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MODEL = os.path.join(common.ROOT, "ref", "testdata", "models", "tiny_yolo.onnx")
INPUT = os.path.join(common.ROOT, "ref", "testdata", "models", "tiny_yolo.input_0.npy")


def ort(model, feeds, out_dir):
    cmd = ["node", common.ORT_RUN, model] + [f"{k}={v}" for k, v in feeds.items()] + [
        "--out", out_dir, "--opt", "disabled"]
    common.run(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sa-arch", default="9,8,8")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="npukit-leaky-")
    try:
        report(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(args, work):
    q = os.path.join(work, "tiny_yolo.int8.onnx")
    common.quantize(MODEL, INPUT, q)
    m = onnx.load(q)
    g = m.graph
    producers = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    pairs = []
    for n in g.node:
        if n.op_type != "QLinearConv":
            continue
        c = consumers.get(n.output[0], [])
        if len(c) == 1 and c[0].op_type == "QLinearLeakyRelu":
            pairs.append((n, c[0]))
    # Expose every conv input and LeakyReLU output as an int8 graph output.
    exposed = m.__class__()
    exposed.CopyFrom(m)
    have = {o.name for o in exposed.graph.output}
    for conv, leaky in pairs:
        for v in (conv.input[0], leaky.output[0]):
            if v not in have:
                exposed.graph.output.append(helper.make_tensor_value_info(v, TensorProto.INT8, None))
                have.add(v)
    full = os.path.join(work, "exposed.onnx")
    onnx.save(exposed, full)
    inp = common.model_inputs(q)[0]
    ort_dir = os.path.join(work, "ort")
    ort(full, {inp: INPUT}, ort_dir)
    inits = {t.name: t for t in g.initializer}
    rows = []
    for conv, leaky in pairs:
        nodes = [conv, leaky]
        need = [i for n in nodes for i in n.input if i in inits]
        x = np.load(os.path.join(ort_dir, common.safe_name(conv.input[0]) + ".npy"))
        want = np.load(os.path.join(ort_dir, common.safe_name(leaky.output[0]) + ".npy"))
        sub = helper.make_graph(
            nodes, f"layer_{conv.name}",
            [helper.make_tensor_value_info(conv.input[0], TensorProto.INT8, list(x.shape))],
            [helper.make_tensor_value_info(leaky.output[0], TensorProto.INT8, list(want.shape))],
            [inits[i] for i in dict.fromkeys(need)])
        sm = helper.make_model(sub, opset_imports=m.opset_import)
        sm.ir_version = m.ir_version
        tag = common.safe_name(conv.name)
        path = os.path.join(work, f"layer_{tag}.onnx")
        onnx.save(sm, path)
        xin = os.path.join(work, f"layer_{tag}.x.npy")
        np.save(xin, x)
        out = os.path.join(work, f"layer_{tag}.out")
        stats = os.path.join(work, f"layer_{tag}.stats.json")
        common.run([common.npukit_bin(), "run", path, "--input", f"{conv.input[0]}={xin}", "-o", out,
                    "--sa-arch", args.sa_arch, "--stats-json", stats])
        got = np.load(os.path.join(out, common.safe_name(leaky.output[0]) + ".npy"))
        d = got.astype(np.int64) - want.astype(np.int64)
        st = json.load(open(stats))
        rows.append({"layer": f"{conv.name} + {leaky.name}", "shape": list(want.shape),
                     "equal": float((d == 0).mean()), "within1": float((np.abs(d) <= 1).mean()),
                     "max": int(np.abs(d).max()), "mean": float(d.mean()),
                     "cycles": st["device_cycles"],
                     "layers": [(l["opcode"], l["cycles"]) for l in st["layers"]]})
    print(f"| layer | output | equal to onnxruntime | within 1 | max | mean diff | device cycles"
          f" ({args.sa_arch}) | per megablock |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = ", ".join(f"{op} {c}" for op, c in r["layers"])
        print(f"| {r['layer']} | {'x'.join(map(str, r['shape'][1:]))} | {100 * r['equal']:.2f} % |"
              f" {100 * r['within1']:.2f} % | {r['max']} | {r['mean']:+.3f} | {r['cycles']} |"
              f" {per} |")


if __name__ == "__main__":
    main()
