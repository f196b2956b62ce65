"""`check_forward`, `check_step` and `inspect`: the public checks, and the findings they report."""

from __future__ import annotations

import inspect as pyinspect
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ._dryrun import (
    CPU,
    Creation,
    HostRead,
    Info,
    LogicalDevices,
    Mismatch,
    Operand,
    Recorder,
    _normalize,
    dry_run_context,
    dtype_name,
    is_missing_driver,
    parse_device,
    shape_text,
)
from ._model import ModelState, ModelTensor, Walk, walk
from ._report import Finding, Report, fmt_bytes, plural

__all__ = ["check_forward", "check_step", "inspect"]

_RUN_HELP = (
    "each problem below names the line to fix; run the dry run again until it is clean"
)


def check_forward(
    model: nn.Module, *inputs: Any, device: str | torch.device = "cuda:0", **kwargs: Any
) -> Report:
    """Dry-runs `model(*inputs, **kwargs)` as if `model.to(device)` had been called and every
    tensor in `inputs` (and `kwargs`) were on `device`. No GPU is needed.

    Parameters and registered buffers are on the target for the run; plain tensor attributes,
    and tensors and modules kept in plain lists and dicts, stay where they are, as `.to()`
    leaves them. The forward pass really runs, on the CPU at the inputs' shapes (use a small
    batch), in the model's current mode (`model.eval()` first to check inference).

    Returns a report of tensors made off the target during forward, device mismatches (each
    operand named: `fc.weight` (a parameter), `pe` (a plain attribute), the input `x`, or the
    line that made it), host reads (`.item()`, `if t:`, ...) and attributes `.to()` does not
    move, each at the user's line. An exception raised by forward propagates, after the model
    has been put back as it was.
    """
    _require_module(model, "check_forward")
    target = parse_device(device)
    names = _bind_names(getattr(model, "forward", model), inputs, kwargs, skip=0)

    def place(
        mode: LogicalDevices, real: torch.device
    ) -> tuple[tuple[Any, ...], dict[str, Any], list[str]]:
        described: list[str] = []

        def as_input(name: str, tensor: torch.Tensor) -> torch.Tensor:
            copy = _copy(tensor, real)
            mode.mark(copy, Info(target, name=name, role="input"))
            described.append(
                f"{name} {target} {dtype_name(copy.dtype)} {shape_text(tuple(copy.shape))}"
            )
            return copy

        new_args = tuple(
            _map_tensors(value, names.positional(i), as_input)
            for i, value in enumerate(inputs)
        )
        new_kwargs = {
            key: _map_tensors(value, key, as_input) for key, value in kwargs.items()
        }
        return new_args, new_kwargs, described

    def call(args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Any:
        return model(*args, **call_kwargs)

    title = f"dry run of `{type(model).__name__}` on fake {target}"
    return _dry_run(
        model, target, place, call, title, phase="forward", inputs_label="inputs"
    )


def check_step(
    step: Callable[..., Any],
    model: nn.Module,
    *batch: Any,
    device: str | torch.device = "cuda:0",
) -> Report:
    """Dry-runs `step(model, *batch)`: forward, loss, backward, optimizer step, whatever the
    callable does, with the model as `model.to(device)` leaves it and the batch where the loader
    put it (the CPU): the step itself must move the batch, as the guides' training loop does.

    An optimizer the step makes, or one it closes over, works on a copy of its state during the
    run; the model's parameters, gradients, buffers and attributes come back as they were. The
    report is `check_forward`'s, for the whole step.
    """
    if not callable(step) or (
        isinstance(step, nn.Module) and not isinstance(model, nn.Module)
    ):
        raise TypeError(
            "check_step takes the step first, a callable `step(model, *batch)`, then the model\n"
            'help: dct.check_step(train_step, model, x, y, device="cuda:0")'
        )
    _require_module(model, "check_step")
    target = parse_device(device)
    names = _bind_names(step, (model, *batch), {}, skip=1)

    def place(
        mode: LogicalDevices, real: torch.device
    ) -> tuple[tuple[Any, ...], dict[str, Any], list[str]]:
        described: list[str] = []

        def as_batch(name: str, tensor: torch.Tensor) -> torch.Tensor:
            copy = _copy(tensor, tensor.device)
            where = _normalize(tensor.device)
            mode.mark(copy, Info(where, name=name, role="batch"))
            described.append(
                f"{name} {where} {dtype_name(copy.dtype)} {shape_text(tuple(copy.shape))}"
            )
            return copy

        new_batch = tuple(
            _map_tensors(value, names.positional(i + 1), as_batch)
            for i, value in enumerate(batch)
        )
        return new_batch, {}, described

    def call(args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Any:
        return step(model, *args)

    step_name = getattr(step, "__name__", type(step).__name__)
    title = f"dry run of `{step_name}` with `{type(model).__name__}` on fake {target}"
    return _dry_run(
        model, target, place, call, title, phase="the step", inputs_label="batch"
    )


def inspect(model: nn.Module) -> Report:
    """Every parameter and buffer of `model` (path, kind, device, dtype, shape, bytes), and every
    tensor a device move leaves behind (plain tensor attributes, tensors or modules in plain
    lists and dicts), each with the line that assigned it; findings for what `.to()` will not
    fix by itself."""
    _require_module(model, "inspect")
    model_walk = walk(model)
    entries = model_walk.entries
    moved_devices = _device_counts(e for e in model_walk.unique() if e.moved)
    main = (
        max(moved_devices, key=lambda d: moved_devices[d][1]) if moved_devices else None
    )

    rows = [("path", "kind", "device", "dtype", "shape", "numel", "bytes")]
    for entry in entries:
        tensor = entry.tensor
        kind = (
            entry.kind
            if entry.tied_to is None
            else f"{entry.kind} (tied to {entry.tied_to})"
        )
        rows.append(
            (
                entry.path,
                kind,
                str(_normalize(tensor.device)),
                dtype_name(tensor.dtype),
                shape_text(tuple(tensor.shape)),
                f"{tensor.numel():,}",
                fmt_bytes(_nbytes(tensor)),
            )
        )
    per_device = _device_counts(model_walk.unique())
    device_rows = [("device", "tensors", "parameters", "bytes")]
    for device, (count, nbytes, parameters) in sorted(
        per_device.items(), key=lambda kv: -kv[1][1]
    ):
        device_rows.append(
            (str(device), f"{count:,}", f"{parameters:,}", fmt_bytes(nbytes))
        )

    findings: list[Finding] = []
    if len(moved_devices) > 1 and main is not None:
        findings.append(_mixed_devices(model_walk, main, moved_devices))
    findings += _left_behind_findings(
        model_walk, main, used_in_mismatch=set(), in_run=False
    )

    moved_params = [e for e in model_walk.unique() if e.kind == "parameter"]
    buffers = [e for e in model_walk.unique() if e.moved and e.kind != "parameter"]
    behind = [e for e in model_walk.unique() if not e.moved]
    elements = sum(e.tensor.numel() for e in moved_params)
    total = sum(_nbytes(e.tensor) for e in model_walk.unique())
    parts = [f"{plural(len(moved_params), 'parameter')} ({elements:,} elements)"]
    parts.append(plural(len(buffers), "buffer"))
    if behind:
        parts.append(f"{plural(len(behind), 'tensor')} `.to()` leaves behind")
    summary = [f"{', '.join(parts)}, {fmt_bytes(total)}"]
    table = (
        ["  " + line for line in _table(rows)]
        + ["per device:"]
        + ["  " + line for line in _table(device_rows)]
    )
    return Report(
        "inventory",
        f"`{type(model).__name__}` has {{counts}}",
        summary,
        "`model.to(device)` moves every parameter and buffer; the tensors it does not reach are plain "
        "attributes and what plain lists and dicts hold",
        findings,
        table=table,
        data={
            "model": type(model).__name__,
            "tensors": [
                {
                    "path": e.path,
                    "kind": e.kind,
                    "tied_to": e.tied_to,
                    "device": str(_normalize(e.tensor.device)),
                    "dtype": dtype_name(e.tensor.dtype),
                    "shape": list(e.tensor.shape),
                    "bytes": _nbytes(e.tensor),
                    "moved_by_to": e.moved,
                    "assigned_at": _site_json(e.assigned_at()) if not e.moved else None,
                }
                for e in entries
            ],
        },
    )


# -------------------------------------------------------------------------------------------
# The run


def _dry_run(
    model: nn.Module,
    target: torch.device,
    place: Callable[
        [LogicalDevices, torch.device],
        tuple[tuple[Any, ...], dict[str, Any], list[str]],
    ],
    call: Callable[[tuple[Any, ...], dict[str, Any]], Any],
    title: str,
    *,
    phase: str,
    inputs_label: str,
) -> Report:
    model_walk = walk(model)
    real = _real_device(model_walk)
    recorder = Recorder(target)
    mode = LogicalDevices(target, real, recorder)
    for path, module in model_walk.modules:
        mode.module_paths[id(module)] = path
    for entry in model_walk.entries:
        if entry.tied_to is not None:
            continue
        mode.param_paths[id(entry.tensor)] = entry.path
        device = target if entry.moved else _normalize(entry.tensor.device)
        mode.mark(
            entry.tensor, Info(device, name=entry.path, role=entry.kind, entry=entry)
        )
    args, kwargs, described = place(mode, real)

    optimizers: list[tuple[Any, dict[str, Any], list[dict[str, Any]]]] = []

    def on_optimizer_step(optimizer: Any) -> None:
        if any(optimizer is seen for seen, _, _ in optimizers):
            return
        optimizers.append(
            (
                optimizer,
                dict(vars(optimizer)),
                [dict(g) for g in optimizer.param_groups],
            )
        )
        optimizer.state = _copied_state(optimizer, mode)

    state = ModelState.capture(model_walk)
    try:
        with dry_run_context(mode, on_optimizer_step=on_optimizer_step):
            call(args, kwargs)
    except BaseException as error:
        if isinstance(error, Exception) and is_missing_driver(error):
            error.add_note(
                "devcheck: this happened during a dry run, which has no GPU: torch.cuda answers only "
                "is_available(), device_count(), current_device() and synchronize() for the target; "
                "other CUDA calls (memory statistics, streams, device properties) cannot run without a GPU"
            )
        raise
    finally:
        state.restore()
        for optimizer, attributes, groups in optimizers:
            current = vars(optimizer)
            current.clear()
            current.update(attributes)
            for group, saved in zip(optimizer.param_groups, groups):
                group.clear()
                group.update(saved)

    findings = _left_behind_findings(
        model_walk, target, used_in_mismatch=recorder.used_in_mismatch, in_run=True
    )
    findings += [
        _creation_finding(c, recorder, target, phase) for c in recorder.creations
    ]
    findings += [
        _mismatch_finding(m, target, inputs_label)
        for m in recorder.mismatches
        if m.follows is None
    ]
    findings += [_read_finding(r, target, phase) for r in recorder.reads]

    made_count, made_bytes = recorder.made.get(target, [0, 0])
    summary = [
        f"{inputs_label}: {', '.join(described) if described else 'none'}",
        f"{phase} made {plural(made_count, 'tensor')} on {target} ({fmt_bytes(made_bytes)} in all, not a peak)",
    ]
    data = {
        "model": type(model).__name__,
        "target": str(target),
        inputs_label: described,
        "made": {
            str(d): {"tensors": c, "bytes": b} for d, (c, b) in recorder.made.items()
        },
    }
    return Report("forward", title, summary, _RUN_HELP, findings, data=data)


def _copied_state(optimizer: Any, mode: LogicalDevices) -> Any:
    """A copy of an optimizer's state for the run: the copies keep the originals' devices (the
    CPU, for state made by steps taken before the model moved) and are named after their
    parameter."""
    copied: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
    with torch._C.DisableTorchFunction():
        for param, values in optimizer.state.items():
            path = mode.param_paths.get(id(param), "a parameter")
            entry: dict[str, Any] = {}
            for key, value in values.items():
                if isinstance(value, torch.Tensor):
                    copy = value.detach().clone()
                    original = mode.info(value)
                    device = (
                        original.device
                        if original is not None
                        else _normalize(value.device)
                    )
                    mode.mark(
                        copy,
                        Info(
                            device,
                            name=f'optimizer.state[{path}]["{key}"]',
                            role="optimizer state",
                        ),
                    )
                    entry[key] = copy
                else:
                    entry[key] = value
            copied[param] = entry
    return copied


def _real_device(model_walk: Walk) -> torch.device:
    """Where the run computes: the CPU, where the model must be.

    The dry run computes for real and relies on every tensor really being in one place, so that
    an op the target would refuse still runs and the run goes on to find the next problem.
    """
    elsewhere = sorted(
        {str(_normalize(e.tensor.device)) for e in model_walk.entries if e.moved}
        - {"cpu"}
    )
    if elsewhere:
        raise ValueError(
            f"the dry run computes on the CPU, and the model's parameters or buffers are on "
            f"{' and '.join(elsewhere)}\n"
            "help: dry-run the model as built or loaded on the CPU (`model.cpu()`, or "
            '`torch.load(..., map_location="cpu")`); `dct.inspect(model)` lists which tensor is where'
        )
    return CPU


def _copy(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The caller's tensor is never written: forward gets its own copy."""
    with torch._C.DisableTorchFunction():
        copy = tensor.detach().to(device, copy=True)
        if tensor.requires_grad and tensor.is_floating_point():
            copy.requires_grad_(True)
    return copy


def _map_tensors(
    value: Any, name: str, fn: Callable[[str, torch.Tensor], torch.Tensor]
) -> Any:
    """`value` with every tensor replaced by `fn(name, tensor)`, through lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        return fn(name, value)
    if isinstance(value, dict):
        return type(value)(
            {k: _map_tensors(v, f"{name}[{k!r}]", fn) for k, v in value.items()}
        )
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(
            *(_map_tensors(v, f"{name}.{f}", fn) for f, v in zip(value._fields, value))
        )
    if isinstance(value, (list, tuple)):
        return type(value)(
            _map_tensors(v, f"{name}[{i}]", fn) for i, v in enumerate(value)
        )
    return value


class _Names:
    def __init__(self, positional: list[str]) -> None:
        self._positional = positional

    def positional(self, index: int) -> str:
        if index < len(self._positional):
            return self._positional[index]
        return f"input {index + 1}"


def _bind_names(
    function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, skip: int
) -> _Names:
    """The name of each positional argument in `function`'s signature (`x`, `batch`, `args[1]`)."""
    try:
        signature = pyinspect.signature(function)
    except (TypeError, ValueError):
        return _Names([f"input {i + 1}" for i in range(len(args))])
    names: list[str] = []
    parameters = list(signature.parameters.values())
    for parameter in parameters:
        if parameter.kind in (
            parameter.POSITIONAL_ONLY,
            parameter.POSITIONAL_OR_KEYWORD,
        ):
            names.append(parameter.name)
        elif parameter.kind == parameter.VAR_POSITIONAL:
            start = len(names)
            names += [f"{parameter.name}[{i - start}]" for i in range(start, len(args))]
            break
    names += [f"input {i + 1}" for i in range(len(names), len(args))]
    return _Names(names)


def _require_module(model: Any, check: str) -> None:
    if not isinstance(model, nn.Module):
        call = {"check_step": "check_step(step, model, *batch)"}.get(
            check, f"{check}(model, ...)"
        )
        raise TypeError(
            f"{check} takes a torch.nn.Module, not {type(model).__name__}\n"
            f"help: pass the model object: dct.{call}"
        )


# -------------------------------------------------------------------------------------------
# Findings


def _left_behind_findings(
    model_walk: Walk,
    main: torch.device | None,
    *,
    used_in_mismatch: set[int],
    in_run: bool,
) -> list[Finding]:
    """`unmoved-attribute`: one finding per plain attribute, and one per plain container."""
    groups: dict[tuple[int, str], list[ModelTensor]] = {}
    for entry in model_walk.entries:
        if (
            entry.moved
            or entry.tied_to is not None
            or entry.owner is None
            or entry.attribute is None
        ):
            continue
        groups.setdefault((id(entry.owner), entry.attribute), []).append(entry)
    containers = {
        (id(owner), attribute): (path, kind, count)
        for path, owner, attribute, kind, count in model_walk.module_containers
    }
    findings = []
    for key, entries in groups.items():
        devices = sorted({str(_normalize(e.tensor.device)) for e in entries})
        where = " and ".join(devices)
        if main is not None and all(
            _normalize(e.tensor.device) == main for e in entries
        ):
            if in_run:
                continue  # already on the target: nothing to report
            severity = "warning"
            rest = f"stays on {where} when the model moves"
            plural_rest = f"stay on {where} when the model moves"
        else:
            used = any(id(e) in used_in_mismatch for e in entries)
            severity = "error" if used or not in_run else "warning"
            rest = (
                f"is on {where}, the rest of the model on {main}"
                if main is not None
                else f"is on {where}"
            )
            plural_rest = (
                f"are on {where}, the rest of the model on {main}"
                if main is not None
                else f"are on {where}"
            )
        first = entries[0]
        attribute = first.attribute or ""
        owner_path = (
            first.path.rsplit(".", 1)[0]
            if "." in first.path and first.kind == "plain attribute"
            else ""
        )
        if key in containers:
            path, kind, count = containers[key]
            message = (
                f"`{path}` is a plain {kind} of {plural(count, 'module')}: their {plural(len(entries), 'tensor')} "
                f"{plural_rest}, `.to()` does not move them and `.parameters()` does not list them"
            )
            help_text = (
                f"hold the modules in `nn.{'ModuleDict' if kind == 'dict' else 'ModuleList'}` so that `.to()`, "
                "`.parameters()` (the optimizer) and the state_dict see them"
            )
        elif first.kind == "plain attribute":
            message = f"plain tensor attribute `{first.path}` {rest}: `.to()` does not move it"
            help_text = _attribute_help(attribute)
        else:
            container_path = f"{owner_path + '.' if owner_path else ''}{attribute}"
            kind = first.kind.removeprefix("in a plain ")
            held = plural(len(entries), "tensor")
            verb = rest if len(entries) == 1 else plural_rest
            message = (
                f"`{container_path}` is a plain {kind} holding {held} that {verb}: "
                "`.to()` does not move what plain containers hold"
            )
            help_text = (
                "register each tensor as a buffer (`self.register_buffer(name, t)`), or hold trainable ones in "
                "`nn.ParameterList` / `nn.ParameterDict`, so that `.to()` moves them"
            )
        finding = Finding(
            "unmoved-attribute",
            severity,
            message,
            help=help_text,
            label="assigned here",
        )
        for entry in entries[:4]:
            tensor = entry.tensor
            finding.details.append(
                f"`{entry.path}` ({entry.kind}) {_normalize(tensor.device)} {dtype_name(tensor.dtype)} "
                f"{shape_text(tuple(tensor.shape))}"
            )
        if len(entries) > 4:
            finding.details.append(f"and {plural(len(entries) - 4, 'more tensor')}")
        if in_run and severity == "error":
            finding.details.append(f"the dry run used it with tensors on {main}")
        finding.site = first.assigned_at()
        findings.append(finding)
    return findings


def _attribute_help(attribute: str) -> str:
    return (
        f'make it a buffer: `self.register_buffer("{attribute}", tensor, persistent=False)` in `__init__` '
        f"(a later `self.{attribute} = t` keeps it a buffer); `model.to(device)` moves buffers, and "
        "`persistent=False` keeps it out of the state_dict"
    )


def _mixed_devices(
    model_walk: Walk, main: torch.device, counts: dict[torch.device, list[int]]
) -> Finding:
    total = sum(c[0] for c in counts.values())
    others = [(d, c) for d, c in counts.items() if d != main]
    message = (
        f"`{type(model_walk.modules[0][1]).__name__}` is on {len(counts)} devices: {counts[main][0]} of {total} tensors are on {main}, "
        + ", ".join(f"{c[0]} on {d}" for d, c in others)
    )
    finding = Finding(
        "mixed-devices",
        "error",
        message,
        help=f"call `model.to({str(main)!r})` once after building or loading the model; tensors left elsewhere "
        "were assigned to the model after its last move",
    )
    stragglers = [
        e
        for e in model_walk.unique()
        if e.moved and _normalize(e.tensor.device) != main
    ]
    for entry in stragglers[:8]:
        finding.details.append(
            f"`{entry.path}` ({entry.kind}) on {_normalize(entry.tensor.device)}"
        )
    if len(stragglers) > 8:
        finding.details.append(f"and {plural(len(stragglers) - 8, 'more tensor')}")
    return finding


def _creation_finding(
    creation: Creation, recorder: Recorder, target: torch.device, phase: str
) -> Finding:
    c = creation
    finding = Finding(
        "created-off-device",
        "error" if c.mismatch is not None else "note",
        f"`{c.op}` made a tensor on {c.device} during {phase}; the target is {target}",
        count=c.count,
        site=c.site,
        label=f"made on {c.device} here",
    )
    finding.details.append(f"{c.device} {dtype_name(c.dtype)} {shape_text(c.shape)}")
    if c.mismatch is not None:
        mismatch = recorder.mismatches[c.mismatch]
        root = (
            mismatch
            if mismatch.follows is None
            else recorder.mismatches[mismatch.follows]
        )
        finding.details.append(
            f"then used with tensors on {target} in `{root.op}` at {root.site}"
        )
        finding.help = _helper_help(target)
    elif c.moved_to_target is not None:
        finding.details.append(
            f"then copied to {target} at {c.moved_to_target}: every call pays for the copy"
        )
        finding.help = (
            "make it on the target directly (`device=x.device`) and the copy goes away"
        )
    else:
        finding.details.append(f"it never met a tensor on {target}")
        finding.help = (
            "nothing to fix if it is meant for the CPU (lengths for `pack_padded_sequence`, values for the host); "
            "otherwise make it with `device=x.device`"
        )
    return finding


def _helper_help(target: torch.device) -> str:
    return (
        "create it on an input's device so it follows the model everywhere: pass `device=x.device` "
        "(`torch.ones(..., device=x.device)`), or use `x.new_ones(..)` / `torch.ones_like(x)`; a constant can "
        f"be a buffer (`self.register_buffer(..)`), which `model.to({str(target)!r})` moves once"
    )


def _mismatch_finding(
    mismatch: Mismatch, target: torch.device, inputs_label: str
) -> Finding:
    m = mismatch
    finding = Finding(
        "device-mismatch",
        "error",
        f"device mismatch in `{m.op}`: {_operand_summary(m.operands)}",
        count=m.count,
        site=m.site,
        label=f"`{m.op}` here",
    )
    listed = _listed_operands(m.operands, target)
    for operand in listed:
        finding.details.append(_operand_line(operand))
    hidden = len(m.operands) - len(listed)
    if hidden:
        finding.details.append(f"and {plural(hidden, 'more operand')} on {target}")
    for operand in m.operands:
        info = operand.info
        if (
            info is not None
            and operand.device != target
            and info.copied_to is not None
            and info.copied_to[0] == target
        ):
            who = f"`{info.name}`" if info.name else f"the {operand.label}"
            finding.details.append(
                f"{who} was copied to {target} at {info.copied_to[1]}, but the copy is not what reached "
                f"this op: `.to()` returns a new tensor and leaves {who} where it was"
            )
    if m.module is not None:
        finding.details.append(f"inside {m.module}")
    if m.repeats:
        shown = ", ".join(str(site) for site in m.repeats[:4])
        more = f" and {len(m.repeats) - 4} more" if len(m.repeats) > 4 else ""
        finding.details.append(f"the same tensors mixed devices again at {shown}{more}")
    if m.echoes:
        first = m.operands[0].device
        finding.details.append(
            f"its result stayed on {first} and {plural(m.echoes, 'later op')} mixed devices again"
        )
    finding.help = _mismatch_help(m, target)
    return finding


def _operand_summary(operands: list[Operand]) -> str:
    if len(operands) <= 4:
        return ", ".join(f"{o.label} is on {o.device}" for o in operands)
    by_device: dict[torch.device, list[str]] = {}
    for operand in operands:
        by_device.setdefault(operand.device, []).append(operand.label)
    parts = []
    for device, labels in by_device.items():
        shown = (
            " and ".join(labels)
            if len(labels) <= 2
            else f"{labels[0]} and {len(labels) - 1} more"
        )
        parts.append(f"{shown} {'is' if len(labels) == 1 else 'are'} on {device}")
    return ", ".join(parts)


def _listed_operands(operands: list[Operand], target: torch.device) -> list[Operand]:
    """Every operand off the target, and at most two on it (an LSTM has a dozen)."""
    listed, on_target = [], 0
    for operand in operands:
        if operand.device != target:
            listed.append(operand)
        elif on_target < 2:
            listed.append(operand)
            on_target += 1
    return listed


def _operand_line(operand: Operand) -> str:
    info = operand.info
    text = operand.label
    if info is not None and info.name is not None:
        text += f" `{info.name}` ({_role_text(info)})"
    text += (
        f": {operand.device} {dtype_name(operand.dtype)} {shape_text(operand.shape)}"
    )
    if info is None:
        text += ", made before the dry run"
    elif info.made_by and info.made_at is not None and info.name is None:
        text += f", made by `{info.made_by}` at {info.made_at}"
    return text


_ROLE_TEXT = {
    "parameter": "a parameter",
    "buffer": "a buffer",
    "non-persistent buffer": "a non-persistent buffer",
    "plain attribute": "a plain attribute",
    "input": "an input",
    "batch": "from the batch",
    "optimizer state": "optimizer state",
    "gradient": "a gradient",
}


def _role_text(info: Info) -> str:
    role = info.role or "a tensor"
    text = _ROLE_TEXT.get(role, role if role.startswith(("in ", "a ")) else f"a {role}")
    return f"{text}, a view" if info.view else text


def _mismatch_help(mismatch: Mismatch, target: torch.device) -> str:
    fixes: list[str] = []
    seen: set[str] = set()
    model_tensors = [
        o
        for o in mismatch.operands
        if o.device != target
        and o.info is not None
        and o.info.entry is not None
        and o.info.entry.moved
    ]
    if model_tensors:
        names = _and_list([f"`{o.name}`" for o in model_tensors])
        devices = " and ".join(sorted({str(o.device) for o in model_tensors}))
        verb = "is a tensor" if len(model_tensors) == 1 else "are tensors"
        fixes.append(
            f"{names} {verb} of the model, on {devices}: move the model once, after building or loading it, "
            f"with `model.to({str(target)!r})` (it moves every parameter and buffer)"
        )
    for operand in mismatch.operands:
        if operand.device == target or operand in model_tensors:
            continue
        fix = _operand_fix(operand, target)
        if fix not in seen:
            seen.add(fix)
            fixes.append(fix)
    return "; ".join(fixes) if fixes else f"bring every operand to {target}"


def _operand_fix(operand: Operand, target: torch.device) -> str:
    info = operand.info
    if info is None:
        return (
            f"the {operand.label} was made before the dry run (a global, or a tensor held outside the model) on "
            f"{operand.device}: make it on {target} where it is made, or keep it in the model as a buffer "
            "(`self.register_buffer(..)`) so that `model.to(..)` moves it"
        )
    name = f"`{info.name}`" if info.name else f"the {operand.label}"
    short = (info.name or "x").split(".")[-1]
    entry = info.entry
    if entry is not None and not entry.moved:
        if entry.kind == "plain attribute":
            assigned = entry.assigned_at()
            where = f" (assigned at {assigned})" if assigned is not None else ""
            return (
                f"{name} is a plain tensor attribute{where}, which `model.to(..)` does not move: "
                + _attribute_help(entry.attribute or short)
            )
        return (
            f"{name} sits in a plain container (`{entry.attribute}`), which `model.to(..)` does not reach: use "
            "`nn.ModuleList` / `nn.ModuleDict` for modules, `register_buffer` for tensors"
        )
    if info.role == "input":
        return (
            f"move {name} to {target} where the batch is loaded, before calling the model (`{short} = "
            f"{short}.to(device)`: `.to()` returns the moved tensor and leaves `{short}` where it was)"
        )
    if info.role == "batch":
        return (
            f"move {name} to {target} in the step, right after the loader yields it (`{short} = "
            f"{short}.to(device)`: `.to()` returns the moved tensor and leaves `{short}` where it was)"
        )
    if info.role is not None and info.role.endswith("outside the model"):
        owner = info.role.split("`")[1]
        example = (
            "criterion = criterion.to(device)"
            if owner.endswith("Loss")
            else "module = module.to(device)"
        )
        return (
            f"{name} belongs to a `{owner}` that is not part of the model, so `model.to(device)` does not move "
            f"it: move that module as well (`{example}`), or make its tensors on the device"
        )
    if info.role == "optimizer state":
        return (
            f"the optimizer's state is on {operand.device}: a step taken before `model.to(device)` made it there; "
            "create the optimizer after moving the model, or reload its state after the move "
            "(`optimizer.load_state_dict(optimizer.state_dict())` puts each state tensor on its parameter's device)"
        )
    if info.made_at is not None:
        return (
            f"create the {operand.label} made at {info.made_at} on an input's device so it follows the model "
            + (
                "everywhere: pass `device=x.device`, or use `x.new_zeros(..)` / `torch.zeros_like(x)`; a constant can be "
                f"a buffer (`self.register_buffer(..)`), which `model.to({str(target)!r})` moves once"
            )
        )
    return f"bring {name} to {target}: a batch is moved once where it is loaded (`x = x.to(device)`)"


def _read_finding(read: HostRead, target: torch.device, phase: str) -> Finding:
    if phase == "forward":
        advice = (
            f"on {target} every host read waits for the device to finish; in forward, branch on shapes rather "
            "than values, and read values (a loss, a metric) outside forward, once per logging interval"
        )
    else:
        advice = (
            f"on {target} every host read waits for the device to finish; keep running totals on the device "
            "(`total += loss.detach()`) and read them once per logging interval, not every step"
        )
    who = read.tensor.split(":", 1)[0]
    return Finding(
        "host-read",
        "warning",
        f"`{read.op}` reads the values of {who} during {phase}",
        help=advice,
        details=[read.tensor.split(": ", 1)[1] if ": " in read.tensor else read.tensor],
        count=read.count,
        site=read.site,
        label="reads values here",
    )


# -------------------------------------------------------------------------------------------
# Small helpers


def _and_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _device_counts(entries: Iterator[ModelTensor]) -> dict[torch.device, list[int]]:
    """Per real device: [tensors, bytes, parameter elements]."""
    counts: dict[torch.device, list[int]] = {}
    for entry in entries:
        device = _normalize(entry.tensor.device)
        row = counts.setdefault(device, [0, 0, 0])
        row[0] += 1
        row[1] += _nbytes(entry.tensor)
        if entry.kind == "parameter":
            row[2] += entry.tensor.numel()
    return counts


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell; counts and sizes right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {
        i
        for i, header in enumerate(rows[0])
        if header in ("numel", "bytes", "tensors", "parameters")
    }
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _site_json(site: Any) -> dict[str, Any] | None:
    if site is None:
        return None
    return {"path": site.filename, "line": site.line, "column": site.column}
