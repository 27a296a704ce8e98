"""Bad input raises npukit.Error carrying npukit's message; nothing crashes."""
import os

import numpy as np
import pytest

import npukit
from conftest import DIGITS

INT8 = os.path.join(DIGITS, "lenet_digits.int8.onnx")


def test_error_is_a_runtime_error():
    assert issubclass(npukit.Error, RuntimeError)


def test_garbage_model():
    with pytest.raises(npukit.Error, match="model"):
        npukit.compile(b"this is not an onnx model")


def test_missing_file():
    with pytest.raises(npukit.Error, match="cannot read model"):
        npukit.compile("/nonexistent/model.onnx")


def test_bad_arch_and_ramsize():
    with pytest.raises(npukit.Error, match="sa_arch|sa-arch|9,8,8"):
        npukit.compile(INT8, sa_arch="7,7,7")
    with pytest.raises(npukit.Error, match="ramsize_mb"):
        npukit.compile(INT8, ramsize_mb=-1)


def test_wrong_input_name_and_dtype():
    session = npukit.Session(npukit.compile(INT8))
    with pytest.raises(npukit.Error):
        session.run({"no_such_input": np.zeros((1, 1, 8, 8), np.float32)})
    with pytest.raises(npukit.Error, match="dtype"):
        session.run({session.input_names[0]: np.zeros((1, 1, 8, 8), np.complex64)})


def test_load_requires_a_program_directory(tmp_path):
    with pytest.raises(npukit.Error, match="manifest.json"):
        npukit.load(tmp_path)


def test_unknown_lut_function():
    with pytest.raises(npukit.Error):
        npukit.lut.design("no_such_function")


def test_xs3_shape_errors():
    with pytest.raises(npukit.Error, match="x must be"):
        npukit.xs3.conv2d(np.zeros((4, 4), np.int8), np.zeros((1, 1, 1, 4), np.int8),
                          np.zeros(112, np.uint16), (4, 4))
