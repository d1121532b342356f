"""The layer ships what the tests run: its pins (hash-locked, `make locks`) equal the test
environment's locked versions (uv.lock; Dependabot updates it; this fails until the layer
follows)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)$")


def pins(lines) -> dict[str, str]:
    found = {}
    for line in lines:
        requirement = line.split("#", 1)[0].split()  # `name==version \` before its hashes
        match = PIN.match(requirement[0]) if requirement else None
        if match:
            found[match[1].lower()] = match[2]
    return found


def test_the_layers_pins_are_the_test_environments():
    layer = pins((ROOT / "layers/shared/requirements.txt").read_text().splitlines())
    lock = tomllib.loads((ROOT / "uv.lock").read_text())["package"]
    locked = {package["name"]: package.get("version") for package in lock}
    assert layer, "the layer pins nothing"
    assert {name: locked.get(name) for name in layer} == layer
