#!/usr/bin/python3
"""Where the time goes, layer by layer (issue 13): npukit's device model against onnxruntime-node
on the same compiled network and images, one thread each, as a table. A reported benchmark, not a
test; bench/paired.py gives the whole-network ratios, this says which layers make them.

  bench/layers.py --prog DIR --onnx UINT8.onnx --data X.npy --labels Y.npy
                  [--rounds R] [--npukit PATH] [--json OUT]

npukit: `npukit eval --threads 1 --stats-json`, whose layers carry model_seconds, the device
model's own wall time for the layer averaged over the images after the first. onnxruntime:
bench/ort/run.mjs --profile (uint8 activations, all optimizations), each node's kernel time, the
median over the runs after the first. The R rounds (default 3) alternate the two; each layer's
figure is its median over the rounds. onnxruntime's profiler adds its own cost to every node
(resnet18 on a Zen 3: 28 against 25.5 ms per image unprofiled), so read the table for where
the differences are, and bench/paired.py for the ratio.

Layers are matched by name: a compiled layer is named after its ONNX node, with _channelsN and
_rowsA_B suffixes for the pieces of a split kernel (summed here), and onnxruntime's fused nodes
carry a _token_N suffix. An onnxruntime node with no npukit layer of its name (a Clip after a
conv, which npukit's conv tail does; a Flatten) counts with the layer before it, or, before the
first, with the host part (input quantization and layout, on npukit's host segments, whose time
is their host_seconds: the mean over every image, the first included). The rest of npukit's warm time per image, which no layer's
model_seconds counts (the DWP streams in and out, the instructions and timing between layers),
is a row of its own, with nothing of onnxruntime's against it.
PATH defaults to build/tools/npukit. Needs bench/ort's `npm ci --ignore-scripts`.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "(host segments: input and output)"
OUTSIDE = "(device model outside its layers)"


def base_name(name):
    """A layer's or node's name without the piece and fusion suffixes."""
    name = re.sub(r"_token_\d+$", "", name)
    name = re.sub(r"_rows\d+_\d+$", "", name)
    return re.sub(r"_channels\d+$", "", name)


def npukit_round(a, work):
    stats, report = os.path.join(work, "stats.json"), os.path.join(work, "eval.json")
    subprocess.run([a.npukit, "eval", a.prog, "--data", a.data, "--labels", a.labels, "--threads",
                    "1", "-q", "--json", report, "--stats-json", stats], check=True,
                   stdout=subprocess.DEVNULL)
    with open(stats) as f:
        s = json.load(f)
    with open(report) as f:
        total = json.load(f)["warm_seconds_per_image"]
    times = {}
    for layer in s["layers"]:
        key = base_name(layer["name"])
        times[key] = times.get(key, 0.0) + layer["model_seconds"] * 1e3
    device = sum(times.values())
    times[HOST] = sum(seg.get("host_seconds", 0.0) for seg in s["segments"]
                      if seg["where"] == "host") * 1e3
    times[OUTSIDE] = total * 1e3 - device - times[HOST]
    return times, [base_name(layer["name"]) for layer in s["layers"]]


def ort_round(a, work):
    profile = os.path.join(work, "ort.json")
    subprocess.run(["node", os.path.join(ROOT, "bench", "ort", "run.mjs"), a.onnx,
                    f"{a.input_name}={a.data}", "--opt", "all", "--threads", "1",
                    "--batch-axis0", "--repeat", "1", "--profile", profile],
                   check=True, stdout=subprocess.DEVNULL)
    with open(profile) as f:
        nodes = json.load(f)["nodes"]
    return nodes


def attribute(nodes, known):
    """onnxruntime's node times (ms) per npukit layer name (see the module comment)."""
    times, current = {}, HOST
    for node in nodes:
        key = base_name(node["name"])
        if key in known:
            current = key
        times[current] = times.get(current, 0.0) + node["us"] / 1e3
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prog", required=True, help="compiled program directory (npukit compile)")
    ap.add_argument("--onnx", required=True, help="the uint8-activation model onnxruntime runs")
    ap.add_argument("--data", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--input-name", default="input")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--npukit", default=os.path.join(ROOT, "build", "tools", "npukit"))
    ap.add_argument("--json", help="also write the table here")
    a = ap.parse_args()
    ours, theirs, order = {}, {}, []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(a.rounds):
            times, order = npukit_round(a, work)
            for k, v in times.items():
                ours.setdefault(k, []).append(v)
            for k, v in attribute(ort_round(a, work), set(order)).items():
                theirs.setdefault(k, []).append(v)
    rows = []
    for key in [HOST, OUTSIDE] + list(dict.fromkeys(order)):
        n = statistics.median(ours.get(key, [0.0]))
        o = statistics.median(theirs.get(key, [0.0]))
        rows.append({"layer": key, "npukit_ms": n, "onnxruntime_ms": o})
    width = max(len(r["layer"]) for r in rows)
    print(f"{'layer':<{width}}  {'npukit ms':>9}  {'ort ms':>8}  {'diff ms':>8}  ratio")
    for r in rows:
        n, o = r["npukit_ms"], r["onnxruntime_ms"]
        ratio = f"{n / o:5.2f}x" if o > 0 else "    -"
        print(f"{r['layer']:<{width}}  {n:9.3f}  {o:8.3f}  {n - o:+8.3f}  {ratio}")
    n = sum(r["npukit_ms"] for r in rows)
    o = sum(r["onnxruntime_ms"] for r in rows)
    print(f"{'total per image':<{width}}  {n:9.3f}  {o:8.3f}  {n - o:+8.3f}  {n / o:5.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": a.rounds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
