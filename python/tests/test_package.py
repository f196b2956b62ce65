"""`import devcheck` never imports torch; `import devcheck.torch` without torch says how to get it."""

import os
import subprocess
import sys

from helpers import ROOT

BLOCK_TORCH = "import sys; sys.modules['torch'] = None\n"


def python(code: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "python"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_devcheck_itself_does_not_import_torch():
    done = python("import sys, devcheck\nprint('torch' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_devcheck_torch_without_torch_says_pip_install_torch():
    done = python(
        BLOCK_TORCH
        + "try:\n"
        + "    import devcheck.torch\n"
        + "except ImportError as error:\n"
        + "    print(error)\n"
    )
    assert done.returncode == 0, done.stderr
    assert (
        "devcheck.torch needs PyTorch, which is not installed: pip install torch"
        in done.stdout
    )
