"""Shared test helpers: culprit line lookup, expected-text comparison, model state comparison."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import devcheck.torch as dct
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def line_of(module: Any, marker: str) -> int:
    """The line of `module`'s source carrying `# culprit: <marker>` (exactly one)."""
    path = Path(module.__file__)
    lines = [
        i
        for i, text in enumerate(path.read_text().splitlines(), 1)
        if text.rstrip().endswith(f"# culprit: {marker}")
    ]
    assert len(lines) == 1, f"{path}: marker {marker!r} found on lines {lines}"
    return lines[0]


def only(report: dct.Report, code: str) -> dct.Finding:
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, f"expected one {code}, got {len(found)}:\n{report}"
    return found[0]


def assert_at(finding: dct.Finding, module: Any, marker: str) -> None:
    assert finding.filename == str(Path(module.__file__).resolve()), finding.filename
    assert finding.line == line_of(module, marker), (
        f"{finding.one_line()}, expected line {line_of(module, marker)}"
    )


def assert_matches_snapshot(name: str, text: str) -> None:
    """Compares `text` with `snapshots/<name>.txt`; DEVCHECK_UPDATE_SNAPSHOTS=1 rewrites it."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("DEVCHECK_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    assert path.exists(), (
        f"no snapshot {path}; run once with DEVCHECK_UPDATE_SNAPSHOTS=1 and read it"
    )
    expected = path.read_text()
    assert text == expected, f"report differs from {path}:\n{text}"


class ModelSnapshot:
    """Everything of a model the checker promises to give back: the same parameter and buffer
    objects under the same paths, on the same devices, with the same values, gradients,
    requires_grad flags, training flags and attributes."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.params = {
            n: (
                p,
                p.device,
                p.detach().clone(),
                p.requires_grad,
                p.grad,
                None if p.grad is None else p.grad.clone(),
            )
            for n, p in model.named_parameters(remove_duplicate=False)
        }
        self.buffers = {
            n: (b, b.device, b.detach().clone())
            for n, b in model.named_buffers(remove_duplicate=False)
        }
        self.attributes = {name: dict(vars(m)) for name, m in model.named_modules()}
        self.training = {name: m.training for name, m in model.named_modules()}

    def assert_unchanged(self) -> None:
        now_params = dict(self.model.named_parameters(remove_duplicate=False))
        assert now_params.keys() == self.params.keys()
        for name, (
            param,
            device,
            value,
            requires_grad,
            grad,
            grad_value,
        ) in self.params.items():
            assert now_params[name] is param, f"{name} is another object"
            assert param.device == device, name
            assert torch.equal(param.detach(), value), f"{name} changed value"
            assert param.requires_grad == requires_grad, name
            assert param.grad is grad, f"{name}.grad is another object"
            if grad is not None:
                assert torch.equal(grad, grad_value), f"{name}.grad changed value"
        now_buffers = dict(self.model.named_buffers(remove_duplicate=False))
        assert now_buffers.keys() == self.buffers.keys()
        for name, (buffer, device, value) in self.buffers.items():
            assert now_buffers[name] is buffer, f"{name} is another object"
            assert buffer.device == device, name
            assert torch.equal(buffer, value), f"{name} changed value"
        for name, module in self.model.named_modules():
            before = self.attributes[name]
            after = vars(module)
            assert after.keys() == before.keys(), (
                f"{name}: attributes {set(after) ^ set(before)}"
            )
            for key, value in before.items():
                assert after[key] is value, f"{name}.{key} is another object"
            assert module.training == self.training[name], name
