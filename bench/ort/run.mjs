// Runs an ONNX model with onnxruntime-node, the trusted reference runtime npukit compares against.
//   node bench/ort/run.mjs MODEL.onnx NAME=IN.npy... [--out DIR] [--opt all|disabled]
//        [--repeat N] [--threads N] [--batch-axis0] [--profile FILE]
// Writes every model output to DIR/<output name>.npy and prints one JSON line:
//   {"model", "outputs": {name: {"dtype", "shape"}}, "ms": [per-run wall times],
//    "cpu_ms": [per-run CPU time of this process, user + system]}
// CPU time is what to compare on a shared, loaded machine (wall time includes waiting for a core).
// --batch-axis0: the inputs hold a batch along axis 0 for a model exported with batch 1; every
// image runs on its own (as npukit's runtime does) and outputs are stacked along axis 0. "ms"
// then holds one wall time per image (of the last repeat).
// --profile FILE: onnxruntime's own per-node timing, written to FILE as JSON {"nodes": [{"name",
// "op", "us"}]} in execution order, us the median over the runs after the first (bench/layers.py
// sets it beside npukit's per-layer model time).
// Graph optimizations default to "disabled": on this AVX2-without-VNNI CPU the fused uint8
// kernels can saturate, and with int8 activations x64quantprecision fails at session creation.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array], '<i2': ['int16', Int16Array], '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array], '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim())
    .map((s) => parseInt(s, 10));
  const entry = NPY_TYPES[descr];
  if (!entry) throw new Error(`${file}: dtype ${descr} not supported`);
  const [type, Ctor] = entry;
  const body = buf.subarray(start + headerLen);
  const copy = new Uint8Array(body.length);
  copy.set(body);
  return new ort.Tensor(type, new Ctor(copy.buffer), shape);
}

function writeNpy(file, tensor) {
  const descr = Object.entries(NPY_TYPES).find(([, [t]]) => t === tensor.type)?.[0];
  if (!descr) throw new Error(`output type ${tensor.type} not supported`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

const args = process.argv.slice(2);
let model, outDir = null, opt = 'disabled', repeat = 1, threads = 1, batchAxis0 = false;
let profile = null;
const feeds = {};
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  if (a === '--out') outDir = args[++i];
  else if (a === '--opt') opt = args[++i];
  else if (a === '--repeat') repeat = parseInt(args[++i], 10);
  else if (a === '--threads') threads = parseInt(args[++i], 10);
  else if (a === '--batch-axis0') batchAxis0 = true;
  else if (a === '--profile') profile = args[++i];
  else if (!model) model = a;
  else {
    const eq = a.indexOf('=');
    if (eq < 0) throw new Error(`input '${a}' must be NAME=FILE.npy`);
    feeds[a.slice(0, eq)] = readNpy(a.slice(eq + 1));
  }
}
if (!model) {
  console.error('usage: node run.mjs MODEL.onnx NAME=IN.npy... [--out DIR] [--opt all|disabled] [--repeat N]');
  process.exit(2);
}
const session = await ort.InferenceSession.create(model, {
  graphOptimizationLevel: opt, intraOpNumThreads: threads, interOpNumThreads: 1,
  ...(profile ? { enableProfiling: true, profileFilePrefix: profilePrefix() } : {}),
});
// Where onnxruntime writes its profile: a prefix of this process's own beside FILE (it adds a
// timestamp; endProfiling does not return the name in onnxruntime-node).
function profilePrefix() {
  return path.join(path.dirname(path.resolve(profile)), `.ort_profile_${process.pid}`);
}
// Image n of a tensor along axis 0, as a batch of one.
function imageOf(t, n) {
  const per = t.data.length / t.dims[0];
  return new ort.Tensor(t.type, t.data.slice(n * per, (n + 1) * per), [1, ...t.dims.slice(1)]);
}

// Tensors of equal shape [1, ...] stacked along axis 0.
function stack(list) {
  const first = list[0];
  const per = first.data.length;
  const data = new first.data.constructor(per * list.length);
  list.forEach((t, n) => data.set(t.data, n * per));
  return new ort.Tensor(first.type, data, [list.length, ...first.dims.slice(1)]);
}

const ms = [];
const cpuMs = [];
let results;
// Wall and CPU time of one session.run.
async function timedRun(feedsOne) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const out = await session.run(feedsOne);
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  const c = process.cpuUsage(c0);
  cpuMs.push((c.user + c.system) / 1e3);
  return out;
}
for (let r = 0; r < Math.max(1, repeat); ++r) {
  if (!batchAxis0) {
    results = await timedRun(feeds);
    continue;
  }
  const batch = Object.values(feeds)[0].dims[0];
  const perImage = {};
  ms.length = 0;
  cpuMs.length = 0;
  for (let n = 0; n < batch; ++n) {
    const one = {};
    for (const [name, t] of Object.entries(feeds)) one[name] = imageOf(t, n);
    const out = await timedRun(one);
    for (const [name, t] of Object.entries(out)) (perImage[name] ??= []).push(t);
  }
  results = Object.fromEntries(Object.entries(perImage).map(([k, v]) => [k, stack(v)]));
}
const outputs = {};
for (const [name, t] of Object.entries(results)) {
  outputs[name] = { dtype: t.type, shape: t.dims };
  if (outDir) {
    fs.mkdirSync(outDir, { recursive: true });
    writeNpy(path.join(outDir, `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.npy`), t);
  }
}
if (profile) {
  // Kernel time per node and run, in the order the nodes first ran; the first run left out.
  session.endProfiling();
  const prefix = profilePrefix();
  const found = fs.readdirSync(path.dirname(prefix))
    .filter((f) => f.startsWith(path.basename(prefix)));
  if (found.length !== 1) throw new Error(`onnxruntime's profile ${prefix}*: ${found.length} files`);
  const file = path.join(path.dirname(prefix), found[0]);
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  const times = new Map();
  const ops = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!times.has(name)) times.set(name, []);
    times.get(name).push(e.dur);
    ops.set(name, e.args?.op_name ?? '');
  }
  const median = (v) => {
    const s = [...v].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const nodes = [...times].map(([name, v]) => ({
    name, op: ops.get(name), us: median(v.length > 1 ? v.slice(1) : v),
  }));
  fs.writeFileSync(profile, JSON.stringify({ model, nodes }, null, 1));
}
console.log(JSON.stringify({ model, opt, outputs, ms, cpu_ms: cpuMs }));
