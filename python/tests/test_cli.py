"""`python -m devcheck.torch check FILE.py:NAME --input ...`: exit 0 clean, 1 errors, 2 when the
check cannot run, always with a message and a help line, never a traceback."""

import json
import os
import subprocess
import sys

import pytest
import torch
from devcheck.torch.cli import (
    InputSpec,
    UsageError,
    main,
    parse_args,
    parse_input_spec,
)
from helpers import ROOT

MODELS = "python/tests/cli_models.py"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "python"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "devcheck.torch", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_a_clean_model_exits_0():
    done = run("check", f"{MODELS}:Clean", "--input", "x:float32[8,128]")
    assert done.returncode == 0, done.stderr
    assert "dry run of `Clean` on fake cuda:0: no problems" in done.stdout
    assert "inputs: x cuda:0 float32 [8, 128]" in done.stdout


def test_errors_exit_1_with_the_report():
    done = run(
        "check",
        f"{MODELS}:PlainScale",
        "--input",
        "x:float32[8,128]",
        "--device",
        "cuda:1",
    )
    assert done.returncode == 1, done.stderr
    assert (
        "plain tensor attribute `scale` is on cpu, the rest of the model on cuda:1"
        in done.stdout
    )
    assert "╭─[python/tests/cli_models.py:21:9]" in done.stdout


def test_json_and_a_factory_with_integer_inputs():
    done = run(
        "check",
        f"{MODELS}:make_tagger",
        "--input",
        "ids:int64[2,5]=0..1000",
        "--input",
        "mask:bool[2,5]",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["model"] == "Tagger"
    assert report["ok"] is True
    # Each input went to the forward parameter of its name.
    assert report["inputs"] == ["ids cuda:0 int64 [2, 5]", "mask cuda:0 bool [2, 5]"]
    assert report["findings"] == []


@pytest.mark.parametrize(
    ("args", "message", "help_text"),
    [
        (
            ["check", "missing.py:Net", "--input", "x:float32[2]"],
            "no file `missing.py`",
            "give the path",
        ),
        (
            ["check", f"{MODELS}:Nope", "--input", "x:float32[2]"],
            f"`{MODELS}` has no `Nope`",
            "Clean, PlainScale, Tagger, make_tagger, not_a_model",
        ),
        (
            ["check", f"{MODELS}:not_a_model", "--input", "x:float32[2]"],
            "`not_a_model()` returned a list, not a torch.nn.Module",
            "NAME must be",
        ),
        (
            ["check", f"{MODELS}:LIMIT", "--input", "x:float32[2]"],
            "is a int, not a class",
            "NAME must be",
        ),
        (
            ["check", f"{MODELS}:Tagger", "--input", "x:float32[2]"],
            "raised TypeError",
            "NAME must be",
        ),
        (
            ["check", f"{MODELS}:Clean", "--input", "x:float32[8,12]"],
            "forward raised RuntimeError",
            "--input",
        ),
        (
            ["check", f"{MODELS}:Clean", "--input", "y:float32[8,128]"],
            "no parameter named y",
            "forward: x",
        ),
        (
            ["check", f"{MODELS}:Clean", "--input", "x:float33[8]"],
            "unknown dtype `float33`",
            "float32",
        ),
        (["check", f"{MODELS}:Clean"], "no --input given", "--input x:float32"),
        (
            ["check", MODELS, "--input", "x:float32[8]"],
            "is not FILE.py:NAME",
            "models/net.py:Net",
        ),
        (
            ["check", f"{MODELS}:Clean", "--input", "x:float32[8]", "--device", "gpu"],
            "unknown device",
            "cuda:N",
        ),
        ([], "no command given", "usage:"),
        (["lint"], "invalid choice", "usage:"),
    ],
)
def test_mistakes_exit_2_with_a_message_and_help(args, message, help_text, capsys):
    # In-process (the same `main` the command runs): a subprocess each would cost a torch import.
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    error, help_line = err.strip().splitlines()
    assert error.startswith("error: ") and message in error, err
    assert help_line.startswith("help: ") and help_text in help_line, err


def test_an_import_that_raises_is_named_without_a_traceback(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nWIDTH = int('wide')\n")
    done = run("check", f"{broken}:Net", "--input", "x:float32[2]")
    assert done.returncode == 2
    assert "ValueError: invalid literal for int() with base 10: 'wide'" in done.stderr
    assert "broken.py:3)" in done.stderr
    assert "Traceback" not in done.stderr


def test_parse_args_is_the_one_place_arguments_are_read():
    args = parse_args(
        ["check", "m.py:Net", "--input", "x:float32[8,128]", "--input", "n:int64[]"]
    )
    assert args.file == "m.py" and args.name == "Net"
    assert args.inputs == (
        InputSpec("x", torch.float32, (8, 128)),
        InputSpec("n", torch.int64, ()),
    )
    assert args.device == "cuda:0" and args.format == "human"
    # A Windows-style path keeps its drive: the name is after the last colon.
    assert (
        parse_args(["check", r"C:\m.py:Net", "--input", "x:float[1]"]).file
        == r"C:\m.py"
    )


def test_input_specs():
    spec = parse_input_spec("ids:int64[2,64]=5..9")
    assert (spec.low, spec.high) == (5, 9)
    made = spec.make()
    assert made.shape == (2, 64) and made.dtype == torch.int64
    assert made.min() >= 5 and made.max() < 9
    default = parse_input_spec("labels:long[100]").make()
    assert set(default.unique().tolist()) <= {0, 1}
    assert parse_input_spec("m:bool[3]").make().dtype == torch.bool
    assert parse_input_spec("h:half[2, 3]").make().dtype == torch.float16
    for bad, why in [
        ("x", "cannot read"),
        ("x:float32[a]", "whole numbers"),
        ("x:float32[2]=0..3", "integer inputs only"),
        ("x:int64[2]=3..3", "is empty"),
        ("x:int64[-1]", "negative"),
    ]:
        with pytest.raises(UsageError, match=why):
            parse_input_spec(bad)
