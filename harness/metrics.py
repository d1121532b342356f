"""The functions' CloudWatch metrics as they emit them: Powertools Metrics writes one embedded
metric format (EMF) JSON line per flush to the function's output, which the local stack appends
to <log dir>/<LogicalId>.log. Read incrementally, summed per function and metric name."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


class FunctionMetrics:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.lines = 0  # every line read so far, metric or not: the functions' activity
        self.totals: Counter[tuple[str, str]] = Counter()  # (LogicalId, metric) -> sum

    def read(self) -> int:
        """Take in what was appended since the last call; the number of lines read so far."""
        for path in sorted(self.log_dir.glob("*.log")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                chunk = self.partial.pop(path, b"") + handle.read()
                self.offsets[path] = handle.tell()
            *complete, rest = chunk.split(b"\n")
            if rest:
                self.partial[path] = rest
            self.lines += len(complete)
            for line in complete:
                if line.startswith(b'{"_aws"'):
                    try:
                        record = json.loads(line)
                    except ValueError:  # cut short by a killed worker: CloudWatch skips it too
                        continue
                    self._emf(path.stem, record)
        return self.lines

    def _emf(self, logical_id: str, record: dict) -> None:
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = record.get(metric["Name"], 0)
                self.totals[(logical_id, metric["Name"])] += sum(
                    value if isinstance(value, list) else [value]
                )

    def by_function(self, metric: str) -> Counter[str]:
        """LogicalId -> the metric's sum (functions that emitted it)."""
        return Counter({fn: int(n) for (fn, name), n in self.totals.items() if name == metric})
