"""Plain-text tables and ages for the human output, which shows stored values only as visible
text: a control or format character in the data (a terminal escape in an agent id, CR/LF in an
email) is printed escaped, never sent to the terminal."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


def visible(text: str) -> str:
    """``text`` with every character that is not printable (controls, format characters such as
    bidi overrides, line separators; space stays) escaped as Python writes it: ``\\x1b``."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def visible_lines(text: str) -> str:
    """``visible`` line by line: the output's own line breaks stay."""
    return "\n".join(visible(line) for line in text.split("\n"))


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(headers)] + [["-" if v is None else visible(str(v)) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def age(seconds: float | None) -> str | None:
    """3s, 4m, 2h5m, 3d2h: coarse on purpose."""
    if seconds is None:
        return None
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"


def utc(epoch_seconds: float | None) -> str | None:
    if epoch_seconds is None:
        return None
    return datetime.fromtimestamp(float(epoch_seconds), UTC).isoformat(timespec="seconds")
