"""`python -m devcheck.torch check FILE.py:NAME --input x:float32[8,128] ...`

Imports the user's file by path, builds the model with NAME (a zero-argument factory function or
an `nn.Module` class), dry-runs its forward on inputs made from the `--input` specs, and prints the
report. Exit codes: 0 no errors (warnings are printed), 1 errors found, 2 the check could not run
(usage, a missing file or name, an import or forward that raised). The Rust `devcheck check`
subcommand calls this entry point, so its arguments are parsed in one place: `parse_args`.

Input spec grammar: `NAME:DTYPE[D1,D2,...]`, optionally `=LOW..HIGH` for integer dtypes.
- NAME: the forward parameter the tensor is passed as (by keyword; a forward taking only `*args`
  gets the inputs in order).
- DTYPE: float32 (float), float64 (double), float16 (half), bfloat16, int64 (long), int32 (int),
  int16, int8, uint8, bool.
- [D1,...]: the shape; `[]` is a 0-dim tensor.
- Values: floats are drawn from a standard normal; integers uniformly from LOW (inclusive) to
  HIGH (exclusive), by default 0..2, so that they are valid class labels and token ids for any
  model with at least two; bools are random.
Example: `--input ids:int64[2,64]=0..50257 --input mask:bool[2,64]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = [
    "CheckArgs",
    "InputSpec",
    "UsageError",
    "main",
    "parse_args",
    "parse_input_spec",
]

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float": torch.float32,
    "float64": torch.float64,
    "double": torch.float64,
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "long": torch.int64,
    "int32": torch.int32,
    "int": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_SPEC = re.compile(
    r"^(?P<name>[A-Za-z_]\w*):(?P<dtype>\w+)\[(?P<shape>[^\]]*)\](?:=(?P<low>-?\d+)\.\.(?P<high>-?\d+))?$"
)
_INT_RANGE = (0, 2)
_SPEC_HELP = (
    "an input is NAME:DTYPE[SHAPE], e.g. x:float32[8,128] or ids:int64[2,64]=0..50257"
)


class UsageError(Exception):
    """A mistake in how the command was called: a message and the help line that fixes it."""

    def __init__(self, message: str, help: str) -> None:
        super().__init__(message)
        self.message = message
        self.help = help


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    low: int = _INT_RANGE[0]
    high: int = _INT_RANGE[1]

    def make(self) -> torch.Tensor:
        if self.dtype == torch.bool:
            return torch.randint(0, 2, self.shape).bool()
        if self.dtype.is_floating_point:
            return torch.randn(self.shape, dtype=self.dtype)
        return torch.randint(self.low, self.high, self.shape, dtype=self.dtype)


@dataclass(frozen=True)
class CheckArgs:
    file: str
    name: str
    inputs: tuple[InputSpec, ...] = field(default_factory=tuple)
    device: str = "cuda:0"
    format: str = "human"


def parse_input_spec(text: str) -> InputSpec:
    match = _SPEC.match(text.strip())
    if match is None:
        raise UsageError(f"cannot read the input spec `{text}`", _SPEC_HELP)
    dtype = _DTYPES.get(match["dtype"])
    if dtype is None:
        raise UsageError(
            f"unknown dtype `{match['dtype']}` in `{text}`",
            "dtypes are " + ", ".join(_DTYPES),
        )
    shape_text = match["shape"].strip()
    try:
        shape = tuple(int(d) for d in shape_text.split(",")) if shape_text else ()
    except ValueError:
        raise UsageError(
            f"the shape in `{text}` must be whole numbers separated by commas",
            _SPEC_HELP,
        ) from None
    if any(d < 0 for d in shape):
        raise UsageError(f"the shape in `{text}` has a negative size", _SPEC_HELP)
    if match["low"] is None:
        return InputSpec(match["name"], dtype, shape)
    if dtype.is_floating_point or dtype == torch.bool:
        raise UsageError(
            f"`{text}`: a value range is for integer inputs only",
            "floats are drawn from a standard normal and bools at random; drop the `=LOW..HIGH`",
        )
    low, high = int(match["low"]), int(match["high"])
    if low >= high:
        raise UsageError(
            f"`{text}`: the range {low}..{high} is empty",
            "LOW..HIGH includes LOW and excludes HIGH",
        )
    return InputSpec(match["name"], dtype, shape, low, high)


class _Parser(argparse.ArgumentParser):
    def error(
        self, message: str
    ) -> Any:  # argparse would print usage and exit; we explain.
        raise UsageError(
            message,
            "usage: python -m devcheck.torch check FILE.py:NAME --input x:float32[8,128]",
        )


def parse_args(argv: Sequence[str]) -> CheckArgs:
    """The command line, read; `UsageError` for anything it cannot use."""
    parser = _Parser(
        prog="python -m devcheck.torch", description="PyTorch run-time device checker"
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    check = commands.add_parser(
        "check", help="dry-run a model's forward on a fake device"
    )
    check.add_argument("target", metavar="FILE.py:NAME")
    check.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="NAME:DTYPE[SHAPE]",
    )
    check.add_argument("--device", default="cuda:0")
    check.add_argument("--format", default="human", choices=["human", "json"])
    args = parser.parse_args(list(argv))
    if args.command != "check":
        raise UsageError(
            "no command given",
            "usage: python -m devcheck.torch check FILE.py:NAME --input x:float32[8,128]",
        )
    file, sep, name = args.target.rpartition(":")
    if not sep or not file or not name.isidentifier():
        raise UsageError(
            f"`{args.target}` is not FILE.py:NAME",
            "name the file and the model's class or factory function in it, e.g. models/net.py:Net",
        )
    if not args.inputs:
        raise UsageError(
            "no --input given",
            "give each input forward takes, e.g. --input x:float32[8,128]",
        )
    inputs = tuple(parse_input_spec(text) for text in args.inputs)
    from ._dryrun import parse_device

    try:
        parse_device(args.device)
    except ValueError:
        raise UsageError(
            f"unknown device `{args.device}`",
            "valid forms are cpu, cuda, cuda:N and mps",
        ) from None
    return CheckArgs(file, name, inputs, args.device, args.format)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        model = _build_model(args.file, args.name)
        report = _run(model, args)
    except UsageError as error:
        print(f"error: {error.message}\nhelp: {error.help}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(report.to_json_text())
    else:
        print(report.render(), end="")
    return 1 if report.errors else 0


def _build_model(file: str, name: str) -> nn.Module:
    path = os.path.abspath(file)
    if not os.path.isfile(path):
        raise UsageError(
            f"no file `{file}`",
            "give the path of the Python file that defines the model, e.g. models/net.py:Net",
        )
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    module_name = f"devcheck_user_{stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"`{file}` cannot be imported as Python", "give a .py file")
    module = importlib.util.module_from_spec(spec)
    # The file's own folder first, so that it imports its neighbours as it does when run.
    sys.path.insert(0, os.path.dirname(path))
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the user's module may raise anything; say where
        raise UsageError(
            f"importing `{file}` raised {_error_at(error)}",
            f"`python {file}` shows the full traceback",
        ) from None
    factory = getattr(module, name, None)
    if factory is None:
        available = sorted(
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and getattr(v, "__module__", None) == module_name
            and (callable(v))
        )
        listed = ", ".join(available) if available else "none"
        raise UsageError(
            f"`{file}` has no `{name}`",
            f"names defined there that could build a model: {listed}",
        )
    if not callable(factory):
        raise UsageError(
            f"`{name}` in `{file}` is a {type(factory).__name__}, not a class or function",
            _FACTORY_HELP,
        )
    try:
        model = factory()
    except Exception as error:  # noqa: BLE001 - the user's factory may raise anything
        raise UsageError(
            f"building the model with `{name}()` raised {_error_at(error)}",
            _FACTORY_HELP,
        ) from None
    if not isinstance(model, nn.Module):
        raise UsageError(
            f"`{name}()` returned a {type(model).__name__}, not a torch.nn.Module",
            _FACTORY_HELP,
        )
    return model


_FACTORY_HELP = "NAME must be an nn.Module class or a function that builds the model, both called with no arguments"


def _run(model: nn.Module, args: CheckArgs) -> Any:
    import inspect

    from ._check import check_forward

    tensors = {spec.name: spec.make() for spec in args.inputs}
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes_names = all(name in parameters for name in tensors) or any(
        p.kind == p.VAR_KEYWORD for p in parameters.values()
    )
    try:
        if takes_names:
            return check_forward(model, device=args.device, **tensors)
        if any(p.kind == p.VAR_POSITIONAL for p in parameters.values()):
            return check_forward(model, *tensors.values(), device=args.device)
    except Exception as error:  # noqa: BLE001 - so may the user's forward
        raise UsageError(
            f"the dry run stopped: forward raised {_error_at(error)}",
            "check that the --input names, dtypes and shapes are what forward expects",
        ) from None
    expected = ", ".join(
        n
        for n, p in parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
    unknown = ", ".join(n for n in tensors if n not in parameters)
    raise UsageError(
        f"forward of `{type(model).__name__}` has no parameter named {unknown}",
        f"name each --input after a parameter of forward: {expected or 'it takes none'}",
    )


def _error_at(error: BaseException) -> str:
    """`ValueError: message (at file.py:12)`: the deepest frame of the user's code, no traceback."""
    from ._source import _is_internal, display_path

    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not _is_internal(f.filename)
    ]
    where = (
        f" (at {display_path(frames[-1].filename)}:{frames[-1].lineno})"
        if frames
        else ""
    )
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return (
        f"{type(error).__name__}: {text}{where}"
        if text
        else f"{type(error).__name__}{where}"
    )
