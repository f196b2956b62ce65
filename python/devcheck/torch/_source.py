"""Where things happen in the user's code: call sites from the Python stack, and source snippets.

A finding points at "the user's line": the deepest frame on the stack that is not inside torch,
devcheck or the standard library. Python 3.11 keeps the column span of every instruction, so a
site also knows which expression on the line made the call (`self.fc1(x)`, `x * mask`), and the
rendered report underlines it.
"""

from __future__ import annotations

import dis
import functools
import linecache
import os
import sys
import sysconfig
import types
from dataclasses import dataclass

import torch

__all__ = [
    "Site",
    "absolute_path",
    "caller_is_user",
    "display_path",
    "snippet_lines",
    "user_site",
]


@dataclass(frozen=True)
class Site:
    """A place in a source file: 1-based line and column, with the end of the expression."""

    filename: str
    line: int
    column: int
    end_line: int
    end_column: int
    function: str
    # The operator the instruction at this site applies (`*`, `@`, `<`), when it is one.
    operator: str | None = None

    def __str__(self) -> str:
        return f"{display_path(self.filename)}:{self.line}:{self.column}"

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.filename, self.line, self.column)


def user_site(skip: int = 1) -> Site | None:
    """The deepest frame outside torch, devcheck and the standard library, as a site."""
    frame: types.FrameType | None = sys._getframe(skip)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return None if frame is None else site_of(frame)


def caller_is_user(skip: int = 1) -> bool:
    """Did the user's code itself call the torch function now being handled?

    Only the frames that route a call to a mode are stepped over (devcheck's own, torch's
    `overrides.py` and the Python-level `Tensor` methods in `torch/_tensor.py`): a tensor made or
    read by torch's own code (an optimizer's step counter, a loss scaler's check) is torch's
    business, not a line the user can fix.
    """
    frame: types.FrameType | None = sys._getframe(skip)
    while frame is not None and (
        _in_devcheck(frame.f_code.co_filename)
        or frame.f_code.co_filename in _ROUTING_FILES
    ):
        frame = frame.f_back
    return frame is not None and not _is_internal(frame.f_code.co_filename)


def site_of(frame: types.FrameType) -> Site:
    code = frame.f_code
    line, end_line, column, end_column = _positions(code)[frame.f_lasti // 2]
    line = line if line is not None else frame.f_lineno
    return Site(
        filename=absolute_path(code.co_filename),
        line=line,
        column=(column or 0) + 1,
        end_line=end_line if end_line is not None else line,
        end_column=(end_column if end_column is not None else (column or 0) + 1) + 1,
        function=code.co_name,
        operator=_operator_at(code, frame.f_lasti),
    )


def display_path(filename: str) -> str:
    """A path relative to the working directory when the file is under it (stable in tests)."""
    if not os.path.isabs(filename):
        return filename
    cwd = os.getcwd()
    if filename.startswith(cwd + os.sep):
        return os.path.relpath(filename, cwd)
    return filename


def snippet_lines(site: Site) -> list[tuple[int, str]] | None:
    """The site's line with one line of context either side, as (number, text) pairs."""
    if not linecache.getline(site.filename, site.line):
        return None
    lines = []
    for number in range(max(1, site.line - 1), site.line + 2):
        text = linecache.getline(site.filename, number)
        if number > site.line and not text:
            break
        lines.append((number, text.rstrip("\n").rstrip()))
    return lines


# -------------------------------------------------------------------------------------------
# Helpers

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_DEVCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIRS = tuple(
    {
        os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep,
        os.path.abspath(sysconfig.get_paths()["platstdlib"]) + os.sep,
    }
)
_ROUTING_FILES = frozenset(
    {
        os.path.join(_TORCH_DIR, "overrides.py"),
        os.path.join(_TORCH_DIR, "_tensor.py"),
    }
)


@functools.lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    if filename.startswith("<frozen ") or filename == "<__array_function__ internals>":
        return True
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith((_TORCH_DIR, _DEVCHECK_DIR)):
        return True
    # The standard library never holds the user's line (a decorator's wrapper, contextlib);
    # site-packages, which sits under it in a virtual environment's base, does.
    return (
        path.startswith(_STDLIB_DIRS)
        and "site-packages" not in path
        and "dist-packages" not in path
    )


@functools.lru_cache(maxsize=4096)
def _in_devcheck(filename: str) -> bool:
    return (
        os.path.abspath(filename).startswith(_DEVCHECK_DIR)
        if not filename.startswith("<")
        else False
    )


@functools.lru_cache(maxsize=2048)
def _positions(
    code: types.CodeType,
) -> tuple[tuple[int | None, int | None, int | None, int | None], ...]:
    return tuple(code.co_positions())


_BINARY_OP = dis.opmap.get("BINARY_OP")
_COMPARE_OP = dis.opmap["COMPARE_OP"]
# `dis._nb_ops` is the table BINARY_OP's argument indexes: (name, symbol) pairs.
_NB_OPS = [symbol for _, symbol in getattr(dis, "_nb_ops", [])]


def _operator_at(code: types.CodeType, lasti: int) -> str | None:
    raw = code.co_code
    if lasti < 0 or lasti + 1 >= len(raw):
        return None
    opcode, arg = raw[lasti], raw[lasti + 1]
    if opcode == _BINARY_OP and arg < len(_NB_OPS):
        return _NB_OPS[arg]
    if opcode == _COMPARE_OP:
        # From 3.12 the comparison's index sits above four flag bits.
        index = arg >> 4 if sys.version_info >= (3, 12) else arg
        return dis.cmp_op[index] if index < len(dis.cmp_op) else None
    return None


@functools.lru_cache(maxsize=4096)
def absolute_path(filename: str) -> str:
    """A code object's file name as an absolute path (`<string>` and the like unchanged)."""
    return filename if filename.startswith("<") else os.path.abspath(filename)
