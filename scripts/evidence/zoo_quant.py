#!/usr/bin/python3
"""Quantization quality on the torchvision zoo (scripts/evidence/make_zoo.py, default /work/zoo):
for every complete architecture and calibration method, `npukit quantize` with the zoo's calib.npy,
run the int8 QOperator model on test.npy with onnxruntime-node (bench/ort/run.mjs, the trusted
reference), and compare its logits with torch's float logits (float_out.npy): mean and worst cosine over
the test images and top-1 agreement. Also counts the nodes the quantizer kept in float.

Run by hand (never in CI); needs `cd bench/ort && npm ci --ignore-scripts` once.

Usage: zoo_quant.py [--zoo DIR] [--methods minmax,percentile,entropy] [--json OUT] [ARCH ...]
"""
import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def cosine(a, b):
    a = a.reshape(a.shape[0], -1).astype(np.float64)
    b = b.reshape(b.shape[0], -1).astype(np.float64)
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30
    return num / den


def measure(arch_dir, method, work):
    os.makedirs(work, exist_ok=True)
    q = os.path.join(work, f"{method}.int8.onnx")
    p = common.run([common.npukit_bin(), "quantize", os.path.join(arch_dir, "float.onnx"),
                    "--calib", os.path.join(arch_dir, "calib.npy"), "--method", method, "-o", q,
                    "-q"], check=False)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-400:]}
    kept = [l for l in p.stdout.splitlines() if l.startswith("kept in float")]
    name = common.model_inputs(q)[0]
    out = os.path.join(work, f"{method}.out")
    common.run(["node", common.ORT_RUN, q, f"{name}={os.path.join(arch_dir, 'test.npy')}",
                "--out", out, "--batch-axis0"])
    got = np.load(os.path.join(out, os.listdir(out)[0]))
    ref = np.load(os.path.join(arch_dir, "float_out.npy"))
    cos = cosine(got, ref)
    return {"cosine": round(float(np.mean(cos)), 4), "cosine_min": round(float(np.min(cos)), 4),
            "top1_agree": float(np.mean(got.reshape(len(ref), -1).argmax(1) ==
                                        ref.reshape(len(ref), -1).argmax(1))),
            "kept_in_float": kept}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default="/work/zoo")
    ap.add_argument("--methods", default="minmax,percentile,entropy")
    ap.add_argument("--json")
    ap.add_argument("archs", nargs="*")
    a = ap.parse_args()
    archs = a.archs or sorted(d for d in os.listdir(a.zoo)
                              if os.path.exists(os.path.join(a.zoo, d, "float_out.npy")))
    results = {}
    for arch in archs:
        results[arch] = {}
        for method in a.methods.split(","):
            r = measure(os.path.join(a.zoo, arch), method, os.path.join(common.OUT, "zoo", arch))
            results[arch][method] = r
            print(arch, method, r.get("cosine", r.get("error")), r.get("cosine_min", ""),
                  r.get("top1_agree", ""),
                  flush=True)
    if a.json:
        common.write_json(a.json, results)


if __name__ == "__main__":
    main()
