"""quantize, compile, load, Session and evaluate on the bundled digits model, each checked
against the npukit command line doing the same work (bit for bit) or an independent reference
(onnxruntime's int8 logits committed with the fixture)."""
import json
import os

import numpy as np
import pytest

import npukit
from conftest import DIGITS

FLOAT = os.path.join(DIGITS, "lenet_digits.onnx")
INT8 = os.path.join(DIGITS, "lenet_digits.int8.onnx")


@pytest.fixture(scope="module")
def data():
    return np.load(os.path.join(DIGITS, "X_test.npy")), np.load(os.path.join(DIGITS, "y_test.npy"))


def test_quantize_equals_the_command_line(tmp_path, npukit_cli):
    calib = np.load(os.path.join(DIGITS, "calib.npy"))
    for method in ("minmax", "entropy"):
        cli_out = tmp_path / f"cli_{method}.onnx"
        npukit_cli("quantize", FLOAT, "--calib", os.path.join(DIGITS, "calib.npy"), "-o", cli_out,
                   "--method", method, "-q")
        assert npukit.quantize(FLOAT, calib, method=method) == cli_out.read_bytes()
    # the same from bytes, a {name: array} dict and with a progress callback
    seen = []
    with open(FLOAT, "rb") as f:
        model = f.read()
    out = npukit.quantize(model, {"image": calib}, progress=lambda d, t: seen.append((d, t)))
    assert out == npukit.quantize(FLOAT, calib)
    assert seen and seen[-1][0] == seen[-1][1]


def test_compile_and_run_equal_the_command_line(tmp_path, npukit_cli, data):
    x, _ = data
    program = npukit.compile(INT8, sa_arch="9,8,8")
    assert program.manifest["sa_arch"] == "9,8,8"
    assert program.gml[:1] and len(program.gml) == program.manifest["gml_bytes"]
    assert "Device layers" in program.explain()

    npukit_cli("compile", INT8, "-o", tmp_path / "cli_program")
    assert (tmp_path / "cli_program" / "model.gml").read_bytes() == program.gml
    program.save(tmp_path / "py_program")
    assert (json.loads((tmp_path / "py_program" / "manifest.json").read_text())
            == json.loads((tmp_path / "cli_program" / "manifest.json").read_text()))

    batch = x[:4]
    np.save(tmp_path / "batch.npy", batch)
    name = program.manifest["inputs"][0]["name"]
    npukit_cli("run", tmp_path / "cli_program", "--input", f"{name}={tmp_path / 'batch.npy'}",
               "-o", tmp_path / "cli_out")
    with npukit.Session(program) as session:
        outputs = session.run({name: batch})
        assert session.stats["device_cycles"] > 0
        assert session.stats["layers"] and all(l["cycles"] > 0 for l in session.stats["layers"])
    for out_name, value in outputs.items():
        cli = np.load(tmp_path / "cli_out" / f"{out_name}.npy")
        assert value.dtype == cli.dtype and value.shape == cli.shape
        assert np.array_equal(value, cli)

    # a loaded directory runs the same, and so does one array for the one-input model
    loaded = npukit.load(tmp_path / "cli_program")
    assert loaded.gml == program.gml
    again = npukit.Session(loaded).run(batch)
    for out_name in outputs:
        assert np.array_equal(again[out_name], outputs[out_name])


def test_device_logits_match_onnxruntime(data):
    """The device model's int8 logits against onnxruntime's run of the same QOperator model."""
    x, _ = data
    ort = np.load(os.path.join(DIGITS, "ort_int8_logits.npy"))
    session = npukit.Session(npukit.compile(INT8))
    name = session.output_names[0]
    n = min(len(ort), 32)
    got = np.concatenate([session.run(x[i:i + 1])[name] for i in range(n)])
    assert got.shape == ort[:n].shape
    assert np.mean(np.argmax(got, 1) == np.argmax(ort[:n], 1)) == 1.0
    step = np.min(np.diff(np.unique(ort)))  # the output scale
    assert np.max(np.abs(got - ort[:n])) <= 2.01 * step


def test_evaluate_equals_the_command_line(tmp_path, npukit_cli, data):
    x, y = data
    result = npukit.evaluate(npukit.compile(INT8), x, y, limit=60)
    np.save(tmp_path / "x.npy", x[:60])
    np.save(tmp_path / "y.npy", y[:60])
    npukit_cli("eval", INT8, "--data", tmp_path / "x.npy", "--labels", tmp_path / "y.npy",
               "--json", tmp_path / "eval.json", "-q")
    cli = json.loads((tmp_path / "eval.json").read_text())
    assert result["images"] == cli["images"] == 60
    assert result["int8_correct"] == cli["int8_correct"]
    assert result["device_cycles_per_image"] == cli["device_cycles_per_image"]
    assert result["int8_top1"] > 0.9
