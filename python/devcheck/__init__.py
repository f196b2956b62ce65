"""devcheck: a device-placement linter and debugger for deep learning.

The `devcheck` command is a Rust binary shipped in this package's wheel: `python -m devcheck`
runs it, and `find_devcheck_bin()` says where it is. `devcheck.torch` is the run-time checker
for PyTorch models (`pip install "devcheck[torch]"`); importing `devcheck` itself never imports
torch.
"""

from ._find_bin import find_devcheck_bin

__all__: list[str] = ["find_devcheck_bin"]
