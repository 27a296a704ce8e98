#!/usr/bin/python3
"""Paired speed benchmark (issue 13): npukit against onnxruntime-node on the same model, images,
machine and thread count, in one run, printed as ratios, and npukit's peak resident memory per
command (getrusage ru_maxrss). A reported benchmark, not a test.

  bench/paired.py ZOO_ARCH_DIR [--images N] [--repeats R] [--threads 1,2] [--npukit PATH]
                  [--work DIR] [--eval-only]

ZOO_ARCH_DIR holds float.onnx, calib.npy and test.npy (scripts/evidence/make_zoo.py). Measures:
  - quantize: the whole `npukit quantize` command with the calibration set (loading, both
    calibration passes, writing the model) against onnxruntime float (all graph optimizations)
    running the same images, as issue 13 states its goal: the float reference executor's speed;
  - eval: `npukit eval` of the compiled int8 program (the exact device model) against
    onnxruntime's fastest int8 run (uint8 activations, all optimizations) and its int8-activation
    run with optimizations disabled (Gati's arithmetic, done the slow way), per image.
    --eval-only leaves the quantize rows out (the int8 model is quantized once, with 1 thread,
    unless WORK/int8.onnx exists already).
npukit's eval time per image is the one `npukit eval --json` measures inside the process over
the images after each worker's first (warm_seconds_per_image, warm_cpu_seconds_per_image; the
workers start timing together, once each has done its first), as onnxruntime's figure is its
session.run times after a warm-up run: process start-up, program loading and the first image's
weight packing are left out of both. (Until 2026-11-27 it was the difference between an eval of
N images and one of N/2, which leaves out the same costs but adds the noise of two whole
processes to each round.) The test images are repeated cyclically up to N
(default 32). Each of R rounds (default 3) runs npukit and onnxruntime u8 back to back, so each
ratio pairs measurements taken within seconds of each other; the table gives the median round
(by CPU ratio) and the spread of the ratios. A second row takes each at its fastest over the
rounds: on a machine shared with others, interference only adds time.
The table's header names the SIMD level npukit's kernels ran at (`simd` in eval's --json;
NPUKIT_ISA forces one). Both wall time and CPU time (user + system) are reported: on a shared, loaded machine wall time
includes waiting for a core, so compare CPU time there (and say so). Needs bench/ort's
node_modules (`cd bench/ort && npm ci --ignore-scripts`).
"""
import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd):
    """Runs cmd; returns (wall s, CPU s of the child, stdout). The child's peak resident memory
    (getrusage ru_maxrss of that one child, KiB) is kept in PEAK_KIB[cmd[1]] (max over runs)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read()[-2000:]}")
        key = " ".join(os.path.basename(c) for c in cmd[:2])
        PEAK_KIB[key] = max(PEAK_KIB.get(key, 0), ru.ru_maxrss)
        return t1 - t0, ru.ru_utime + ru.ru_stime, out.read()


PEAK_KIB = {}
SIMD = set()  # the SIMD levels npukit eval reported (`simd` in its --json)


def npy_rows(path):
    """Number of entries along axis 0 of a .npy file (header only)."""
    with open(path, "rb") as f:
        magic = f.read(8)
        size = struct.unpack("<H", f.read(2))[0] if magic[6] == 1 else struct.unpack("<I", f.read(4))[0]
        header = f.read(size).decode("latin1")
    shape = header.split("'shape':")[1].split(")")[0].strip(" (")
    return int(shape.split(",")[0])


def npy_rows_to(path, n, out):
    """Writes n entries along axis 0 to out: those of the .npy at path, repeated cyclically when
    n is more than it holds (C order)."""
    with open(path, "rb") as f:
        magic = f.read(8)
        wide = magic[6] != 1
        size = struct.unpack("<I" if wide else "<H", f.read(4 if wide else 2))[0]
        header = f.read(size).decode("latin1")
        body = f.read()
    rows = npy_rows(path)
    row = len(body) // rows
    shape = header.split("'shape':")[1].split(")")[0].strip(" (")
    rest = shape.split(",", 1)[1] if "," in shape else ""
    new = header.replace("'shape': (" + shape + ")", "'shape': (%d,%s)" % (n, rest)).rstrip("\n ")
    new += " " * (63 - (10 + len(new)) % 64) + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(new)) + new.encode("latin1"))
        for i in range(n):
            f.write(body[(i % rows) * row:(i % rows + 1) * row])


def median_round(rounds, ratio):
    """The round with the median ratio(round), and the ratios' spread as text."""
    ordered = sorted(rounds, key=ratio)
    return ordered[len(ordered) // 2], (f"{ratio(ordered[0]):.2f}-{ratio(ordered[-1]):.2f}x over "
                                        f"{len(ordered)} rounds")


def write_labels(path, n):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }" % n
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(b"\0" * 8 * n)


def ort(model, inputs, opt, threads, out_json):
    cmd = ["node", os.path.join(ROOT, "bench", "ort", "run.mjs"), model, inputs, "--batch-axis0",
           "--opt", opt, "--threads", str(threads), "--repeat", "2"]
    _, _, stdout = timed(cmd)
    j = json.loads(stdout.strip().splitlines()[-1])
    json.dump(j, open(out_json, "w"))
    # --batch-axis0: "ms" and "cpu_ms" hold one time per image of the last repeat (session.run only).
    per_image_wall = sum(j["ms"]) / len(j["ms"])
    per_image_cpu = sum(j["cpu_ms"]) / len(j["cpu_ms"])
    return per_image_wall / 1e3, per_image_cpu / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("arch_dir")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-int8-reference", action="store_true",
                    help="leave out onnxruntime's int8 run with optimizations disabled")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--npukit", default=os.path.join(ROOT, "build", "tools", "npukit"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--eval-only", action="store_true")
    a = ap.parse_args()
    name = os.path.basename(os.path.normpath(a.arch_dir))
    work = a.work or os.path.join("/tmp", f"npukit-paired-{os.getuid()}", name)
    os.makedirs(work, exist_ok=True)
    f = lambda *p: os.path.join(work, *p)
    src = lambda p: os.path.join(a.arch_dir, p)
    inp = subprocess.run(["/usr/bin/python3", "-c", "import onnx,sys; m=onnx.load(sys.argv[1]); "
                          "print(m.graph.input[0].name)", src("float.onnx")],
                         capture_output=True, text=True).stdout.strip() or "input"
    calib_n = npy_rows(src("calib.npy"))
    rows = []
    if a.eval_only and not os.path.exists(f("int8.onnx")):
        timed([a.npukit, "quantize", src("float.onnx"), "--calib", src("calib.npy"), "-o",
               f("int8.onnx"), "-q", "--threads", "1"])
    for t in [] if a.eval_only else [int(x) for x in a.threads.split(",")]:
        rounds = []
        for _ in range(a.repeats):
            qw, qc, _ = timed([a.npukit, "quantize", src("float.onnx"), "--calib", src("calib.npy"),
                               "-o", f("int8.onnx"), "-q", "--threads", str(t)])
            ow, oc = ort(src("float.onnx"), f"{inp}={src('calib.npy')}", "all", t,
                         f(f"ort_float_{t}.json"))
            rounds.append((qw, qc, ow * calib_n, oc * calib_n))
        (qw, qc, ow, oc), spread = median_round(rounds, lambda r: r[0] / r[2])
        rows.append((f"quantize, the whole command with {calib_n} calibration images", t, qw, qc,
                     ow, oc, f"onnxruntime float, all optimizations, the same {calib_n} images",
                     f"wall {spread}"))
    subprocess.run([a.npukit, "compile", f("int8.onnx"), "-o", f("prog")], check=True,
                   capture_output=True)
    if not os.path.exists(f("uint8.onnx")):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "evidence",
                        "make_uint8_variant.py"), f("int8.onnx"), f("uint8.onnx")], check=True,
                       capture_output=True)
    n = a.images
    npy_rows_to(src("test.npy"), n, f(f"test_{n}.npy"))
    write_labels(f("labels.npy"), n)
    images = f(f"test_{n}.npy")
    for t in [int(x) for x in a.threads.split(",")]:
        def evaluate():
            """(wall s, CPU s) per image after each worker's first, from npukit eval --json."""
            out = f(f"eval_{t}.json")
            timed([a.npukit, "eval", f("prog"), "--data", images, "--labels", f("labels.npy"),
                   "--limit", str(n), "-q", "--threads", str(t), "--json", out])
            j = json.load(open(out))
            SIMD.add(j.get("simd", "unknown"))
            return j["warm_seconds_per_image"], j["warm_cpu_seconds_per_image"]
        rounds = []
        for _ in range(a.repeats):
            ew, ec = evaluate()
            uw, uc = ort(f("uint8.onnx"), f"{inp}={images}", "all", t, f(f"ort_u8_{t}.json"))
            rounds.append((ew, ec, uw, uc))
        (ew, ec, uw, uc), spread = median_round(rounds, lambda r: r[1] / r[3])
        rows.append(("eval (device model), per image", t, ew, ec, uw, uc,
                     "onnxruntime uint8 activations, all optimizations", spread))
        # The same rounds, each side at its fastest: interference on a shared machine only
        # ever adds time.
        fastest = lambda xs, i: min(x[i] for x in xs)
        rows.append(("eval, per image, fastest of the rounds", t, fastest(rounds, 0),
                     fastest(rounds, 1), fastest(rounds, 2), fastest(rounds, 3),
                     "onnxruntime uint8 activations, all optimizations (fastest round)", ""))
        if not a.no_int8_reference:
            iw, ic = ort(f("int8.onnx"), f"{inp}={images}", "disabled", t, f(f"ort_i8_{t}.json"))
            rows.append(("eval (device model), per image", t, ew, ec, iw, ic,
                         "onnxruntime int8 activations, optimizations disabled", ""))
    print(f"## {name}: npukit against onnxruntime-node, paired ({os.cpu_count()} cores, npukit's "
          f"{' / '.join(sorted(SIMD))} kernels)\n")
    print("| what | threads | npukit wall ms | npukit CPU ms | reference | ref wall ms | ref CPU ms "
          "| ratio wall | ratio CPU | ratio CPU spread |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for what, t, nw, nc, rw, rc, ref, spread in rows:
        print(f"| {what} | {t} | {nw*1e3:.1f} | {nc*1e3:.1f} | {ref} | {rw*1e3:.1f} | "
              f"{rc*1e3:.1f} | {nw/rw:.2f}x | {nc/rc:.2f}x | {spread} |")
    print("\nnpukit peak resident memory (getrusage ru_maxrss of the process, max over runs): " +
          ", ".join(f"{k} {v / 1024:.0f} MiB" for k, v in sorted(PEAK_KIB.items())))
    json.dump({"rows": [dict(zip(["what", "threads", "npukit_wall_s", "npukit_cpu_s", "ref_wall_s",
                                  "ref_cpu_s", "reference", "ratio_cpu_spread"], r)) for r in rows],
               "npukit_peak_kib": PEAK_KIB, "npukit_simd": sorted(SIMD)},
              open(f("paired.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
