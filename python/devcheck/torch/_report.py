"""Findings and the one report every check renders through.

The rendering follows the Rust checker's reports (a title with its summary, then each finding
with its source line underlined and a help line), without colour and at a fixed width, so that a
failing `assert_clean` reads the same in a terminal, a CI log and a test's expected string.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._source import Site, display_path, snippet_lines

__all__ = ["Finding", "Report", "Severity", "assert_clean", "fmt_bytes", "plural"]

Severity = Literal["error", "warning", "note"]

WIDTH = 100


@dataclass
class Finding:
    """One problem a check found, located at a line of the user's code."""

    code: str
    severity: Severity
    message: str
    help: str = ""
    details: list[str] = field(default_factory=list)
    count: int = 1
    site: Site | None = None
    label: str = ""

    @property
    def filename(self) -> str | None:
        """The absolute path of the file the finding points at (None when it has no place)."""
        return None if self.site is None else self.site.filename

    @property
    def line(self) -> int | None:
        return None if self.site is None else self.site.line

    @property
    def column(self) -> int | None:
        return None if self.site is None else self.site.column

    def one_line(self) -> str:
        """`error[device-mismatch] message (3 times) at file:line:col`."""
        out = f"{self.severity}[{self.code}] {self.message}"
        if self.count > 1:
            out += f" ({self.count} times)"
        if self.site is not None:
            out += f" at {self.site}"
        return out

    def to_json(self) -> dict[str, Any]:
        site = self.site
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "count": self.count,
            "path": None if site is None else display_path(site.filename),
            "line": None if site is None else site.line,
            "column": None if site is None else site.column,
            "end_line": None if site is None else site.end_line,
            "end_column": None if site is None else site.end_column,
            "details": list(self.details),
            "help": self.help,
        }

    def render(self, width: int = WIDTH) -> str:
        return "\n".join(_render_finding(self, width))

    def __str__(self) -> str:
        return self.one_line()


class Report:
    """What a check found: a title, summary lines, the findings, and (for `inspect`) a table.

    `str(report)` is the full rendered report; `report.findings` the findings; `report.ok` is
    true when there is no error and no warning (notes only inform).
    """

    def __init__(
        self,
        kind: str,
        title: str,
        summary: Sequence[str],
        help: str,
        findings: Sequence[Finding],
        *,
        table: Sequence[str] = (),
        data: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self._title = title
        self.summary = list(summary)
        self.help = help
        self.findings: list[Finding] = list(findings)
        self.table = list(table)
        self.data: dict[str, Any] = dict(data or {})

    @property
    def title(self) -> str:
        """The title with the count of findings (`{counts}` in it says where; else at the end)."""
        counts = count_by_severity(self.findings)
        if "{counts}" in self._title:
            return self._title.replace("{counts}", counts)
        return f"{self._title}: {counts}"

    @property
    def ok(self) -> bool:
        """No errors and no warnings."""
        return not any(f.severity != "note" for f in self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def render(self, width: int = WIDTH) -> str:
        """The full report without colour at `width` columns (what tests compare)."""
        out = [f"devcheck::check::{self.kind}", ""]
        out += _wrap(self.title, "  × ", "  │ ", width)
        for line in self.summary:
            out += _wrap(line, "  │   ", "  │ ", width)
        if self.help:
            out += _wrap(self.help, "  help: ", "        ", width)
        for line in self.table:
            out.append(line)
        for finding in self.findings:
            out.append("")
            out += _render_finding(finding, width)
        return "\n".join(out) + "\n"

    def one_line_summary(self) -> str:
        """The title, the summary and one line per finding."""
        lines = [self.title, *(f"  {s}" for s in self.summary)]
        lines += [f"  {f.one_line()}" for f in self.findings]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.kind,
            "title": self.title,
            "summary": list(self.summary),
            "ok": self.ok,
            **self.data,
            "findings": [f.to_json() for f in self.findings],
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"<devcheck report: {self.title}>"


def assert_clean(report: Report) -> None:
    """Raises `AssertionError` with the rendered report unless it has no errors and no warnings."""
    if not isinstance(report, Report):
        raise TypeError(
            f"assert_clean takes a devcheck report, not {type(report).__name__}\n"
            "help: pass what check_forward, check_step or inspect returned"
        )
    if not report.ok:
        raise AssertionError("\n" + report.render())


def count_by_severity(findings: Sequence[Finding]) -> str:
    """`2 errors, 1 warning`, or `no problems`."""
    parts = []
    for severity, one, many in (
        ("error", "error", "errors"),
        ("warning", "warning", "warnings"),
        ("note", "note", "notes"),
    ):
        n = sum(1 for f in findings if f.severity == severity)
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts) if parts else "no problems"


def fmt_bytes(n: int) -> str:
    """`0 B`, `1023 B`, `1.5 KiB`, `474.7 MiB`."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def plural(n: int, word: str) -> str:
    """`1 tensor`, `1,024 tensors`."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# -------------------------------------------------------------------------------------------
# Rendering

_HEADERS = {
    "error": ("Error", "×"),
    "warning": ("Warning", "⚠"),
    "note": ("Advice", "☞"),
}


def _render_finding(finding: Finding, width: int) -> list[str]:
    header, mark = _HEADERS[finding.severity]
    out = [f"{header}: devcheck::check::{finding.code.replace('-', '_')}", ""]
    message = finding.message + (
        f" ({finding.count} times)" if finding.count > 1 else ""
    )
    out += _wrap(message, f"  {mark} ", "  │ ", width)
    snippet = _snippet(finding)
    details = list(finding.details)
    if snippet is None and finding.site is not None:
        details.insert(0, f"at {finding.site}")
    for line in details:
        out += _wrap(line, "  │   ", "  │ ", width)
    if snippet is not None:
        out += snippet
    if finding.help:
        out += _wrap(finding.help, "  help: ", "        ", width)
    return out


def _snippet(finding: Finding) -> list[str] | None:
    site = finding.site
    if site is None:
        return None
    lines = snippet_lines(site)
    if lines is None:
        return None
    gutter = len(str(lines[-1][0]))
    pad = " " * (gutter + 2)
    out = [f"{pad}╭─[{site}]"]
    for number, text in lines:
        text = text.expandtabs(4)
        out.append(f" {number:>{gutter}} │ {text}".rstrip())
        if number == site.line:
            start = site.column - 1
            end = site.end_column - 1 if site.end_line == site.line else len(text)
            length = max(1, min(end, len(text)) - start)
            middle = length // 2
            underline = "─" * middle + "┬" + "─" * (length - middle - 1)
            out.append(f"{pad}· {' ' * start}{underline}")
            if finding.label:
                out.append(f"{pad}· {' ' * (start + middle)}╰── {finding.label}")
    out.append(f"{pad}╰────")
    return out


def _wrap(text: str, first: str, rest: str, width: int) -> list[str]:
    lines = textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [first.rstrip()]
