"""Program, Session (in process and over TCP), compare, eval and profile: each checked against
the npukit command line doing the same work, bit for bit."""
import json
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import npukit
from conftest import DIGITS

INT8 = os.path.join(DIGITS, "lenet_digits.int8.onnx")
FLOAT = os.path.join(DIGITS, "lenet_digits.onnx")


@pytest.fixture(scope="module")
def program():
    return npukit.compile(INT8)


@pytest.fixture(scope="module")
def images():
    return np.load(os.path.join(DIGITS, "X_test.npy"))


def test_program_value(tmp_path, program):
    assert [s["kind"] for s in program.segments].count("device") >= 1
    assert len(program.segments) == len(program.manifest["segments"]) >= 1
    assert program.input_names == [t["name"] for t in program.manifest["inputs"]]
    assert "9,8,8" in repr(program)
    program.save(tmp_path / "p")
    loaded = npukit.load(tmp_path / "p")
    assert loaded.gml == program.gml and loaded.manifest == program.manifest
    assert set(loaded.host_segments) == set(program.host_segments)
    with pytest.raises(npukit.Error, match="compiled in this process"):
        loaded.explain()
    # save refuses a directory holding something else
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(npukit.Error, match="not empty"):
        program.save(tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_session_threads_and_stats(program, images):
    batch = images[:3]
    one = npukit.Session(program, threads=1).run(batch)
    session = npukit.Session(program, threads=2)
    two = session.run(batch)
    npukit.set_threads(0)
    for name in one:
        assert np.array_equal(one[name], two[name])
        assert one[name].shape[0] == 3
    stats = session.stats
    assert stats["device_cycles"] > 0
    assert sum(s.get("cycles", 0) for s in stats["segments"]) == stats["device_cycles"]
    assert all(l["cycles"] > 0 for l in stats["layers"])
    session.close()
    with pytest.raises(npukit.Error, match="closed"):
        session.run(batch)


def test_sessions_in_threads_agree(program, images):
    session = npukit.Session(program)
    want = session.run(images[:2])
    got = [None] * 4

    def work(i):
        got[i] = session.run(images[:2])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        for name in want:
            assert np.array_equal(g[name], want[name])


def test_session_over_tcp_equals_in_process(program, images, npukit_cli):
    binary = os.environ["NPUKIT_BIN"]
    server = subprocess.Popen([binary, "serve", "--port", "0", "--bind", "127.0.0.1",
                               "--connections", "1"], stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in server.stderr:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        assert port, "npukit serve did not say where it listens"
        with npukit.Session(program, transport=f"tcp://127.0.0.1:{port}") as remote:
            got = remote.run(images[:2])
            cycles = remote.stats["device_cycles"]
        local = npukit.Session(program)
        want = local.run(images[:2])
        for name in want:
            assert np.array_equal(got[name], want[name])
        assert cycles == local.stats["device_cycles"]
    finally:
        server.kill()
        server.wait()
        server.stderr.close()


def test_eval_equals_the_command_line(tmp_path, npukit_cli, program, images):
    y = np.load(os.path.join(DIGITS, "y_test.npy"))
    seen = []
    result = npukit.eval(program, images, y, float_model=FLOAT, limit=50,
                         progress=lambda d, t, c: seen.append((d, t, c)))
    assert seen[-1][:2] == (50, 50) and seen[-1][2] == result["int8_correct"]
    np.save(tmp_path / "x.npy", images[:50])
    np.save(tmp_path / "y.npy", y[:50])
    npukit_cli("eval", INT8, "--data", tmp_path / "x.npy", "--labels", tmp_path / "y.npy",
               "--float", FLOAT, "--json", tmp_path / "eval.json",
               "--predictions", tmp_path / "p.npy", "-q")
    cli = json.loads((tmp_path / "eval.json").read_text())
    for key in ("images", "int8_correct", "int8_top1", "float_correct", "float_top1",
                "top1_agreement", "device_cycles_per_image"):
        assert result[key] == cli[key], key
    assert np.array_equal(result["predictions"], np.load(tmp_path / "p.npy"))
    assert npukit.evaluate is npukit.eval
    with pytest.raises(npukit.Error, match="out of range"):
        npukit.eval(program, images[:2], np.array([0, 10]))
    with pytest.raises(npukit.Error, match="2 labels"):
        npukit.eval(program, images[:3], np.array([0, 1]))


def test_compare_equals_the_command_line(tmp_path, npukit_cli, images):
    result = npukit.compare(INT8, images[:2])
    assert result["pass"] is True
    assert result["layers_compared"] == len(result["layers"]) > 0
    assert all(l["differ"] == 0 for l in result["layers"])
    np.save(tmp_path / "x.npy", images[:2])
    name = npukit.compile(INT8).input_names[0]
    cli = json.loads(npukit_cli("compare", INT8, "--input", f"{name}={tmp_path / 'x.npy'}",
                                "--json"))
    cli["model"] = result["model"]
    assert result == cli
    with pytest.raises(npukit.Error, match="sa-arch|sa_arch|9,8,8"):
        npukit.compare(INT8, images[:1], sa_arch="7,7,7")


def test_profile_equals_the_command_line(tmp_path, npukit_cli, program):
    p = npukit.profile(program)
    cli = json.loads(npukit_cli("profile", INT8, "--json", "-"))
    assert p["total_cycles"] == cli["total_cycles"] > 0
    assert [l["cycles"] for l in p["layers"]] == [l["cycles"] for l in cli["layers"]]
    slow = npukit.profile(INT8, clock_mhz=40.5)
    assert slow["total_cycles"] == p["total_cycles"]
    with pytest.raises(npukit.Error, match="clock"):
        npukit.profile(program, clock_mhz=0)
    assert npukit.CLOCK_HZ == 81_000_000
