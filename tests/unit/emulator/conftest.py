"""Fixtures of the emulator's tests: the moto patches installed for a module, dummy credentials
for a module's clients, moto in process for a test (what else they share:
tests/unit/emulator/support.py)."""

from collections.abc import Iterator

import pytest
from moto import mock_aws

from emulator.services import context, moto_patches
from tests.unit.emulator.support import fake_credentials


@pytest.fixture(scope="module")
def moto_patched() -> Iterator[None]:
    """The emulator's moto patches, for one test module (use with pytestmark)."""
    moto_patches.install()
    yield
    moto_patches.uninstall()


@pytest.fixture(scope="module")
def module_credentials() -> Iterator[None]:
    """fake_credentials for a module's clients, made once (a client costs ~0.1 s)."""
    with pytest.MonkeyPatch.context() as patch:
        fake_credentials(patch)
        yield


@pytest.fixture
def moto_in_process(monkeypatch) -> Iterator[None]:
    """moto in this process for one test, with dummy credentials; no fault switches after it."""
    fake_credentials(monkeypatch)
    with mock_aws():
        yield
    context.set_faults(None)
