"""What a person sees on the `ops dashboard` page, read from its HTML (as served, or as a browser
dumped its DOM): per widget title, each line's legend figure, its drawn points and the
thresholds drawn."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Widget:
    title: str
    figures: dict[str, str] = field(default_factory=dict)  # line label -> legend figure ("": none)
    points: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> {time: value}
    thresholds: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.widgets: dict[str, Widget] = {}
        self.current: Widget | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "section" and "data-title" in found:
            self.current = self.widgets.setdefault(found["data-title"], Widget(found["data-title"]))
        elif self.current is None:
            return
        elif tag == "li" and "data-metric" in found:
            self.current.figures[found["data-metric"]] = found["data-value"]
        elif tag == "circle" and "data-metric" in found:
            line = self.current.points.setdefault(found["data-metric"], {})
            line[found["data-time"]] = found["data-value"]
        elif tag == "line" and "threshold" in found.get("class", "").split():
            self.current.thresholds.append(found["data-value"])


def widgets(page: str) -> dict[str, Widget]:
    """The page's widgets by title."""
    reader = _Reader()
    reader.feed(page)
    return reader.widgets
