"""Fixtures of the IngestFunction tests (what else they share: tests/unit/ingest/support.py)."""

import pytest

from tests.unit.ingest.support import Ingest


@pytest.fixture
def ingest(stack, monkeypatch, capsys) -> Ingest:
    return Ingest(stack, monkeypatch, capsys)
