"""The fenced blocks of the docs, with the annotations on the lines right before each: what
tests/integration/test_docs.py runs (`doc-test:`) and what tests/unit/test_extending.py builds
into a scratch copy of the project (`walkthrough:`). The convention is in docs/architecture.md
("Docs that run")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```(.*)$")
ANNOTATION = re.compile(r"^\s*<!-- (doc-test: (?:skip|expect)|walkthrough): (.+?) -->\s*$")


@dataclass
class Block:
    path: Path
    line: int  # the opening fence, 1-based
    language: str
    text: str
    skip: str | None = None
    expects: list[str] = field(default_factory=list)
    walkthrough: str | None = None  # where the block goes in a project extended by it

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip().startswith("```")), None
        )
        assert end is not None, f"{path.relative_to(ROOT)}:{index + 1}: unclosed fence"
        block = Block(path, index + 1, opening[2].strip(), "\n".join(lines[index + 1 : end]))
        above = index - 1
        while above >= 0 and (annotation := ANNOTATION.match(lines[above])):
            if annotation[1] == "doc-test: skip":
                block.skip = annotation[2]
            elif annotation[1] == "walkthrough":
                block.walkthrough = annotation[2]
            else:
                block.expects.append(annotation[2])
            above -= 1
        found.append(block)
        index = end + 1
    return found
