"""devcheck.torch: the run-time device checker for PyTorch models. No GPU needed.

```python
import devcheck.torch as dct

report = dct.check_forward(model, x, device="cuda:0")      # model(x) as if on cuda:0
report = dct.check_step(train_step, model, x, y)           # a whole training step
report = dct.inspect(model)                                # where every tensor is
dct.assert_clean(report)                                   # AssertionError with the report
with dct.syncs() as ledger: ...                            # host syncs of a real GPU run
```

How the dry run works: the model really runs, on the CPU and at the example's shapes, under a
`torch.overrides.TorchFunctionMode` that carries a *logical* device on every tensor: parameters
and buffers on the target (as `model.to(device)` would put them), plain tensor attributes where
they are, the inputs on the target (`check_forward`) or on the CPU (`check_step`, as a loader
yields them). The user's code sees the logical devices (`x.device`, `x.is_cuda`), factories
asked for `device="cuda:0"` make CPU tensors marked `cuda:0`, `.to()` moves marks, and every
torch call is checked for operands on several devices. Every finding is located at the user's
line: the deepest frame outside torch and devcheck.

During a dry run on a CUDA target, `torch.cuda.is_available()` answers True (and
`device_count()`, `current_device()`, `synchronize()` answer as on a one-GPU machine), so that
code picking its device the usual way picks what it would on the GPU machine; cuDNN is switched
off, so `nn.LSTM` and friends take their CPU path. All of it is switched back when the call
returns or raises. See docs/pytorch-checker.md for what is and is not seen.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except (
    ImportError
) as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "devcheck.torch needs PyTorch, which is not installed: pip install torch\n"
        "(the `devcheck` command and `import devcheck` work without it)"
    ) from error

from ._check import check_forward, check_step, inspect
from ._report import Finding, Report, Severity, assert_clean
from ._syncs import SyncLedger, syncs

__all__ = [
    "Finding",
    "Report",
    "Severity",
    "SyncLedger",
    "assert_clean",
    "check_forward",
    "check_step",
    "inspect",
    "syncs",
]
