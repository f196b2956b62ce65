"""`devcheck check FILE.py:NAME`: the Rust command runs the dry run in the user's Python and its
output and exit code are the dry run's. The command is the one `cargo build` made (or
`DEVCHECK_BIN`); `scripts/test.sh` builds it before the Python tests run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

MODELS = "python/tests/cli_models.py"


def binary() -> Path:
    named = os.environ.get("DEVCHECK_BIN")
    path = Path(named) if named else ROOT / "target" / "debug" / "devcheck"
    if not path.is_file():
        pytest.skip(
            f"no devcheck binary at {path}: build it with `cargo build -p devcheck-cli`"
        )
    return path


def devcheck(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "python"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [str(binary()), "--color", "never", "check", "--python", python, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_a_clean_model_exits_0():
    done = devcheck(f"{MODELS}:Clean", "--input", "x:float32[8,128]")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_model_with_a_device_bug_exits_1_and_names_its_line():
    done = devcheck(f"{MODELS}:PlainScale", "--input", "x:float32[8,128]")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unmoved_attribute" in done.stdout
    assert f"{MODELS}:" in done.stdout + done.stderr


def test_json_output_is_the_dry_runs():
    done = devcheck(
        f"{MODELS}:PlainScale", "--input", "x:float32[8,128]", "--format", "json"
    )
    assert done.returncode == 1
    assert (
        '"code": "device-mismatch"' in done.stdout
        or '"code": "unmoved-attribute"' in done.stdout
    )


def test_a_python_without_the_package_is_a_usage_error_with_help():
    done = subprocess.run(
        [
            str(binary()),
            "--color",
            "never",
            "check",
            "--python",
            sys.executable,
            f"{MODELS}:Clean",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=False,
    )
    if done.returncode == 0:
        pytest.skip("the devcheck package is installed in this Python")
    assert done.returncode == 2
    assert "the devcheck package is not installed in" in done.stderr
    assert "help: `pip install .`" in done.stderr
