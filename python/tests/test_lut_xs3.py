"""npukit.lut and npukit.xs3 against the command line and the committed case files whose
expected values come from independent Python models (fixtures/lut/gen_cases.py,
fixtures/xs3/gen_cases.py)."""
import json
import os

import numpy as np
import pytest

import npukit
from conftest import ROOT


def test_lut_design_equals_the_command_line(tmp_path, npukit_cli):
    names = [name for name, _ in npukit.lut.functions()]
    assert "sigmoid" in names and "tanh" in names
    d = npukit.lut.design("sigmoid", unit="sdp", precision="fp16", lo=-8, hi=8)
    npukit_cli("lut", "design", "--fn", "sigmoid", "--unit", "sdp", "--precision", "fp16",
               "--range", "-8:8", "-o", tmp_path / "case.json")
    assert json.loads(d["case_json"]) == json.loads((tmp_path / "case.json").read_text())
    assert len(d["le"]) == 65 and len(d["lo_table"]) == 257
    assert 0 < d["error"]["max_abs"] < 2e-3 and d["error"]["samples"] > 0
    assert d["svg"].lstrip().startswith("<svg") and "npukit_sigmoid_lut" in d["c_header"]
    # the case file checks out on the register-exact model
    npukit_cli("lut", "check", tmp_path / "case.json")


def xs3_cases():
    folder = os.path.join(ROOT, "fixtures", "xs3")
    for f in sorted(os.listdir(folder)):
        if f.endswith(".json"):
            case = json.load(open(os.path.join(folder, f)))
            if case.get("op") == "conv2d_deep":
                yield pytest.param(case, id=case["name"])


@pytest.mark.parametrize("case", list(xs3_cases()))
@pytest.mark.parametrize("impl", ["auto", "scalar"])
def test_xs3_conv2d_matches_the_independent_model(case, impl):
    x = np.array(case["x"]["data"], dtype=np.int8).reshape(case["x"]["shape"])
    k = np.array(case["k"]["data"], dtype=np.int8).reshape(case["k"]["shape"])
    w = case["window"]
    y = npukit.xs3.conv2d(x, k, np.array(case["bso"], dtype=np.uint16), case["y_shape"][:2],
                          start=w["start"], stride=w["stride"], zero_point=case["zero_point"],
                          symmetric=case["params"].get("symmetric_saturation", False), impl=impl)
    expected = np.array(case["expected"]["data"], dtype=np.int8).reshape(case["y_shape"])
    assert np.array_equal(y, expected)


def test_xs3_pack_bso_layout():
    bso = npukit.xs3.pack_bso([70000], [1], [2], [3], [4], [5])
    assert bso.dtype == np.uint16 and len(bso) == 7 * 16
    assert bso[0] == 70000 >> 16 and bso[16] == 70000 & 0xFFFF  # bias high then low half
    assert (bso[32], bso[48], bso[64], bso[80], bso[96]) == (1, 2, 3, 4, 5)
