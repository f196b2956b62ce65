"""The dry run: a real computation on the CPU, with a *logical* device carried by every tensor.

`check_forward` and `check_step` run the user's code for real, on the CPU and at the example's
shapes, under a `TorchFunctionMode` (`LogicalDevices`). The mode keeps, for every tensor it sees,
the device the tensor would be on in a GPU run (`Info.device`), and answers the user's code with
it: `x.device`, `x.is_cuda`, `x.get_device()` say `cuda:0` for a tensor that would be there.
Factories given `device="cuda:0"` make their tensor on the CPU and mark it `cuda:0`; `.to()`,
`.cuda()` and `.cpu()` change the mark (and copy, so that the moved tensor is a different object,
as it is on a GPU). Every other torch call has its tensor operands' marks compared: several
devices is a device mismatch, recorded with each operand's name and the user's line, and the
run goes on (the result keeps the first operand's device, as the Rust checker does), so one run
finds every problem.

Why this rather than `FakeTensorMode` or a tensor subclass placed on `cuda`: a tensor whose
metadata says `cuda` sends the autograd engine, cuDNN and the optimizer's fused paths to CUDA's
runtime, which does not exist on a machine without a GPU (`loss.backward()` fails with
"hasPrimaryContext expects a valid device index", `nn.LSTM` at its driver calls). Here every
tensor is an ordinary CPU tensor, so backward, `nn.LSTM` and any optimizer run as they do on the
CPU; only what the user's code can observe of devices is answered for the target.

A function mode sees calls at the level the user wrote them (`F.linear`, `x * mask`,
`torch.ones`), which is where names and lines make sense, but not the autograd engine's internal
ops: gradients get their device where the user can see them (`p.grad` is on `p`'s device;
`torch.autograd.grad` returns each gradient on its input's device; inside a backward call,
tensors the engine hands to hooks are taken to be on the loss's device).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect as pyinspect
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils.weak import WeakIdKeyDictionary

from ._model import ModelTensor
from ._source import Site, caller_is_user, user_site

__all__ = [
    "Info",
    "LogicalDevices",
    "Recorder",
    "dry_run_context",
    "parse_device",
]

CPU = torch.device("cpu")


def parse_device(spec: Any) -> torch.device:
    """`"cpu" | "cuda" | "cuda:N" | "mps"` (or a `torch.device`) with its index filled in."""
    try:
        device = spec if isinstance(spec, torch.device) else torch.device(spec)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"unknown device {spec!r}: valid forms are 'cpu', 'cuda', 'cuda:N' and 'mps'\n"
            'help: pass the device the model runs on, e.g. device="cuda:0"'
        ) from None
    if device.type not in ("cpu", "cuda", "mps", "meta"):
        raise ValueError(
            f"unknown device {spec!r}: valid forms are 'cpu', 'cuda', 'cuda:N' and 'mps'\n"
            'help: pass the device the model runs on, e.g. device="cuda:0"'
        )
    return _normalize(device)


def _normalize(device: torch.device) -> torch.device:
    if device.type in ("cpu", "meta"):
        return torch.device(device.type)
    return torch.device(device.type, 0 if device.index is None else device.index)


def _device_arg(value: Any) -> torch.device | None:
    """A user's device argument (`"cuda"`, `torch.device`, an index), normalized; None if absent."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.device("cuda", value)
    return _normalize(value if isinstance(value, torch.device) else torch.device(value))


# -------------------------------------------------------------------------------------------
# What the run knows of a tensor


class Info:
    """The logical device of one tensor, and what the report says about it."""

    __slots__ = (
        "copied_to",
        "creations",
        "device",
        "entry",
        "follows",
        "made_at",
        "made_by",
        "moved_at",
        "name",
        "role",
        "view",
    )

    def __init__(
        self,
        device: torch.device,
        *,
        name: str | None = None,
        role: str | None = None,
        view: bool = False,
        made_by: str | None = None,
        made_at: Site | None = None,
        creations: frozenset[int] = frozenset(),
        follows: int | None = None,
        entry: ModelTensor | None = None,
        moved_at: Site | None = None,
    ) -> None:
        self.device = device
        self.name = name
        # "parameter", "buffer", "non-persistent buffer", "plain attribute", "input", "batch",
        # "optimizer state", "gradient", or a plain container's kind; None for a tensor the run made.
        self.role = role
        self.view = view
        self.made_by = made_by
        self.made_at = made_at
        # Tensors made off the target during the run that this one comes from (their indices).
        self.creations = creations
        # The device mismatch whose result this tensor comes from (its echoes are counted on it).
        self.follows = follows
        self.entry = entry
        self.moved_at = moved_at
        # The first copy of this tensor to another device: (device, where), for the report to
        # point at a `.to()` whose result was dropped.
        self.copied_to: tuple[torch.device, Site] | None = None

    def derived(
        self, device: torch.device, *, view: bool, made_by: str, made_at: Site | None
    ) -> Info:
        """A view or moved copy: same name and role, new device."""
        return Info(
            device,
            name=self.name,
            role=self.role,
            view=self.view or view,
            made_by=self.made_by if view else made_by,
            made_at=self.made_at if view else made_at,
            creations=self.creations,
            follows=self.follows,
            entry=self.entry,
            moved_at=self.moved_at,
        )


@dataclass
class Operand:
    """One tensor given to an op, as the report describes it."""

    label: str  # the op's name for it: input, weight, mask, lhs, hx[0]
    device: torch.device
    dtype: torch.dtype
    shape: tuple[int, ...]
    info: Info | None

    @property
    def name(self) -> str | None:
        return None if self.info is None else self.info.name

    @property
    def role(self) -> str | None:
        return None if self.info is None else self.info.role


@dataclass
class Creation:
    op: str
    site: Site
    device: torch.device
    dtype: torch.dtype
    shape: tuple[int, ...]
    count: int = 1
    mismatch: int | None = (
        None  # the first mismatch it (or a tensor made from it) took part in
    )
    moved_to_target: Site | None = None


@dataclass
class Mismatch:
    op: str
    site: Site | None
    operands: list[Operand]
    module: str | None
    count: int = 1
    follows: int | None = None
    echoes: int = 0
    # Other lines where the same culprit met tensors on the target.
    repeats: list[Site] = field(default_factory=list)


@dataclass
class HostRead:
    op: str
    site: Site
    device: torch.device
    tensor: str
    count: int = 1


@dataclass
class Recorder:
    """What the dry run saw."""

    target: torch.device
    creations: list[Creation] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    reads: list[HostRead] = field(default_factory=list)
    # Per logical device: tensors made and their bytes (views are not counted).
    made: dict[torch.device, list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0])
    )
    # Left-behind model tensors (by id of their entry) that took part in a mismatch.
    used_in_mismatch: set[int] = field(default_factory=set)
    _creation_index: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _mismatch_index: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _read_index: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _root_culprits: list[tuple[int, set[Any]]] = field(default_factory=list)


# -------------------------------------------------------------------------------------------
# The mode


class LogicalDevices(TorchFunctionMode):
    """Carries a logical device on every tensor and checks every call; see the module docstring."""

    def __init__(
        self, target: torch.device, real: torch.device, recorder: Recorder
    ) -> None:
        super().__init__()
        self.target = target
        self.real = real
        self.recorder = recorder
        self.infos: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.module_paths: dict[int, str] = {}
        self.param_paths: dict[int, str] = {}
        # Inside a backward call: the loss's device, taken for tensors the engine made.
        self.backward_device: torch.device | None = None

    # -- what the run knows --------------------------------------------------------------

    def mark(self, tensor: torch.Tensor, info: Info) -> None:
        self.infos[tensor] = info

    def info(self, tensor: torch.Tensor) -> Info | None:
        return self.infos.get(tensor)

    def device_of(self, tensor: torch.Tensor) -> torch.device:
        info = self.infos.get(tensor)
        if info is not None:
            return info.device
        if self.backward_device is not None:
            return self.backward_device
        return _normalize(tensor.device)

    def _real_for(self, logical: torch.device) -> torch.device:
        return logical if logical.type == "meta" else self.real

    # -- the handler ---------------------------------------------------------------------

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        handler = _HANDLERS.get(_func_key(func))
        if handler is None:
            handler = _classify(func)
        return handler(self, func, args, kwargs)

    # Getters the user's code reads devices through.

    def _get_device(self, func: Any, args: tuple, kwargs: dict) -> Any:
        return self.device_of(args[0])

    def _get_device_index(self, func: Any, args: tuple, kwargs: dict) -> int:
        device = self.device_of(args[0])
        return -1 if device.type == "cpu" else (device.index or 0)

    def _get_grad(self, func: Any, args: tuple, kwargs: dict) -> Any:
        grad = func(*args, **kwargs)
        if isinstance(grad, torch.Tensor) and grad not in self.infos:
            owner = self.infos.get(args[0])
            name = None if owner is None or owner.name is None else f"{owner.name}.grad"
            self.mark(
                grad,
                Info(
                    self.device_of(args[0]),
                    name=name,
                    role="gradient" if name else None,
                ),
            )
        return grad

    def _get_alias(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """`.data`, `.T`, `.mT`, `.real`, ...: a tensor sharing the source's storage."""
        result = func(*args, **kwargs)
        if (
            isinstance(result, torch.Tensor)
            and result is not args[0]
            and result not in self.infos
        ):
            source = self.infos.get(args[0])
            device = self.device_of(args[0])
            if source is not None:
                self.mark(
                    result, source.derived(device, view=True, made_by="", made_at=None)
                )
            else:
                self.mark(result, Info(device))
        return result

    def _set_data(self, func: Any, args: tuple, kwargs: dict) -> Any:
        # `param.data = moved` is how `Module._apply` moves a parameter in place.
        tensor, value = args[0], args[1]
        func(*args, **kwargs)
        if isinstance(value, torch.Tensor):
            info = self.infos.get(tensor)
            device = self.device_of(value)
            if info is not None:
                info.device = device
            else:
                self.mark(tensor, Info(device))
        return None

    def _plain(self, func: Any, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    # Moves.

    def _to(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tensor, rest = args[0], list(args[1:])
        kwargs = dict(kwargs)
        device: torch.device | None = None
        other = kwargs.pop("other", None)
        if rest and isinstance(rest[0], torch.Tensor):
            other = rest.pop(0)
        if isinstance(other, torch.Tensor):
            device = self.device_of(other)
            kwargs.setdefault("dtype", other.dtype)
        else:
            # The device argument, in whichever place it was given, becomes where the run computes.
            if rest and (
                isinstance(rest[0], (str, torch.device)) or _is_index(rest[0])
            ):
                device = _device_arg(rest[0])
                rest[0] = self._real_for(device) if device is not None else None
            elif kwargs.get("device") is not None:
                device = _device_arg(kwargs["device"])
                kwargs["device"] = (
                    self._real_for(device) if device is not None else None
                )
        source = self.device_of(tensor)
        target = source if device is None else device
        result = func(tensor, *rest, **kwargs)
        return self._moved(tensor, result, source, target, ".to()", target_spec=device)

    def _cuda(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tensor = args[0]
        spec = args[1] if len(args) > 1 else kwargs.get("device")
        index = _device_arg(spec)
        target = torch.device("cuda", 0 if index is None else (index.index or 0))
        return self._moved(tensor, tensor, self.device_of(tensor), target, ".cuda()")

    def _cpu(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tensor = args[0]
        return self._moved(tensor, tensor, self.device_of(tensor), CPU, ".cpu()")

    def _pin_memory(self, func: Any, args: tuple, kwargs: dict) -> Any:
        # Page-locked memory needs the CUDA driver; the copy stands in for it (host memory,
        # where the tensor already is), so `is_pinned()` answers False.
        tensor = args[0]
        copy = tensor.clone()
        info = self.infos.get(tensor)
        device = self.device_of(tensor)
        self.mark(
            copy,
            info.derived(
                device, view=False, made_by=".pin_memory()", made_at=user_site()
            )
            if info
            else Info(device),
        )
        return copy

    def _type_as(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tensor, other = args[0], args[1]
        result = tensor.to(dtype=other.dtype)
        return self._moved(
            tensor, result, self.device_of(tensor), self.device_of(other), ".type_as()"
        )

    def _moved(
        self,
        tensor: torch.Tensor,
        result: torch.Tensor,
        source: torch.device,
        target: torch.device,
        op: str,
        target_spec: torch.device | None = None,
    ) -> torch.Tensor:
        if source == target:
            if result is not tensor and result not in self.infos:
                info = self.infos.get(tensor)
                self.mark(
                    result,
                    info.derived(target, view=False, made_by=op, made_at=info.made_at)
                    if info
                    else Info(target),
                )
            return result
        # A move to another device is a new tensor on a GPU; a copy keeps it so here (the
        # original keeps its device, and writes to one do not reach the other).
        if result is tensor:
            result = tensor.clone()
        site = user_site()
        info = self.infos.get(tensor)
        if (
            target.type == "cpu"
            and source != CPU
            and site is not None
            and caller_is_user()
        ):
            name = op if target_spec is None else ".to('cpu')"
            self._host_read(name, tensor, site, source)
        if info is not None and target == self.target and site is not None:
            for index in info.creations:
                creation = self.recorder.creations[index]
                if creation.moved_to_target is None:
                    creation.moved_to_target = site
        if info is not None and info.copied_to is None and site is not None:
            info.copied_to = (target, site)
        moved = (
            info.derived(target, view=False, made_by=op, made_at=site)
            if info
            else Info(target, made_by=op, made_at=site)
        )
        moved.moved_at = site
        if info is not None and target == self.target:
            moved.creations = frozenset()
        self.mark(result, moved)
        self._count_made(result, target)
        return result

    # Reads of values.

    def _numpy(self, func: Any, args: tuple, kwargs: dict) -> Any:
        device = self.device_of(args[0])
        if device.type != "cpu":
            # What PyTorch raises on the GPU: NumPy reads host memory only.
            raise TypeError(
                f"can't convert {device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                "to host memory first. (devcheck dry run: on the target this tensor is not on the CPU)"
            )
        return func(*args, **kwargs)

    def _host_read(
        self, op: str, tensor: torch.Tensor, site: Site, device: torch.device
    ) -> None:
        info = self.infos.get(tensor)
        who = f"`{info.name}`" if info is not None and info.name else "a tensor"
        key = (site.key, op)
        index = self.recorder._read_index.get(key)
        if index is not None:
            self.recorder.reads[index].count += 1
            return
        self.recorder._read_index[key] = len(self.recorder.reads)
        self.recorder.reads.append(
            HostRead(op, site, device, f"{who}: {_describe(device, tensor)}")
        )

    def _iter(self, func: Any, args: tuple, kwargs: dict) -> Any:
        # `for row in t` hands out tensors torch makes inside `__iter__`, out of the mode's sight.
        tensor = args[0]
        rows = list(func(*args, **kwargs))
        device = self.device_of(tensor)
        info = self.infos.get(tensor)
        for row in rows:
            if isinstance(row, torch.Tensor) and row not in self.infos:
                self.mark(
                    row,
                    info.derived(device, view=True, made_by="", made_at=None)
                    if info
                    else Info(device),
                )
        return iter(rows)

    # Autograd.

    def _backward(self, func: Any, args: tuple, kwargs: dict) -> Any:
        roots = [t for t in _tensors_in((args, kwargs))]
        previous = self.backward_device
        self.backward_device = self.device_of(roots[0]) if roots else self.target
        try:
            return func(*args, **kwargs)
        finally:
            self.backward_device = previous

    def _autograd_grad(self, func: Any, args: tuple, kwargs: dict) -> Any:
        outputs = args[0] if args else kwargs.get("outputs")
        inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
        roots = list(_tensors_in(outputs))
        previous = self.backward_device
        self.backward_device = self.device_of(roots[0]) if roots else self.target
        try:
            grads = func(*args, **kwargs)
        finally:
            self.backward_device = previous
        inputs_list = (
            [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or [])
        )
        for grad, source in zip(grads or (), inputs_list):
            if isinstance(grad, torch.Tensor) and isinstance(source, torch.Tensor):
                self.mark(grad, Info(self.device_of(source)))
        return grads

    # Everything else.

    def _op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        spec = _spec(func)
        site = user_site()
        if (
            site is not None
            and site.operator is not None
            and spec.operator_form
            and caller_is_user()
        ):
            # `h * mask` reaches the mode as `Tensor.mul`: name it as the user wrote it.
            spec = _operator_spec(spec, site.operator)
        operands = list(_named_operands(spec, args, kwargs))
        requested: torch.device | None = None
        if "device" in kwargs:
            requested = _device_arg(kwargs["device"])
            kwargs = dict(kwargs)
            if requested is not None:
                kwargs["device"] = self._real_for(requested)
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False
        infos = [(label, tensor, self.infos.get(tensor)) for label, tensor in operands]
        checked = infos
        if spec.display == "[]=" and not any(label == "idx" for label, _, _ in infos):
            # `x[a:b] = t` with plain slices is a copy, which crosses devices.
            checked = [entry for entry in infos if entry[0] != "value"]
        mismatch: int | None = None
        if spec.check and checked and requested is None:
            mismatch = self._check(spec, checked, site)
        result = func(*args, **kwargs)
        results = list(_tensors_in(result))
        if not results:
            return result
        # Where the result is: the requested device, the source's for `*_like`/`new_*`, else the
        # operands' (a 0-dim CPU tensor joins an op on any device, as in PyTorch).
        if requested is not None:
            device = requested
        elif spec.inherits and operands:
            device = self.device_of(operands[0][1])
        else:
            device = self._common_device(infos, operands)
        follows: int | None = mismatch
        creations: set[int] = set()
        for _, tensor, info in infos:
            if info is not None:
                if follows is None and info.follows is not None:
                    follows = info.follows
                creations.update(info.creations)
        if device == self.target:
            creations.clear()
        made_here = not operands or requested is not None or spec.factory
        if (
            made_here
            and device != self.target
            and device.type != "meta"
            and site is not None
            and caller_is_user()
        ):
            creations.add(self._creation(spec.display, site, device, result))
        if requested == self.target and site is not None:
            for _, _, info in infos:
                for index in info.creations if info is not None else ():
                    creation = self.recorder.creations[index]
                    creation.moved_to_target = creation.moved_to_target or site
        if (
            requested is not None
            and result is results[0]
            and device != self.device_of(results[0])
            and (any(results[0] is t for _, t in operands) or results[0] in self.infos)
        ):
            # `torch.as_tensor(t, device=...)` handed back `t` itself (it is on the CPU, where
            # the run computes); on the target it would be a new tensor, so it is one here.
            result = results[0] = results[0].clone()
        source_ids = {id(t) for _, t in operands}
        view_source = None
        if len(infos) >= 1 and infos[0][2] is not None and infos[0][2].name is not None:
            view_source = infos[0]
        for tensor in results:
            if id(tensor) in source_ids or tensor in self.infos:
                continue
            if spec.result_devices is not None:
                index = _index_in(result, tensor)
                forced = spec.result_devices.get(index) if index is not None else None
                if forced is not None:
                    self.mark(tensor, Info(torch.device(forced)))
                    continue
            if view_source is not None and _shares_storage(tensor, view_source[1]):
                self.mark(
                    tensor,
                    view_source[2].derived(device, view=True, made_by="", made_at=None),
                )
                continue
            self.mark(
                tensor,
                Info(
                    device,
                    made_by=spec.display,
                    made_at=site,
                    creations=frozenset(creations),
                    follows=follows,
                ),
            )
            if tensor._base is None:
                self._count_made(tensor, device)
        return result

    def _foreach(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """`torch._foreach_*` (what optimizers use): lists of tensors, paired index by index."""
        spec = _spec(func)
        names = ("self", "other", "other2", "other3")
        lists = [
            (names[i] if i < len(names) else f"argument {i + 1}", a)
            for i, a in enumerate(args)
        ]
        lists += list(kwargs.items())
        tensor_lists = [
            (n, a)
            for n, a in lists
            if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)
        ]
        scalars = [(n, a) for n, a in lists if isinstance(a, torch.Tensor)]
        site = user_site()
        length = len(tensor_lists[0][1]) if tensor_lists else 0
        for i in range(length):
            operands = [
                (f"{n}[{i}]", a[i]) for n, a in tensor_lists if i < len(a)
            ] + scalars
            infos = [(label, t, self.infos.get(t)) for label, t in operands]
            self._check(spec, infos, site)
        result = func(*args, **kwargs)
        # Out-of-place foreach ops return one new tensor per index, on its first list's device.
        if isinstance(result, (list, tuple)) and tensor_lists:
            first = tensor_lists[0][1]
            for i, tensor in enumerate(result):
                if (
                    isinstance(tensor, torch.Tensor)
                    and tensor not in self.infos
                    and i < len(first)
                ):
                    self.mark(
                        tensor,
                        Info(
                            self.device_of(first[i]), made_by=spec.display, made_at=site
                        ),
                    )
        return result

    # -- checks and records ----------------------------------------------------------------

    def _common_device(
        self, infos: list[tuple[str, torch.Tensor, Info | None]], operands: list
    ) -> torch.device:
        if not operands:
            return _normalize(torch.get_default_device())
        scalar_device = None
        for _, tensor, info in infos:
            device = info.device if info is not None else self.device_of(tensor)
            if device.type == "cpu" and tensor.dim() == 0:
                scalar_device = scalar_device or device
                continue
            return device
        return scalar_device or CPU

    def _check(
        self,
        spec: _Spec,
        infos: list[tuple[str, torch.Tensor, Info | None]],
        site: Site | None,
    ) -> int | None:
        devices: list[torch.device] = []
        described: list[tuple[str, torch.Tensor, Info | None, torch.device]] = []
        first_device: torch.device | None = None
        for label, tensor, info in infos:
            device = info.device if info is not None else self.device_of(tensor)
            if label in spec.cpu_ok and device.type == "cpu":
                continue
            if label in spec.index_like:
                # Indices may be on the CPU or on the indexed tensor's device.
                if device.type == "cpu" or device == first_device:
                    continue
            elif device.type == "cpu" and tensor.dim() == 0:
                # A 0-dim CPU tensor joins an op on any device (PyTorch copies it as a scalar).
                described.append((label, tensor, info, device))
                continue
            if first_device is None:
                first_device = device
            devices.append(device)
            described.append((label, tensor, info, device))
        if len(set(devices)) <= 1:
            return None
        return self._mismatch(spec, described, site)

    def _mismatch(
        self,
        spec: _Spec,
        described: list[tuple[str, torch.Tensor, Info | None, torch.device]],
        site: Site | None,
    ) -> int:
        recorder = self.recorder
        operands = [
            Operand(
                label,
                device,
                tensor.dtype,
                tuple(tensor.shape),
                info or self._outside_owner(tensor, device),
            )
            for label, tensor, info, device in described
        ]
        # Index by site, op and operand labels without their list positions, so that an optimizer's
        # foreach op failing at every parameter is one finding counted N times.
        site_key = None if site is None else site.key
        key = (
            site_key,
            spec.display,
            tuple((_unindexed(o.label), o.device) for o in operands),
        )
        known = recorder._mismatch_index.get(key)
        if known is not None:
            recorder.mismatches[known].count += 1
            root = recorder.mismatches[known].follows
            return known if root is None else root
        # An echo of an earlier mismatch: every operand off the target comes from that mismatch's
        # result (it stayed on the wrong device). One that does not is a problem of its own.
        off_target = [o for o in operands if o.device != self.target] or operands
        roots = {o.info.follows if o.info is not None else None for o in off_target}
        follows = roots.pop() if len(roots) == 1 else None
        repeat_of = None
        culprits = _culprits(operands, self.target)
        if follows is None and culprits:
            # The same culprit mixed in again elsewhere (a plain attribute used by two ops, an
            # optimizer's state in each of its foreach ops): one finding, with the other lines.
            for earlier, seen in recorder._root_culprits:
                if culprits <= seen:
                    repeat_of = earlier
                    break
        index = len(recorder.mismatches)
        recorder._mismatch_index[key] = index
        root = follows if follows is not None else repeat_of
        recorder.mismatches.append(
            Mismatch(spec.display, site, operands, self._module_here(), follows=root)
        )
        if follows is not None:
            recorder.mismatches[follows].echoes += 1
        elif repeat_of is not None:
            first = recorder.mismatches[repeat_of]
            if site is not None and site not in first.repeats and site != first.site:
                first.repeats.append(site)
        else:
            recorder._root_culprits.append((index, culprits))
        for operand in operands:
            info = operand.info
            if info is None or operand.device == self.target:
                continue
            for creation in info.creations:
                if recorder.creations[creation].mismatch is None:
                    recorder.creations[creation].mismatch = index
            if info.entry is not None and not info.entry.moved:
                recorder.used_in_mismatch.add(id(info.entry))
        return index if root is None else root

    def _creation(self, op: str, site: Site, device: torch.device, result: Any) -> int:
        key = (site.key, op)
        index = self.recorder._creation_index.get(key)
        if index is not None:
            self.recorder.creations[index].count += 1
            return index
        tensor = next(iter(_tensors_in(result)), None)
        dtype = tensor.dtype if tensor is not None else torch.float32
        shape = tuple(tensor.shape) if tensor is not None else ()
        index = len(self.recorder.creations)
        self.recorder._creation_index[key] = index
        self.recorder.creations.append(Creation(op, site, device, dtype, shape))
        return index

    def _count_made(self, tensor: torch.Tensor, device: torch.device) -> None:
        made = self.recorder.made[device]
        made[0] += 1
        made[1] += tensor.numel() * tensor.element_size()

    def _outside_owner(self, tensor: torch.Tensor, device: torch.device) -> Info | None:
        """A tensor the run never marked, held by a module outside the model whose code is running
        (a loss module's class weights): named after that module."""
        frame: Any = sys._getframe(1)
        while frame is not None:
            owner = (
                frame.f_locals.get("self")
                if "self" in frame.f_code.co_varnames
                else None
            )
            if (
                isinstance(owner, torch.nn.Module)
                and id(owner) not in self.module_paths
            ):
                for kind, table in (
                    ("buffer", owner._buffers),
                    ("parameter", owner._parameters),
                ):
                    for name, held in table.items():
                        if held is tensor:
                            return Info(
                                device,
                                name=name,
                                role=f"a {kind} of a `{type(owner).__name__}` outside the model",
                            )
            frame = frame.f_back
        return None

    def _module_here(self) -> str | None:
        """The model's submodule whose code is running: the innermost frame whose `self` is
        one (None at the model's own level, where the snippet says all there is)."""
        frame: Any = sys._getframe(1)
        while frame is not None:
            owner = (
                frame.f_locals.get("self")
                if "self" in frame.f_code.co_varnames
                else None
            )
            if owner is not None and id(owner) in self.module_paths:
                path = self.module_paths[id(owner)]
                return f"`{path}` ({type(owner).__name__})" if path else None
            frame = frame.f_back
        return None


# -------------------------------------------------------------------------------------------
# Per-function facts: names of operands, which may be on the CPU, where results go


@dataclass(frozen=True, eq=False)
class _Spec:
    display: str
    names: tuple[str, ...] = ()
    check: bool = True
    inherits: bool = (
        False  # `*_like` and `Tensor.new_*`: the result follows the first tensor
    )
    factory: bool = (
        False  # makes a tensor from data or nothing (torch.tensor, from_numpy)
    )
    cpu_ok: frozenset[str] = frozenset()
    index_like: frozenset[str] = frozenset()
    result_devices: dict[int, str] | None = None
    # A method a Python operator calls (`mul` for `*`): named by the operator when it was one.
    operator_form: bool = False


_DUNDERS = {
    "add": "+",
    "radd": "+",
    "iadd": "+=",
    "sub": "-",
    "rsub": "-",
    "isub": "-=",
    "mul": "*",
    "rmul": "*",
    "imul": "*=",
    "truediv": "/",
    "rtruediv": "/",
    "itruediv": "/=",
    "div": "/",
    "rdiv": "/",
    "idiv": "/=",
    "floordiv": "//",
    "rfloordiv": "//",
    "ifloordiv": "//=",
    "mod": "%",
    "rmod": "%",
    "imod": "%=",
    "pow": "**",
    "rpow": "**",
    "ipow": "**=",
    "matmul": "@",
    "rmatmul": "@",
    "imatmul": "@=",
    "and": "&",
    "rand": "&",
    "iand": "&=",
    "or": "|",
    "ror": "|",
    "ior": "|=",
    "xor": "^",
    "rxor": "^",
    "ixor": "^=",
    "lshift": "<<",
    "rlshift": "<<",
    "rshift": ">>",
    "rrshift": ">>",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "getitem": "[]",
    "setitem": "[]=",
}

# Operand names for calls whose overload torch's signature table gets wrong.
_RNN_UNPACKED = (
    "input",
    "hx",
    "params",
    "has_biases",
    "num_layers",
    "dropout",
    "train",
    "bidirectional",
    "batch_first",
)
_RNN_PACKED = (
    "data",
    "batch_sizes",
    "hx",
    "params",
    "has_biases",
    "num_layers",
    "dropout",
    "train",
    "bidirectional",
)

_CPU_OK: dict[str, frozenset[str]] = {
    "torch._pack_padded_sequence": frozenset({"lengths"}),
    "torch._pad_packed_sequence": frozenset({"batch_sizes"}),
    "torch.lstm": frozenset({"batch_sizes"}),
    "torch.gru": frozenset({"batch_sizes"}),
    "torch.rnn_tanh": frozenset({"batch_sizes"}),
    "torch.rnn_relu": frozenset({"batch_sizes"}),
    "F.ctc_loss": frozenset({"targets", "input_lengths", "target_lengths"}),
    "torch.ctc_loss": frozenset({"targets", "input_lengths", "target_lengths"}),
}
# Operand names of calls torch's signature table does not list.
_NAMES: dict[str, tuple[str, ...]] = {
    "torch._pack_padded_sequence": ("input", "lengths", "batch_first"),
    "torch._pad_packed_sequence": (
        "data",
        "batch_sizes",
        "batch_first",
        "padding_value",
        "total_length",
    ),
}
# Results that are on the CPU whatever the inputs: (index in the result tuple) -> device.
_RESULT_DEVICES: dict[str, dict[int, str]] = {
    "torch._pack_padded_sequence": {1: "cpu"},
    "torch._pad_packed_sequence": {1: "cpu"},
}
_NO_CHECK = frozenset(
    {
        ".copy_()",
        ".set_()",
        ".backward()",
        "torch.autograd.backward",
        "torch.autograd.grad",
        ".__repr__()",
        ".__format__()",
        ".__deepcopy__()",
        ".__reduce_ex__()",
        ".__setstate__()",
        ".new_tensor()",
        "torch.tensor",
        "torch.as_tensor",
        "torch.asarray",
        ".register_hook()",
    }
)
_FACTORIES = frozenset(
    {
        "torch.tensor",
        "torch.as_tensor",
        "torch.asarray",
        "torch.from_numpy",
        "torch.frombuffer",
    }
)


def _display(func: Any) -> str:
    name = (
        resolve_name(func)
        or getattr(func, "__qualname__", None)
        or getattr(func, "__name__", repr(func))
    )
    for prefix, short in (
        ("torch.nn.functional.", "F."),
        ("torch._C._nn.", "F."),
        ("torch._C._VariableFunctions.", "torch."),
        ("_VariableFunctionsClass.", "torch."),
        ("torch._VF.", "torch."),
        ("torch.functional.", "torch."),
    ):
        if name.startswith(prefix):
            return short + name[len(prefix) :]
    if name.startswith("torch.Tensor."):
        method = name[len("torch.Tensor.") :]
        if (
            method.startswith("__")
            and method.endswith("__")
            and method[2:-2] in _DUNDERS
        ):
            return _DUNDERS[method[2:-2]]
        return f".{method}()"
    return name


@functools.cache
def _overrides() -> dict[Any, Any]:
    return torch.overrides.get_testing_overrides()


_spec_cache: dict[Any, _Spec] = {}


def _spec(func: Any) -> _Spec:
    key = _func_key(func)
    spec = _spec_cache.get(key)
    if spec is not None:
        return spec
    display = _display(func)
    names: tuple[str, ...] = ()
    signature_of = _overrides().get(func)
    if signature_of is not None:
        try:
            names = tuple(pyinspect.signature(signature_of).parameters)
        except (TypeError, ValueError):
            names = ()
    method = display.startswith(".")
    if names and names[0] in ("self", "input") and method:
        names = ("input", *names[1:])
    if display in _DUNDERS.values() and display not in ("[]", "[]="):
        names = ("lhs", "rhs")
    names = _NAMES.get(display, names)
    if display.startswith("torch.") and display.split(".")[-1] in (
        "lstm",
        "gru",
        "rnn_tanh",
        "rnn_relu",
    ):
        names = _RNN_UNPACKED  # replaced per call for the packed overload, see _named_operands
    short = display.rsplit(".", 1)[-1].strip("()")
    spec = _Spec(
        display=display,
        names=names,
        check=display not in _NO_CHECK,
        inherits=short.endswith("_like") or (method and short.startswith("new_")),
        factory=display in _FACTORIES,
        cpu_ok=_CPU_OK.get(display, frozenset()),
        index_like=frozenset({"idx", "indices"})
        if display in ("[]", "[]=", ".index_put_()", ".index_put()")
        else frozenset(),
        result_devices=_RESULT_DEVICES.get(display),
        operator_form=method and short.rstrip("_") in _OPERATOR_METHODS,
    )
    _spec_cache[key] = spec
    return spec


_OPERATOR_METHODS = frozenset(
    {
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "true_divide",
        "floor_divide",
        "remainder",
        "fmod",
        "pow",
        "matmul",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_left_shift",
        "bitwise_right_shift",
        "__lshift__",
        "__rshift__",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    }
)


@functools.lru_cache(maxsize=256)
def _operator_spec(spec: _Spec, operator: str) -> _Spec:
    return dataclasses.replace(
        spec, display=operator, names=("lhs", "rhs"), operator_form=False
    )


def _named_operands(
    spec: _Spec, args: tuple, kwargs: dict
) -> Iterator[tuple[str, torch.Tensor]]:
    names = spec.names
    if names is _RNN_UNPACKED and len(args) > 1 and isinstance(args[1], torch.Tensor):
        names = _RNN_PACKED
    if spec.display in ("[]", "[]="):
        names = ("input", "idx", "value")
    for i, value in enumerate(args):
        label = names[i] if i < len(names) else f"argument {i + 1}"
        yield from _label_tensors(label, value)
    for key, value in kwargs.items():
        if key == "out":
            continue
        yield from _label_tensors(key, value)


def _label_tensors(label: str, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield label, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if isinstance(item, torch.Tensor):
                yield (label if label in ("idx", "indices") else f"{label}[{i}]"), item
            elif isinstance(item, (list, tuple)):
                yield from _label_tensors(f"{label}[{i}]", item)


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


def _index_in(result: Any, tensor: torch.Tensor) -> int | None:
    if isinstance(result, (list, tuple)):
        for i, item in enumerate(result):
            if item is tensor:
                return i
    return None


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return (
            a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            and a.device.type != "meta"
        )
    except RuntimeError:
        return False


def _culprits(operands: list[Operand], target: torch.device) -> set[Any]:
    """What makes a mismatch the same problem as another: the same model tensor left behind, the
    same tensor made off the target, the same batch tensor, or for an optimizer's state and
    gradients (one tensor per parameter) the same kind of tensor."""
    out: set[Any] = set()
    for operand in operands:
        info = operand.info
        if info is None or operand.device == target:
            continue
        if info.role in ("optimizer state", "gradient"):
            out.add((info.role, operand.device))
        elif info.entry is not None:
            out.add(("model", id(info.entry)))
        elif info.creations:
            out.update(("made", c) for c in info.creations)
        elif info.name is not None:
            out.add(("named", info.name, info.role))
        else:
            out.add(("tensor", id(info)))
    return out


def _unindexed(label: str) -> str:
    return re.sub(r"\[\d+\]", "[]", label)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(device: torch.device, tensor: torch.Tensor) -> str:
    return f"{device} {dtype_name(tensor.dtype)} {shape_text(tuple(tensor.shape))}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _reader(op: str) -> Callable[..., Any]:
    """A handler for a call that reads a tensor's values on the host (a sync on a GPU)."""

    def handler(mode: LogicalDevices, func: Any, args: tuple, kwargs: dict) -> Any:
        tensor = args[0]
        device = mode.device_of(tensor)
        if device.type not in ("cpu", "meta") and caller_is_user():
            site = user_site()
            if site is not None:
                mode._host_read(op, tensor, site, device)
        return func(*args, **kwargs)

    return handler


def _is_type(device_type: str) -> Callable[..., bool]:
    def getter(mode: LogicalDevices, func: Any, args: tuple, kwargs: dict) -> bool:
        return mode.device_of(args[0]).type == device_type

    return getter


def _func_key(func: Any) -> Any:
    # Getters and setters arrive as a fresh method-wrapper on each access; key them by their
    # descriptor and direction.
    if type(func).__name__ == "method-wrapper":
        return (func.__self__, func.__name__)
    return func


def _getter(name: str, direction: str = "__get__") -> Any:
    return _func_key(getattr(getattr(torch.Tensor, name), direction))


_HANDLERS: dict[Any, Callable[..., Any]] = {}


def _register_handlers() -> None:
    mode = LogicalDevices
    table: dict[Any, Callable[..., Any]] = {
        _getter("device"): mode._get_device,
        _getter("grad"): mode._get_grad,
        _getter("data"): mode._get_alias,
        _getter("data", "__set__"): mode._set_data,
        _getter("grad", "__set__"): mode._plain,
        torch.Tensor.get_device: mode._get_device_index,
        torch.Tensor.to: mode._to,
        torch.Tensor.cuda: mode._cuda,
        torch.Tensor.cpu: mode._cpu,
        torch.Tensor.type_as: mode._type_as,
        torch.Tensor.pin_memory: mode._pin_memory,
        torch.Tensor.item: _reader(".item()"),
        torch.Tensor.tolist: _reader(".tolist()"),
        torch.Tensor.__bool__: _reader("bool()"),
        torch.Tensor.__float__: _reader("float()"),
        torch.Tensor.__int__: _reader("int()"),
        torch.Tensor.__index__: _reader("use as an index"),
        torch.Tensor.__complex__: _reader("complex()"),
        torch.Tensor.__format__: _reader("format()"),
        torch.Tensor.__repr__: _reader("repr()"),
        torch.Tensor.numpy: mode._numpy,
        torch.Tensor.__array__: mode._numpy,
        torch.Tensor.__iter__: mode._iter,
        torch.Tensor.backward: mode._backward,
        torch.autograd.backward: mode._backward,
        torch.autograd.grad: mode._autograd_grad,
    }
    for name, device_type in (
        ("is_cuda", "cuda"),
        ("is_cpu", "cpu"),
        ("is_mps", "mps"),
    ):
        table[_getter(name)] = _is_type(device_type)
    _HANDLERS.update(table)


def _classify(func: Any) -> Callable[..., Any]:
    key = _func_key(func)
    if isinstance(key, tuple):
        name = getattr(key[0], "__name__", "")
        if key[1] == "__get__":
            handler = (
                LogicalDevices._get_alias
                if name in _ALIAS_GETTERS
                else LogicalDevices._plain
            )
        else:
            handler = LogicalDevices._plain
    else:
        display = _display(func)
        if display.startswith(("torch._foreach_", "torch._fused_")):
            handler = LogicalDevices._foreach
        else:
            handler = LogicalDevices._op
    _HANDLERS[key] = handler
    return handler


_ALIAS_GETTERS = frozenset({"T", "mT", "H", "mH", "real", "imag", "_base"})

_register_handlers()


# -------------------------------------------------------------------------------------------
# Around the run: what is switched on and put back


@contextlib.contextmanager
def dry_run_context(
    mode: LogicalDevices, *, on_optimizer_step: Callable[[Any], None]
) -> Iterator[None]:
    """Everything a dry run switches on, switched off again whatever happens.

    - The mode itself.
    - cuDNN off (`torch.backends.cudnn.flags`): with tensors that say `cuda`, `nn.LSTM` would
      otherwise take cuDNN's path and call the driver.
    - Asked by the user's code (not by torch's own), `torch.cuda.is_available()` answers True,
      `torch.cuda.device_count()` the target's index + 1, `torch.cuda.current_device()` 0, and
      `torch.cuda.synchronize()` does nothing, when the target is a CUDA device: code choosing
      its device the usual way (`"cuda" if torch.cuda.is_available() else "cpu"`) chooses as it
      would on a GPU machine. These four are patched on `torch.cuda` and put back in a
      `finally`: no extension point answers them.
    - A global optimizer step pre-hook (`register_optimizer_step_pre_hook`), so that an
      optimizer stepped during the run works on a copy of its state.
    """
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    patches: list[tuple[Any, str, Any]] = []
    if mode.target.type == "cuda":
        index = mode.target.index or 0
        patches = [
            (
                torch.cuda,
                "is_available",
                _for_the_user(torch.cuda.is_available, lambda: True),
            ),
            (
                torch.cuda,
                "device_count",
                _for_the_user(torch.cuda.device_count, lambda: index + 1),
            ),
            (
                torch.cuda,
                "current_device",
                _for_the_user(torch.cuda.current_device, lambda: 0),
            ),
            (
                torch.cuda,
                "synchronize",
                _for_the_user(torch.cuda.synchronize, lambda device=None: None),
            ),
        ]
    elif mode.target.type == "mps":
        patches = [
            (
                torch.backends.mps,
                "is_available",
                _for_the_user(torch.backends.mps.is_available, lambda: True),
            )
        ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]

    def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        on_optimizer_step(optimizer)

    handle = None
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        handle = register_optimizer_step_pre_hook(pre_hook)
        with torch.backends.cudnn.flags(enabled=False), mode:
            yield
    finally:
        if handle is not None:
            handle.remove()
        for owner, name, value in saved:
            setattr(owner, name, value)


def _for_the_user(
    real: Callable[..., Any], answer: Callable[..., Any]
) -> Callable[..., Any]:
    """`answer` when the user's code asks, the real function when torch's own code does.

    Torch consults the same functions to choose its internal paths (an optimizer checks for
    CUDA graph capture when an accelerator is available, which needs the driver); those must
    keep seeing the machine as it is.
    """

    @functools.wraps(real)
    def patched(*args: Any, **kwargs: Any) -> Any:
        return answer(*args, **kwargs) if caller_is_user() else real(*args, **kwargs)

    return patched


def is_missing_driver(error: BaseException) -> bool:
    text = str(error)
    return any(
        needle in text
        for needle in (
            "NVIDIA driver",
            "no CUDA GPUs",
            "Torch not compiled with CUDA",
            "hasPrimaryContext",
            "CUDA driver",
        )
    )
