#!/usr/bin/python3
"""Evidence (c): npukit (device model) against onnxruntime-node on the same int8 models.

Needs compare_all.py's quantized models in OUT/models/ and `cd bench/ort && npm ci
--ignore-scripts`. For each int8 model, runs its committed inputs through `npukit run` and
`node bench/ort/run.mjs --opt disabled --batch-axis0`, recovers the int8 values the final
DequantizeLinear read (float output / scale + zero point) and counts values equal, within 1 and
the largest difference. Then the top-1 agreement of the two on the whole digits test split.
Writes OUT/ort.json and OUT/ort.md.
"""
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def ort_run(model, feeds, out_dir, extra=()):
    cmd = ["node", common.ORT_RUN, model] + [f"{k}={v}" for k, v in feeds.items()] + [
        "--out", out_dir, "--opt", "disabled", "--batch-axis0"] + list(extra)
    p = common.run(cmd)
    return json.loads(p.stdout.strip().splitlines()[-1])


def npukit_run(model, feeds, out_dir):
    cmd = [common.npukit_bin(), "run", model, "-o", out_dir]
    for k, v in feeds.items():
        cmd += ["--input", f"{k}={v}"]
    common.run(cmd)


def models():
    work = os.path.join(common.OUT, "models")
    result = [("digits (lenet)", os.path.join(work, "digits.int8.onnx"),
               os.path.join(work, "digits.inputs.npy"))]
    for f in sorted(glob.glob(os.path.join(common.ROOT, "fixtures", "models", "*.onnx"))):
        name = os.path.basename(f)[:-5]
        result.append((f"models/{name}", os.path.join(work, name + ".int8.onnx"),
                       os.path.join(work, name + ".inputs.npy")))
    for f in sorted(glob.glob(os.path.join(common.ROOT, "fixtures", "qop", "*.onnx"))):
        name = os.path.basename(f)[:-5]
        result.append((f"qop/{name}", f, os.path.join(work, name + ".inputs.npy")))
    return result


def compare_model(label, model, inputs):
    name = common.model_inputs(model)[0]
    tag = common.safe_name(label)
    ndir = os.path.join(common.OUT, "ort", tag, "npukit")
    odir = os.path.join(common.OUT, "ort", tag, "ort")
    r = {"model": label}
    try:
        npukit_run(model, {name: inputs}, ndir)
    except RuntimeError as e:
        return {**r, "status": "npukit error", "error": str(e).splitlines()[-1]}
    try:
        ort_run(model, {name: inputs}, odir)
    except RuntimeError as e:
        return {**r, "status": "ort error", "error": str(e).splitlines()[-1]}
    quant = common.output_quantization(model)
    total = equal = within1 = 0
    max_diff = 0.0
    units = []
    for out, q in quant.items():
        a = np.load(os.path.join(ndir, common.safe_name(out) + ".npy"))
        b = np.load(os.path.join(odir, common.safe_name(out) + ".npy"))
        if a.shape != b.shape:
            return {**r, "status": "shape differs", "error": f"{out}: {a.shape} vs {b.shape}"}
        if q is not None:
            a, b = common.to_int8_units(a, q), common.to_int8_units(b, q)
            units.append("int8")
        else:
            units.append("float")
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        total += d.size
        equal += int((d == 0).sum())
        within1 += int((d <= 1).sum())
        max_diff = max(max_diff, float(d.max()))
    return {**r, "status": "ok", "values": total, "equal": equal / total,
            "within1": within1 / total, "max_diff": max_diff, "units": sorted(set(units))}


def digits_top1():
    digits = os.path.join(common.ROOT, "fixtures", "digits")
    model = os.path.join(common.OUT, "models", "digits.int8.onnx")
    pred = os.path.join(common.OUT, "ort", "digits_npukit_pred.npy")
    common.run([common.npukit_bin(), "eval", model, "--data", os.path.join(digits, "X_test.npy"),
                "--labels", os.path.join(digits, "y_test.npy"), "--predictions", pred, "-q"])
    odir = os.path.join(common.OUT, "ort", "digits_split")
    ort_run(model, {"image": os.path.join(digits, "X_test.npy")}, odir)
    ort_logits = np.load(os.path.join(odir, "logits.npy"))
    ort_pred = ort_logits.argmax(axis=1)
    npk_pred = np.load(pred)
    y = np.load(os.path.join(digits, "y_test.npy"))
    return {"images": int(y.size), "top1_agreement": float((ort_pred == npk_pred).mean()),
            "ort_top1": float((ort_pred == y).mean()), "npukit_top1": float((npk_pred == y).mean())}


def main():
    results = []
    for label, model, inputs in models():
        if not os.path.exists(model) or not os.path.exists(inputs):
            results.append({"model": label, "status": "missing", "error": "run compare_all.py first"})
            continue
        r = compare_model(label, model, inputs)
        print(json.dumps(r), flush=True)
        results.append(r)
    top1 = digits_top1()
    print(json.dumps(top1))
    common.write_json(os.path.join(common.OUT, "ort.json"), {"models": results, "digits": top1})
    lines = ["| model | values | equal | within 1 | largest difference | compared as |",
             "|---|---|---|---|---|---|"]
    for r in results:
        if r["status"] != "ok":
            lines.append(f"| {r['model']} | - | - | - | - | {r['status']}: {r['error'].replace('|', '/')} |")
        else:
            lines.append(f"| {r['model']} | {r['values']} | {100 * r['equal']:.2f} % | "
                         f"{100 * r['within1']:.2f} % | {r['max_diff']:g} | {', '.join(r['units'])} |")
    lines.append("")
    lines.append(f"Digits test split ({top1['images']} images): top-1 agreement npukit vs onnxruntime "
                 f"{100 * top1['top1_agreement']:.2f} %; top-1 accuracy npukit {100 * top1['npukit_top1']:.2f} %, "
                 f"onnxruntime {100 * top1['ort_top1']:.2f} %.")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(common.OUT, "ort.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
