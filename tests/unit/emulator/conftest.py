"""Fixtures of the emulator's tests: the moto patches installed for a module, dummy credentials
for a module's clients (what else they share: tests/unit/emulator/support.py)."""

from collections.abc import Iterator

import pytest

from emulator.services import moto_patches
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
