"""`syncs()`: a ledger of the host syncs of a real GPU run, each at the user's line, counted.

Built on `torch.cuda.set_sync_debug_mode("warn")`: with it, every synchronizing CUDA operation
(`.item()`, `.cpu()`, `.tolist()`, `bool(t)`, `nonzero`, a boolean mask index, ...) raises a
warning inside the call that synchronizes. The ledger catches those warnings, and only those,
at the moment they are raised, walks the stack to the user's line, and counts per line; every
other warning goes on to where it would have gone. The previous sync debug mode and warning
filters are restored on exit.
"""

from __future__ import annotations

import linecache
import warnings
from dataclasses import dataclass
from typing import Any, Self

import torch

from ._source import Site, display_path, user_site

__all__ = ["SyncLedger", "SyncSite", "syncs"]

# The text of torch's sync-debug warning (c10/cuda/CUDAFunctions).
SYNC_WARNING = "called a synchronizing CUDA operation"


def syncs() -> SyncLedger:
    """A context manager recording each host sync of the CUDA work run inside it:

    ```python
    with dct.syncs() as ledger:
        train_one_epoch(model, loader)
    print(ledger)          # call site, count, code
    ```

    Needs a CUDA GPU: where `torch.cuda.is_available()` is False it raises `RuntimeError`
    (a dry run with `check_forward`/`check_step` reports host reads without one).
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "devcheck.torch.syncs() records the host syncs of a real run on a GPU, and "
            "torch.cuda.is_available() is False on this machine\n"
            "help: run it where a CUDA GPU is available; without one, dct.check_forward and "
            "dct.check_step report the host reads (.item(), .cpu(), if t:) of a dry run on a fake cuda:0"
        )
    return SyncLedger(use_cuda=True)


@dataclass
class SyncSite:
    site: Site
    count: int

    @property
    def code(self) -> str:
        return linecache.getline(self.site.filename, self.site.line).strip()


class SyncLedger:
    """The syncs seen inside a `with dct.syncs()` block, per user line, in order of first sight."""

    def __init__(self, *, use_cuda: bool) -> None:
        self._use_cuda = use_cuda
        self._sites: dict[tuple[str, int, int], SyncSite] = {}
        self._catch: warnings.catch_warnings | None = None
        self._previous_mode: int | None = None
        self._forward: Any = None

    @property
    def entries(self) -> list[SyncSite]:
        return list(self._sites.values())

    @property
    def total(self) -> int:
        return sum(s.count for s in self._sites.values())

    def __enter__(self) -> Self:
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        # "always": torch's default filter shows a warning once per place, the ledger counts each.
        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}.*")
        self._forward = warnings.showwarning
        warnings.showwarning = self._show
        if self._use_cuda:
            self._previous_mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._use_cuda and self._previous_mode is not None:
                torch.cuda.set_sync_debug_mode(self._previous_mode)
        finally:
            if self._catch is not None:
                self._catch.__exit__(None, None, None)
                self._catch = None

    def _show(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if SYNC_WARNING in str(message):
            self.record(user_site())
            return
        self._forward(message, category, filename, lineno, file, line)

    def record(self, site: Site | None) -> None:
        if site is None:
            return
        known = self._sites.get(site.key)
        if known is None:
            self._sites[site.key] = SyncSite(site, 1)
        else:
            known.count += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "sites": [
                {
                    "path": display_path(s.site.filename),
                    "line": s.site.line,
                    "column": s.site.column,
                    "count": s.count,
                }
                for s in self.entries
            ],
        }

    def __str__(self) -> str:
        lines = [
            f"host syncs: {self.total} at {len(self._sites)} line{'' if len(self._sites) == 1 else 's'}"
        ]
        if not self._sites:
            return lines[0]
        rows = [("call site", "count", "code")] + [
            (str(s.site), str(s.count), s.code) for s in self.entries
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(2)]
        for site, count, code in rows:
            lines.append(
                f"  {site.ljust(widths[0])}  {count.rjust(widths[1])}  {code}".rstrip()
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<devcheck sync ledger: {self.total} syncs>"
