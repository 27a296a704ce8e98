#!/bin/bash
# Compile and simulation time of torchvision resnet18 (int8, random weights, seed 0) with npukit,
# and onnxruntime-node's time on the same model beside it (int8 and a uint8-activation variant
# with graph optimizations disabled, float with and without). A reported benchmark, not a test:
# speed goals live here. Medians over RUNS runs (hyperfine when installed, else timed loops).
#   bench/resnet18.sh            (env: NPUKIT=path/to/npukit RUNS=5 EVIDENCE_OUT=/tmp/npukit-evidence)
# Needs /usr/bin/python3 with torch/torchvision/onnx (model generation, once) and
# `cd bench/ort && npm ci --ignore-scripts` for the onnxruntime-node columns.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NPUKIT=${NPUKIT:-$(ls -t "$ROOT"/build*/tools/npukit 2>/dev/null | head -1)}
RUNS=${RUNS:-5}
W=${EVIDENCE_OUT:-/tmp/npukit-evidence}/resnet18
PY=/usr/bin/python3
[ -x "$NPUKIT" ] || { echo "no npukit binary (set NPUKIT)" >&2; exit 1; }
mkdir -p "$W"
cd "$W"

[ -f resnet18.onnx ] || $PY "$ROOT/scripts/evidence/make_resnet18.py" "$W"
[ -f resnet18.int8.onnx ] || "$NPUKIT" quantize resnet18.onnx --calib calib.npy -o resnet18.int8.onnx -q
[ -f resnet18.uint8.onnx ] || $PY "$ROOT/scripts/evidence/make_uint8_variant.py" resnet18.int8.onnx resnet18.uint8.onnx

# Wall-clock median and mean CPU seconds (user + sys) of a command run RUNS times. On a shared,
# loaded machine wall time includes waiting for a core: compare CPU times there.
time_cmd() {  # name, command...
  local name=$1; shift
  if command -v hyperfine > /dev/null; then
    hyperfine --runs "$RUNS" --warmup 1 --style none --export-json "hf_$name.json" "$*" > /dev/null
  else
    $PY - "$name" "$RUNS" "$@" <<'PYEOF'
import json, resource, subprocess, sys, time
name, runs, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times, cpu = [], []
for _ in range(runs):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    times.append(t1 - t0); cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
json.dump({"results": [{"command": " ".join(cmd), "times": times, "median": sorted(times)[len(times) // 2],
           "user": sum(cpu) / len(cpu), "system": 0.0}]}, open(f"hf_{name}.json", "w"))
PYEOF
  fi
}

time_cmd compile "$NPUKIT" compile resnet18.int8.onnx -o r18dir
time_cmd run "$NPUKIT" run r18dir --input input=image.npy -o r18out --stats-json stats.json
"$NPUKIT" run r18dir --input input=image.npy -o r18out --stats-json stats.json > run.txt 2>&1

ORT="$ROOT/bench/ort/run.mjs"
if [ -d "$ROOT/bench/ort/node_modules/onnxruntime-node" ]; then
  for v in "int8 resnet18.int8.onnx disabled" "uint8 resnet18.uint8.onnx disabled" \
           "uint8 resnet18.uint8.onnx all" "float resnet18.onnx disabled" "float resnet18.onnx all"; do
    set -- $v
    node "$ORT" "$2" input=image.npy --opt "$3" --repeat $((RUNS + 1)) --out "ort_$1_$3" \
      2> /dev/null | tail -1 > "ort_$1_$3.json"
  done
fi

$PY - "$W" <<'PYEOF'
import glob, json, os, statistics, sys
w = sys.argv[1]
def hf(name):
    r = json.load(open(os.path.join(w, f"hf_{name}.json")))["results"][0]
    return r["median"], r["user"] + r["system"]
c_wall, c_cpu = hf("compile")
r_wall, r_cpu = hf("run")
stats = json.load(open(os.path.join(w, "stats.json")))
man = json.load(open(os.path.join(w, "r18dir", "manifest.json")))
out = {"compile_wall_median_s": c_wall, "compile_cpu_s": c_cpu, "run_wall_median_s": r_wall,
       "run_cpu_s": r_cpu, "device_cycles": stats["device_cycles"],
       "device_ms_at_81MHz": stats["device_cycles"] / 81e3, "device_layers": len(man["layers"]),
       "instructions": man["instruction_count"], "gml_bytes": man["gml_bytes"],
       "host_before": (man.get("host_before") or {}).get("nodes"),
       "host_after": (man.get("host_after") or {}).get("nodes"), "ort": {}}
for f in sorted(glob.glob(os.path.join(w, "ort_*.json"))):
    j = json.load(open(f))
    ms = j["ms"][1:] or j["ms"]  # first run warms up
    cpu = (j.get("cpu_ms") or [0])[1:] or j.get("cpu_ms") or [0]
    out["ort"][os.path.basename(f)[4:-5]] = {"wall_ms": statistics.median(ms),
                                             "cpu_ms": statistics.median(cpu)}
json.dump(out, open(os.path.join(w, "resnet18.json"), "w"), indent=2)
print(f"npukit compile (int8 ONNX -> GML): median {c_wall:.3f} s wall, {c_cpu:.3f} s CPU")
print(f"npukit run (1 image, device model): median {r_wall:.3f} s wall, {r_cpu:.3f} s CPU")
print(f"device: {out['device_layers']} layers, {out['instructions']} instructions, "
      f"{stats['device_cycles']} cycles = {out['device_ms_at_81MHz']:.2f} ms at 81 MHz")
for k, v in out["ort"].items():
    print(f"onnxruntime-node {k:16} median {v['wall_ms']:8.1f} ms wall, {v['cpu_ms']:8.1f} ms CPU "
          "(1 thread, session.run only)")
PYEOF
