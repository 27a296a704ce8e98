"""npukit from Python: quantize ONNX models to int8, compile them for the Gati accelerator, run
them on the bit-exact device model (in process or on a board served over TCP) with numpy arrays
in and out, and use the NVDLA LUT designer and the XS3 kernels.

    import numpy as np, npukit
    int8 = npukit.quantize("digits.onnx", calib)          # calib: float32 [N, ...] array
    program = npukit.compile(int8, sa_arch="9,8,8")
    session = npukit.Session(program)
    logits = session.run({"input": image})["logits"]
    session.stats["device_cycles"]
    npukit.eval(program, x_test, y_test)["int8_top1"]

Every failure raises npukit.Error with npukit's own message. docs/python.md has the whole API.
"""
import json
import os

import numpy as np

from . import _npukit
from ._npukit import CLOCK_HZ, Error
from . import lut, xs3

__all__ = ["CLOCK_HZ", "Error", "Program", "Session", "compare", "compile", "eval", "evaluate",
           "load", "lut", "profile", "quantize", "set_threads", "xs3"]
__version__ = "0.1.0"


def _model_bytes(model):
    """An ONNX model as bytes: a path, bytes, or an object with SerializeToString (onnx.ModelProto)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                return f.read()
        except OSError as e:
            raise Error(f"cannot read model '{model}': {e.strerror}") from None
    raise Error(f"a model is a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _input_names(model_bytes):
    _, inputs, _ = _npukit.load_model_info(model_bytes)
    return [name for name, _, _ in inputs]


def _samples(calib, names):
    """Calibration samples (a list of {input name: array of batch 1}) from an array with the batch
    on axis 0, a {name: array} dict of such arrays, a list of dicts, or a .npy file or folder."""
    if isinstance(calib, (str, os.PathLike)):
        path = os.fspath(calib)
        files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".npy")]
                 if os.path.isdir(path) else [path])
        if not files:
            raise Error(f"calibration folder '{path}' holds no .npy files")
        calib = np.concatenate([np.load(f) for f in files], axis=0)
    if isinstance(calib, list):
        return [{k: np.ascontiguousarray(v) for k, v in s.items()} for s in calib]
    if isinstance(calib, np.ndarray):
        if len(names) != 1:
            raise Error(f"the model has {len(names)} inputs ({', '.join(names)}): give calibration "
                        "data as a dict {name: array}")
        calib = {names[0]: calib}
    if not isinstance(calib, dict) or not calib:
        raise Error("calibration data is an array, a dict of arrays, a list of dicts or a path")
    counts = {len(v) for v in calib.values()}
    if len(counts) != 1:
        raise Error("calibration arrays differ in their number of samples (axis 0)")
    n = counts.pop()
    return [{k: np.ascontiguousarray(v[i:i + 1]) for k, v in calib.items()} for i in range(n)]


def quantize(model, calib, method="percentile", percentile=99.99, bins=2048, output=None,
             progress=False):
    """Post-training int8 quantization (npukit quantize). Returns the QOperator model's bytes and,
    when `output` is a path, also writes them there. `method` is minmax, percentile or entropy;
    `progress=True` prints a progress line to stderr, or pass a callable(done, total)."""
    data = _model_bytes(model)
    callback = None
    if progress is True:
        import sys

        def callback(done, total):
            sys.stderr.write(f"\rcalibrating {done}/{total}")
            if done == total:
                sys.stderr.write("\n")
    elif callable(progress):
        callback = progress
    out, _, _ = _npukit.quantize(data, _samples(calib, _input_names(data)), method, percentile,
                                 bins, callback)
    if output is not None:
        with open(output, "wb") as f:
            f.write(out)
    return out


class Program:
    """A compiled Gati program, held in memory: the GML bytes the board loads (.gml), the manifest
    as a dict (.manifest), its segments (.segments: device and host, in order) and the host
    segments' ONNX subgraphs (.host_segments: {segment index: model bytes}). Made by
    npukit.compile() or npukit.load(dir); .save(dir) writes what `npukit compile -o DIR` writes."""

    def __init__(self, handle):
        self._handle = handle
        self.manifest = json.loads(handle.manifest_json)
        self.gml = handle.gml

    @property
    def segments(self):
        return self.manifest.get("segments", [])

    @property
    def host_segments(self):
        return self._handle.host_segments

    @property
    def input_names(self):
        return [t["name"] for t in self.manifest["inputs"]]

    @property
    def output_names(self):
        return [t["name"] for t in self.manifest["outputs"]]

    def explain(self):
        """The `npukit compile --explain` report (programs compiled in this process)."""
        return self._handle.explain()

    def save(self, directory):
        """Writes the program directory (manifest.json, the GML, the host subgraphs); replaces
        an older program there, refuses a non-empty directory that holds none."""
        self._handle.save(os.fspath(directory))

    def __repr__(self):
        m = self.manifest
        return (f"<npukit.Program {m.get('model', '')!r} sa_arch={m.get('sa_arch')} "
                f"{len(self.segments)} segment(s), {len(self.gml)} GML bytes>")


def compile(model, sa_arch="9,8,8", ramsize_mb=512, dispatch=(), allow_errata=False):
    """Compiles an int8 ONNX model (QOperator or QDQ) for the Gati (npukit compile)."""
    if isinstance(ramsize_mb, bool) or not isinstance(ramsize_mb, int) or ramsize_mb <= 0:
        raise Error(f"ramsize_mb must be a positive integer, not {ramsize_mb!r}")
    return Program(_npukit.compile(_model_bytes(model), str(sa_arch), ramsize_mb,
                                   [str(d) for d in dispatch], bool(allow_errata)))


def load(directory):
    """A program directory written by `npukit compile -o DIR` or Program.save(DIR)."""
    return Program(_npukit.load(os.fspath(directory)))


def _program(program):
    """A Program from a Program, a program directory or an int8 ONNX model (compiled for
    sa_arch 9,8,8)."""
    if isinstance(program, Program):
        return program
    if isinstance(program, (str, os.PathLike)) and os.path.isdir(program):
        return load(program)
    return compile(program)


def _feeds(inputs, names):
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise Error(f"the model has {len(names)} inputs ({', '.join(names)}): give a dict "
                        "{name: array}")
        inputs = {names[0]: inputs}
    return {str(k): np.ascontiguousarray(v) for k, v in inputs.items()}


def set_threads(n):
    """Worker threads of the device model and the reference executor for the whole process
    (0 = every core); results are bit-identical for every count."""
    _npukit.set_threads(int(n))


class Session:
    """Runs a program the way the board's host does (npukit run): host segments on the
    reference executor, device segments on the device model in process ("inproc") or on a
    device served over TCP ("tcp://HOST:PORT", e.g. `npukit serve`). `program` is a Program, a
    program directory or an int8 ONNX model. `threads` sets npukit.set_threads() first."""

    def __init__(self, program, transport="inproc", threads=None):
        self.program = _program(program)
        self._session = _npukit.Session(self.program._handle, str(transport),
                                        None if threads is None else int(threads))
        self.stats = {"device_cycles": 0, "layers": [], "segments": []}

    @property
    def input_names(self):
        return self.program.input_names

    @property
    def output_names(self):
        return self.program.output_names

    def run(self, inputs):
        """inputs: {name: array} with the batch on axis 0 (or one array for a one-input model).
        Returns {output name: array}. .stats then holds the device cycles (summed over the
        batch), the cycles of each device layer of the last image and, per segment (summed over
        the batch), its cycles or host time and the bytes moved each way."""
        if self._session is None:
            raise Error("the session is closed")
        outputs, self.stats = self._session.run(_feeds(inputs, self.input_names))
        return outputs

    def close(self):
        self._session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def eval(program, data, labels, float_model=None, limit=None, transport="inproc",
         progress=False):
    """Top-1 accuracy of a program on the device model over `data` (images on axis 0) against
    integer `labels`, as `npukit eval` measures it, optionally beside the float model on the
    reference executor. Returns {"images", "int8_correct", "int8_top1", "float_correct",
    "float_top1", "top1_agreement" (with float_model), "device_cycles_per_image",
    "seconds_per_image", "warm_seconds_per_image" (the images after the first, whose time holds
    the one-time weight packing), "predictions" (int64 array)}."""
    session = program if isinstance(program, Session) else Session(program, transport)
    callback = None
    if progress is True:
        import sys

        def callback(done, total, correct):
            sys.stderr.write(f"\revaluating {done}/{total}, int8 {100 * correct / done:.2f} %")
            if done == total:
                sys.stderr.write("\n")
    elif callable(progress):
        callback = progress
    return _npukit.evaluate(session._session, np.asarray(data), np.asarray(labels),
                            0 if limit is None else int(limit),
                            None if float_model is None else _model_bytes(float_model), callback)


evaluate = eval


def compare(model, inputs, sa_arch="9,8,8", ramsize_mb=512, allow_errata=False,
            transport="inproc"):
    """Every device layer on the device model against the reference executor (npukit compare):
    the int8 `model` is compiled with every layer's output dispatched and run on `inputs` ({name:
    array} or one array, batch on axis 0). Returns the `npukit compare --json` document as a
    dict: "pass", "layers" (per layer: "differ", "max_abs_diff", "first_diff", "alone", ...),
    "outputs", "first_failing_layer"."""
    data = _model_bytes(model)
    _, model_inputs, _ = _npukit.load_model_info(data)
    return _npukit.compare(data, _feeds(inputs, [n for n, _, _ in model_inputs]), str(sa_arch),
                           int(ramsize_mb), bool(allow_errata), str(transport))


def profile(program, clock_mhz=CLOCK_HZ / 1e6):
    """Device cycles per layer from the timing model alone (npukit profile --json): `program` is
    a Program, a directory or an int8 model. Returns the profile as a dict ("total_cycles",
    "layers" with cycles, MACs, utilisation, DRAM bytes and bound, ...)."""
    if not clock_mhz > 0:
        raise Error(f"clock_mhz {clock_mhz!r} is not a clock frequency in MHz (e.g. 81)")
    return _npukit.profile(_program(program)._handle, float(clock_mhz) * 1e6)
