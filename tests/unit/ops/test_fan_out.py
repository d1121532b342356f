"""ops/fan_out.py's table of the fan-out modes is template.yaml's: its FanOut AllowedValues, and
for each mode the Conditions that decide what it deploys; the Makefile runs every mode."""

import re

import pytest

from emulator.deploy.rules import template_conditions
from harness import ROOT
from ops import fan_out
from tests.unit.fanout.fanout_template import template


def conditions(mode: str) -> dict[str, bool]:
    defaults = {n: str(p.get("Default", "")) for n, p in template()["Parameters"].items()}
    return template_conditions(template(), defaults | {"FanOut": mode})


def test_the_table_has_the_templates_modes_in_its_order():
    assert tuple(template()["Parameters"]["FanOut"]["AllowedValues"]) == fan_out.NAMES


@pytest.mark.parametrize("name", fan_out.NAMES)
def test_each_modes_traits_are_what_the_template_deploys(name):
    mode, deployed = fan_out.mode(name), conditions(name)
    assert mode.consumer_queues == deployed["FanOutByQueues"]
    assert mode.change_pipe == deployed["HasChangePipe"]
    assert mode.change_topic == deployed["HasChangeTopic"]
    assert mode.delivery_dead_letters == deployed["HasDeliveryDeadLetters"]
    readers = {
        "consumers": deployed["FanOutByLambda"],
        "RouterFunction": deployed["FanOutByRouter"],
        "ChangePipe": deployed["HasChangePipe"],
    }
    assert [reader for reader, reads in readers.items() if reads] == [mode.stream_reader]


def test_make_test_runs_every_mode():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^FANOUT_MODES := (.*)$", makefile, re.M)[1].split() == list(fan_out.NAMES)


def test_an_unknown_mode_is_refused_naming_the_modes():
    with pytest.raises(
        ValueError, match=re.escape("lambda | pipe | router | pipe-topic | pipe-sfn")
    ):
        fan_out.mode("kinesis")
