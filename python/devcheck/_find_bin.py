"""Where the wheel put the `devcheck` command.

The wheel carries the Rust binary as a script (maturin's `bindings = "bin"`), so pip installs it
into the scripts folder of whatever scheme it installed the package with: the environment's
`bin/` (a virtual environment, pipx, `uv tool`), the user's (`pip install --user`), or the `bin/`
beside an install made with `--target` or `--prefix`.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

__all__ = ["BinaryNotFound", "find_devcheck_bin"]

_EXE = "devcheck" + (sysconfig.get_config_var("EXE") or "")


class BinaryNotFound(FileNotFoundError):
    """The `devcheck` binary is not where an install of the wheel puts it."""


def find_devcheck_bin() -> str:
    """Return the path of the installed `devcheck` binary.

    Raises `BinaryNotFound`, listing the places looked in, when the package was not installed
    from the wheel (a checkout on `PYTHONPATH`, for instance).
    """
    looked = []
    for folder in _candidate_folders():
        path = folder / _EXE
        if path in looked:
            continue
        looked.append(path)
        if path.is_file() and os.access(path, os.X_OK):
            return os.fsdecode(path)
    raise BinaryNotFound(
        "the `devcheck` command is not installed beside this Python package; looked in:\n"
        + "\n".join(f"  {path}" for path in looked)
    )


def _candidate_folders() -> list[Path]:
    folders = [Path(sysconfig.get_path("scripts"))]
    user_scheme = sysconfig.get_preferred_scheme("user")
    folders.append(Path(sysconfig.get_path("scripts", scheme=user_scheme)))
    # `pip install --target DIR` puts the package in DIR/devcheck and the script in DIR/bin;
    # `--prefix P` puts it in P/lib/pythonX.Y/site-packages/devcheck and the script in P/bin.
    package = Path(__file__).resolve().parent
    folders.append(package.parent / ("Scripts" if sys.platform == "win32" else "bin"))
    if package.parent.name == "site-packages":
        prefix = package.parents[3] if sys.platform != "win32" else package.parents[2]
        folders.append(prefix / ("Scripts" if sys.platform == "win32" else "bin"))
    return folders
