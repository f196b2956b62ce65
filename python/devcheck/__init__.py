"""devcheck: a device-placement linter and debugger for deep learning.

The `devcheck` command is a Rust binary shipped in this package's wheel (`python -m devcheck`
runs it). `devcheck.torch` is the run-time checker for PyTorch models; importing `devcheck`
itself never imports torch.
"""

__all__: list[str] = []
