#!/usr/bin/python3
"""Evidence for segments (issue 11): per torchvision architecture of the zoo (/work/zoo, made by
make_zoo.py), quantized by npukit, compiled and run end to end on the device model:
device MAC share, segments (all / on the device), device cycles, compile time, cosine of the int8
logits against torch's float logits (float_out.npy) on the first N test images.

Run by hand (never in CI): /usr/bin/python3 scripts/evidence/measure_segments.py [ARCH ...]
ZOO (default /work/zoo), IMAGES (default 1), NPUKIT and EVIDENCE_OUT as in common.py.
Writes OUT/segments.json and prints a markdown table.
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ZOO = os.environ.get("ZOO", "/work/zoo")
IMAGES = int(os.environ.get("IMAGES", "1"))


def cosine(a, b):
    a = a.ravel().astype(np.float64)
    b = b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def measure(arch, npukit):
    src = os.path.join(ZOO, arch)
    work = os.path.join(common.OUT, "segments", arch)
    os.makedirs(work, exist_ok=True)
    q = os.path.join(work, "int8.onnx")
    row = {"arch": arch}
    if not os.path.exists(q):
        t0 = time.time()
        p = common.run([npukit, "quantize", os.path.join(src, "float.onnx"), "--calib",
                        os.path.join(src, "calib.npy"), "-o", q], check=False)
        row["quantize_seconds"] = time.time() - t0
        if p.returncode != 0:
            row["error"] = "quantize: " + (p.stderr.strip().splitlines() or ["?"])[-1]
            return row
    prog = os.path.join(work, "prog")
    t0 = time.time()
    p = common.run([npukit, "compile", q, "-o", prog], check=False)
    row["compile_seconds"] = time.time() - t0
    if p.returncode != 0:
        row["error"] = "compile: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        return row
    m = json.load(open(os.path.join(prog, "manifest.json")))
    row["device_mac_share"] = m["macs"]["device_share"]
    row["segments"] = len(m["segments"])
    row["device_segments"] = sum(1 for s in m["segments"] if s["kind"] == "device")
    row["device_layers"] = len(m["layers"])
    test = np.load(os.path.join(src, "test.npy"))
    ref = np.load(os.path.join(src, "float_out.npy"))
    cos, cycles = [], []
    for k in range(min(IMAGES, test.shape[0])):
        x = os.path.join(work, f"x{k}.npy")
        np.save(x, test[k:k + 1])
        out = os.path.join(work, f"out{k}")
        stats = os.path.join(work, f"stats{k}.json")
        t0 = time.time()
        p = common.run([npukit, "run", prog, "--input", x, "-o", out, "--stats-json", stats],
                       check=False)
        row["run_seconds"] = time.time() - t0
        if p.returncode != 0:
            row["error"] = "run: " + (p.stderr.strip().splitlines() or ["?"])[-1]
            return row
        s = json.load(open(stats))
        cycles.append(s["device_cycles"])
        y = np.load(os.path.join(out, sorted(f for f in os.listdir(out) if f.endswith(".npy"))[0]))
        cos.append(cosine(y, ref[k:k + 1]))
    row["device_cycles"] = float(np.mean(cycles))
    row["cosine"] = float(np.min(cos))
    return row


def main():
    npukit = common.npukit_bin()
    archs = sys.argv[1:] or sorted(
        d for d in os.listdir(ZOO) if os.path.exists(os.path.join(ZOO, d, "float_out.npy")))
    rows = []
    for arch in archs:
        row = measure(arch, npukit)
        print(json.dumps(row), flush=True)
        rows.append(row)
    os.makedirs(common.OUT, exist_ok=True)
    with open(os.path.join(common.OUT, "segments.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print("\n| arch | device MAC share | segments (device) | device cycles | compile s | cosine |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['arch']} | {r['error']} | | | | |")
            continue
        print(f"| {r['arch']} | {100 * r['device_mac_share']:.1f} % | {r['segments']} "
              f"({r['device_segments']}) | {r['device_cycles']:.0f} | "
              f"{r['compile_seconds']:.1f} | {r['cosine']:.4f} |")


if __name__ == "__main__":
    main()
