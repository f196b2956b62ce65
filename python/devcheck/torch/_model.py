"""What a model holds, what `model.to(device)` moves of it, and how to put it back as it was.

`walk(model)` finds every parameter and buffer under its dotted path, and every tensor a device
move leaves behind: plain tensor attributes (`self.pe = pe` instead of `register_buffer`), tensors
in plain lists, tuples and dicts, and modules kept in plain containers (`self.heads = [Head()]`
instead of `nn.ModuleList`), whose parameters `.to()` and `.parameters()` never see.

`ModelState` saves what a dry run could change and puts it back afterwards (see `capture`).
"""

from __future__ import annotations

import ast
import functools
import linecache
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ._source import Site, absolute_path

__all__ = ["ModelState", "ModelTensor", "Walk", "assignment_site", "walk"]

# Containers are searched this deep for tensors and modules (`self.cache = {"k": [t]}` is 2).
_CONTAINER_DEPTH = 4


@dataclass(eq=False)
class ModelTensor:
    """A tensor the model holds, under the path a user would write to reach it."""

    path: str
    tensor: torch.Tensor
    # "parameter", "buffer", "non-persistent buffer", "plain attribute", or for a tensor a plain
    # container holds: "in a plain list" (tuple, dict), or "parameter in a plain list" when a
    # module inside the container registered it.
    kind: str
    # Does `model.to(device)` move it?
    moved: bool
    tied_to: str | None = None
    # For a tensor `.to()` leaves behind: the module holding the attribute, and the attribute.
    owner: nn.Module | None = None
    attribute: str | None = None

    @property
    def left_behind(self) -> bool:
        return not self.moved

    def assigned_at(self) -> Site | None:
        if self.owner is None or self.attribute is None:
            return None
        return assignment_site(type(self.owner), self.attribute)


@dataclass
class Walk:
    entries: list[ModelTensor] = field(default_factory=list)
    # Every module reached (registered, or inside a plain container), once each.
    modules: list[tuple[str, nn.Module]] = field(default_factory=list)
    # Plain containers of modules: (path, owner, attribute, container type name, module count).
    module_containers: list[tuple[str, nn.Module, str, str, int]] = field(
        default_factory=list
    )

    def unique(self) -> Iterator[ModelTensor]:
        """Entries without the second paths of tied tensors."""
        return (e for e in self.entries if e.tied_to is None)

    def by_id(self) -> dict[int, ModelTensor]:
        out: dict[int, ModelTensor] = {}
        for entry in self.entries:
            out.setdefault(id(entry.tensor), entry)
        return out


def walk(model: nn.Module) -> Walk:
    """Every tensor `model` holds and every module it reaches; see the module docstring."""
    result = Walk()
    registered_tensors: set[int] = set()
    registered_modules: set[int] = set()
    tree = list(model.named_modules(remove_duplicate=False))
    for _, module in tree:
        registered_modules.add(id(module))
        for tensor in (*module._parameters.values(), *module._buffers.values()):
            if tensor is not None:
                registered_tensors.add(id(tensor))
    first_path: dict[int, str] = {}
    _registered(tree, "", first_path, result, moved=True, container=None)
    seen_modules: set[int] = set()
    for prefix, module in tree:
        if id(module) in seen_modules:
            continue
        seen_modules.add(id(module))
        result.modules.append((prefix, module))
        _plain_attributes(
            module,
            prefix,
            first_path,
            registered_tensors,
            registered_modules,
            seen_modules,
            result,
        )
    return result


def _registered(
    tree: list[tuple[str, nn.Module]],
    base: str,
    first_path: dict[int, str],
    result: Walk,
    *,
    moved: bool,
    container: str | None,
) -> None:
    for prefix, module in tree:
        dot = f"{base}{prefix}." if prefix else base
        for name, param in module._parameters.items():
            if param is None:
                continue
            kind = (
                "parameter"
                if container is None
                else f"parameter in a plain {container}"
            )
            _add(result, first_path, ModelTensor(f"{dot}{name}", param, kind, moved))
        for name, buffer in module._buffers.items():
            if buffer is None:
                continue
            persistent = name not in module._non_persistent_buffers_set
            kind = "buffer" if persistent else "non-persistent buffer"
            if container is not None:
                kind = f"{kind} in a plain {container}"
            _add(result, first_path, ModelTensor(f"{dot}{name}", buffer, kind, moved))


def _add(result: Walk, first_path: dict[int, str], entry: ModelTensor) -> None:
    first = first_path.get(id(entry.tensor))
    if first is None:
        first_path[id(entry.tensor)] = entry.path
    else:
        entry.tied_to = first
    result.entries.append(entry)


def _plain_attributes(
    module: nn.Module,
    prefix: str,
    first_path: dict[int, str],
    registered_tensors: set[int],
    registered_modules: set[int],
    seen_modules: set[int],
    result: Walk,
) -> None:
    dot = f"{prefix}." if prefix else ""
    for attribute, value in vars(module).items():
        if attribute in _MODULE_INTERNALS:
            continue
        if isinstance(value, torch.Tensor):
            if id(value) not in registered_tensors:
                entry = ModelTensor(
                    f"{dot}{attribute}",
                    value,
                    "plain attribute",
                    False,
                    owner=module,
                    attribute=attribute,
                )
                _add(result, first_path, entry)
            continue
        if not isinstance(value, (list, tuple, dict)):
            continue
        found_modules: list[tuple[str, nn.Module]] = []
        for path, item, container in _container_items(
            value, f"{dot}{attribute}", type_name(value), 0
        ):
            if isinstance(item, torch.Tensor):
                if id(item) not in registered_tensors:
                    entry = ModelTensor(
                        path,
                        item,
                        f"in a plain {container}",
                        False,
                        owner=module,
                        attribute=attribute,
                    )
                    _add(result, first_path, entry)
            elif id(item) not in registered_modules and id(item) not in seen_modules:
                found_modules.append((path, item))
        if found_modules:
            result.module_containers.append(
                (
                    f"{dot}{attribute}",
                    module,
                    attribute,
                    type_name(value),
                    len(found_modules),
                )
            )
        for path, inner in found_modules:
            _unregistered_module(
                inner,
                path,
                type_name(value),
                module,
                attribute,
                first_path,
                seen_modules,
                result,
            )


def _unregistered_module(
    module: nn.Module,
    path: str,
    container: str,
    owner: nn.Module,
    attribute: str,
    first_path: dict[int, str],
    seen_modules: set[int],
    result: Walk,
) -> None:
    """A module in a plain container: nothing in it is moved, and its tensors are named under the
    container's path; the owner's attribute is what the user fixes."""
    tree = list(module.named_modules(remove_duplicate=False))
    start = len(result.entries)
    _registered(tree, f"{path}.", first_path, result, moved=False, container=container)
    for entry in result.entries[start:]:
        entry.owner, entry.attribute = owner, attribute
    for prefix, inner in tree:
        if id(inner) in seen_modules:
            continue
        seen_modules.add(id(inner))
        inner_path = f"{path}.{prefix}" if prefix else path
        result.modules.append((inner_path, inner))
        for name, value in vars(inner).items():
            if name not in _MODULE_INTERNALS and isinstance(value, torch.Tensor):
                entry = ModelTensor(
                    f"{inner_path}.{name}",
                    value,
                    f"in a plain {container}",
                    False,
                    owner=owner,
                    attribute=attribute,
                )
                _add(result, first_path, entry)


def _container_items(
    value: Any, path: str, container: str, depth: int
) -> Iterator[tuple[str, Any, str]]:
    """(path, item, container kind) for each tensor and module inside a plain container."""
    if depth >= _CONTAINER_DEPTH:
        return
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        item_path = f"{path}[{key!r}]" if isinstance(value, dict) else f"{path}[{key}]"
        if isinstance(item, (torch.Tensor, nn.Module)):
            yield item_path, item, container
        elif isinstance(item, (list, tuple, dict)):
            yield from _container_items(item, item_path, container, depth + 1)


def type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, tuple):
        return "tuple"
    return "list"


# Attributes every `nn.Module` has: torch's own bookkeeping, never the user's tensors.
_MODULE_INTERNALS = frozenset(vars(nn.Module()).keys())


# -------------------------------------------------------------------------------------------
# Where an attribute was assigned


def assignment_site(cls: type, attribute: str) -> Site | None:
    """The line of `cls` (or a base class) that assigns `self.<attribute>`.

    Assignments of `None` are passed over when there are others. An attribute forward assigns (a
    cache, a hidden state) is placed at forward's last assignment, which is what holds it after a
    run; any other at its first assignment in the class. Assignments made outside the class
    (`model.pe = ...`) cannot be found this way: then `None`.
    """
    candidates: list[tuple[bool, Site]] = []
    for klass in cls.__mro__:
        if (
            klass is nn.Module
            or klass is object
            or klass.__module__.startswith("torch.")
        ):
            continue
        candidates.extend(_class_assignments(klass, attribute))
        if candidates:
            break
    assigned = [site for is_none, site in candidates if not is_none]
    in_forward = [site for site in assigned if site.function == "forward"]
    if in_forward:
        # A state forward keeps (a cache, a hidden state): the value there after a run is the
        # one forward assigned last.
        return in_forward[-1]
    if assigned:
        return assigned[0]
    return candidates[0][1] if candidates else None


def _class_assignments(klass: type, attribute: str) -> list[tuple[bool, Site]]:
    found: list[tuple[bool, Site]] = []
    for value in vars(klass).values():
        function = (
            value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        )
        code = getattr(function, "__code__", None)
        if not isinstance(code, types.CodeType):
            continue
        node = _function_node(code.co_filename, code.co_firstlineno, code.co_name)
        if node is None or not node.args.args:
            continue
        this = node.args.args[0].arg
        for target, value_node in _assignments(node):
            if _is_attribute_of(target, this, attribute):
                site = Site(
                    filename=absolute_path(code.co_filename),
                    line=target.lineno,
                    column=target.col_offset + 1,
                    end_line=target.end_lineno or target.lineno,
                    end_column=(target.end_col_offset or target.col_offset) + 1,
                    function=code.co_name,
                )
                is_none = (
                    isinstance(value_node, ast.Constant) and value_node.value is None
                )
                found.append((is_none, site))
    found.sort(key=lambda pair: (pair[1].filename, pair[1].line, pair[1].column))
    return found


def _assignments(function: ast.AST) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for leaf in _unpack(target):
                    yield leaf, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            yield node.target, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
        ):
            # setattr(self, "name", value): the call stands in for the target.
            target = ast.Attribute(
                value=node.args[0], attr=str(node.args[1].value), ctx=ast.Store()
            )
            ast.copy_location(target, node)
            target.end_lineno, target.end_col_offset = (
                node.end_lineno,
                node.end_col_offset,
            )
            yield target, node.args[2]


def _unpack(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _unpack(element)
    else:
        yield target


def _is_attribute_of(target: ast.expr, name: str, attribute: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attribute
        and isinstance(target.value, ast.Name)
        and target.value.id == name
    )


def _function_node(
    filename: str, first_line: int, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = _parsed(filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name == name
        ):
            starts = {node.lineno, *(d.lineno for d in node.decorator_list)}
            if first_line in starts:
                return node
    return None


@functools.lru_cache(maxsize=256)
def _parsed(filename: str) -> ast.Module | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError):
        return None


# -------------------------------------------------------------------------------------------
# Saving and restoring what a dry run could change


class ModelState:
    """Everything of a model a dry run could change, saved so that `restore` puts it back.

    `capture` gives every tensor the model holds (parameters, buffers, plain attributes,
    tensors in plain containers) a private copy of its data for the run (`t.data = clone`), so
    that in-place writes during the run (BatchNorm's running statistics, an optimizer's update, a
    `+=` on a counter) land in the copy: the caller's storage is never written, and `restore`
    hands every tensor its own storage back. Gradients get the same treatment. Each module's
    attribute dictionary and the contents of its mutable containers (registered tensors, hooks,
    plain lists and dicts) are copied, so that attributes forward assigns, hooks it registers
    and tensors it appends are undone, and `training` flags come back. The CPU random number
    generator's state is saved and restored, so a dry run does not change later random draws.
    """

    def __init__(self, model_walk: Walk) -> None:
        self._walk = model_walk
        self._modules: list[tuple[nn.Module, dict[str, Any], dict[str, Any]]] = []
        self._tensors: list[
            tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool]
        ] = []
        self._rng = torch.get_rng_state()

    @classmethod
    def capture(cls, model_walk: Walk) -> ModelState:
        state = cls(model_walk)
        for _, module in model_walk.modules:
            attributes = dict(vars(module))
            contents = {
                k: _copy_container(v)
                for k, v in attributes.items()
                if _is_mutable_container(v)
            }
            state._modules.append((module, attributes, contents))
        seen: set[int] = set()
        with torch.no_grad():
            for entry in model_walk.entries:
                tensor = entry.tensor
                if id(tensor) in seen:
                    continue
                seen.add(id(tensor))
                grad = tensor.grad if tensor.is_leaf else None
                state._tensors.append((tensor, tensor.data, grad, tensor.requires_grad))
                tensor.data = tensor.data.clone()
                if grad is not None:
                    tensor.grad = grad.clone()
        return state

    def restore(self) -> None:
        with torch.no_grad():
            for tensor, data, grad, requires_grad in self._tensors:
                tensor.data = data
                if tensor.is_leaf:
                    tensor.grad = grad
                    if tensor.requires_grad != requires_grad:
                        tensor.requires_grad_(requires_grad)
        for module, attributes, contents in self._modules:
            current = vars(module)
            for key in [k for k in current if k not in attributes]:
                del current[key]
            for key, value in attributes.items():
                if current.get(key, _MISSING) is not value:
                    current[key] = value
            for key, saved in contents.items():
                _refill_container(attributes[key], saved)
        torch.set_rng_state(self._rng)


_MISSING = object()


def _is_mutable_container(value: Any) -> bool:
    return isinstance(value, (dict, list, set))


def _copy_container(value: Any) -> Any:
    if isinstance(value, dict):
        return list(value.items())
    return list(value)


def _refill_container(container: Any, saved: Any) -> None:
    if isinstance(container, dict):
        container.clear()
        container.update(saved)
    elif isinstance(container, list):
        container[:] = saved
    else:
        container.clear()
        container.update(saved)
