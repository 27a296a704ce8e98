"""Shared fixtures of the Python module's tests: the npukit binary (to check that the module
and the command line agree bit for bit), the repository root and a temporary directory that
pytest removes."""
import os
import subprocess

import pytest

ROOT = os.environ.get("NPUKIT_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DIGITS = os.path.join(ROOT, "fixtures", "digits")


@pytest.fixture
def npukit_cli():
    binary = os.environ.get("NPUKIT_BIN")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail("NPUKIT_BIN must name the npukit binary (ctest sets it)")

    def run(*args):
        p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"npukit {' '.join(map(str, args))}: {p.stderr}"
        return p.stdout
    return run
