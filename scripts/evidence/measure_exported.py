#!/usr/bin/env python3
"""Exported models as a user brings them (issue 18), end to end with no manual editing:
npukit quantize (calibration images; symbolic shapes taken from them) -> npukit compile -> npukit
run on the held-out images, against the float model and onnxruntime's run of the same int8 file.

  measure_exported.py DIR MODEL...     (DIR holds MODEL.onnx, MODEL.calib.npy, MODEL.test.npy as
                                        make_issue18_models.py / make_exported_models.py write them)

IMAGES (default 16) sets how many of the held-out images run.
Per model it prints: the compiler's MAC share line, device cycles per image (run --stats-json),
and agreement with the float model (onnxruntime, float file) of
  - npukit's int8 run and
  - onnxruntime's run of the same int8 file (graph optimizations disabled),
measured as: top-1 agreement for a [N, classes] output; for a map with one channel (a
probability map) the share of pixels on the same side of 0.5; for a map with several channels
(segmentation logits) the share of pixels with the same arg-max channel; plus the mean cosine
of each output to the float one.
Offline only (/usr/bin/python3 with numpy + onnx; node for onnxruntime).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ORT_RUN, npukit_bin, run  # noqa: E402


def ort_outputs(model, x, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    xin = os.path.join(out_dir, "x.npy")
    np.save(xin, x)
    p = run(["node", ORT_RUN, model, "x=" + xin, "--out", out_dir, "--batch-axis0"])
    names = json.loads(p.stdout.strip().splitlines()[-1])["outputs"].keys()
    return {n: np.load(os.path.join(out_dir, n + ".npy")) for n in names}


def agreement(a, b):
    if a.ndim == 2:
        return "top-1", float(np.mean(a.argmax(1) == b.argmax(1)))
    if a.ndim == 4 and a.shape[1] == 1:
        return "map>0.5", float(np.mean((a > 0.5) == (b > 0.5)))
    if a.ndim == 4:
        return "argmax px", float(np.mean(a.argmax(1) == b.argmax(1)))
    return "-", float("nan")


def cosine(a, b):
    a = a.reshape(a.shape[0], -1).astype(np.float64)
    b = b.reshape(b.shape[0], -1).astype(np.float64)
    return float(np.mean((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
                                            + 1e-12)))


def measure(d, name, work):
    src = os.path.join(d, name + ".onnx")
    calib = os.path.join(d, name + ".calib.npy")
    test = np.load(os.path.join(d, name + ".test.npy"))[:int(os.environ.get("IMAGES", "16"))]
    w = os.path.join(work, name)
    os.makedirs(w, exist_ok=True)
    q = os.path.join(w, "int8.onnx")
    qp = run([npukit_bin(), "quantize", src, "--calib", calib, "-o", q, "-q"], check=False)
    if qp.returncode:
        return {"model": name, "failed": "quantize: " + qp.stderr.strip().splitlines()[-1]}
    kept = [l for l in qp.stdout.splitlines() if l.startswith("kept in float")]
    cp = run([npukit_bin(), "compile", q, "-o", os.path.join(w, "prog")], check=False)
    if cp.returncode:
        return {"model": name, "failed": "compile: " + cp.stderr.strip().splitlines()[-1]}
    share = [l for l in cp.stdout.splitlines() if "MACs" in l]
    xin = os.path.join(w, "test.npy")
    np.save(xin, test)
    stats = os.path.join(w, "stats.json")
    rp = run([npukit_bin(), "run", os.path.join(w, "prog"), "-i", xin, "-o",
              os.path.join(w, "npukit_out"), "--stats-json", stats], check=False)
    if rp.returncode:
        return {"model": name, "failed": "run: " + rp.stderr.strip().splitlines()[-1]}
    st = json.load(open(stats))
    flt = ort_outputs(src, test, os.path.join(w, "ort_float"))
    oq = ort_outputs(q, test, os.path.join(w, "ort_int8"))
    res = {"model": name, "mac_share": share[0] if share else "?", "kept_float": len(kept),
           "device_cycles_per_image": st.get("device_cycles"), "outputs": {}}
    for out, f in flt.items():
        ours = np.load(os.path.join(w, "npukit_out", out + ".npy")).reshape(f.shape)
        metric, a_ours = agreement(f, ours)
        _, a_ort = agreement(f, oq[out].reshape(f.shape))
        res["outputs"][out] = {"metric": metric, "npukit": round(a_ours, 4),
                               "onnxruntime_int8": round(a_ort, 4),
                               "cosine_npukit": round(cosine(f, ours), 4),
                               "cosine_ort_int8": round(cosine(f, oq[out].reshape(f.shape)), 4)}
    return res


def main():
    d, names = sys.argv[1], sys.argv[2:]
    work = os.environ.get("EVIDENCE_OUT", "/tmp/npukit-evidence") + "/exported"
    for name in names:
        print(json.dumps(measure(d, name, work)), flush=True)


if __name__ == "__main__":
    main()
