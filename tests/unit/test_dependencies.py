"""The layer ships what the tests run: its pins equal the dev group's (Dependabot updates the
dev group; this fails until the layer follows)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)$")


def pins(lines) -> dict[str, str]:
    found = {}
    for line in lines:
        match = PIN.match(line.split("#", 1)[0].strip())
        if match:
            found[match[1].lower()] = match[2]
    return found


def test_the_layers_pins_are_the_dev_groups():
    layer = pins((ROOT / "layers/shared/requirements.txt").read_text().splitlines())
    dev = pins(tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"])
    assert layer, "the layer pins nothing"
    assert {name: dev.get(name) for name in layer} == layer
