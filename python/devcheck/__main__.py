"""`python -m devcheck ARGS...` runs the installed `devcheck` command with ARGS."""

from __future__ import annotations

import os
import subprocess
import sys

from ._find_bin import BinaryNotFound, find_devcheck_bin


def main() -> int:
    try:
        binary = find_devcheck_bin()
    except BinaryNotFound as error:
        print(f"error: {error}", file=sys.stderr)
        print(
            "help: install the wheel, which builds the command: `pip install .` in a checkout "
            "of devcheck (or `cargo run -p devcheck-cli -- ARGS` runs it from the checkout)",
            file=sys.stderr,
        )
        return 2
    args = [binary, *sys.argv[1:]]
    if sys.platform == "win32":
        return subprocess.run(args, check=False).returncode
    os.execv(binary, args)


if __name__ == "__main__":
    sys.exit(main())
