"""The fault switches over the control endpoint (GET/POST /_emulator/faults, POST
/_emulator/faults/reset) of a server started from `up` flags, and the flags themselves."""

import json
import urllib.error
import urllib.request

import pytest

from emulator.__main__ import _parser
from emulator.cli.up import fault_switches
from emulator.core.faults import Faults
from emulator.server import EmulatorServer
from emulator.services import moto_patches

START_FLAGS = ["up", "--duplicate-rate", "0.05", "--fault-seed", "3"]
START = {  # what GET shows for START_FLAGS: the flags' values, the defaults otherwise
    "duplicate_deliveries": 1,
    "duplicate_rate": 0.05,
    "reorder_rate": 0.0,
    "sqs_pollers": None,
    "crash_after_side_effects": {},
    "fail_invocations": {},
    "crash_after_call": [],
    "throttle": [],
    "crash_invocations": None,
    "seed": 3,
}
# A value of every switch, none of them the start-up one, as POST takes it and GET shows it.
CHANGED = {
    "duplicate_deliveries": 3,
    "duplicate_rate": 0.5,
    "reorder_rate": 0.25,
    "sqs_pollers": 2,
    "crash_after_side_effects": {"FnA": 2},
    "fail_invocations": {"FnB": 3},
    "crash_after_call": [{"function": "FnA", "operation": "dynamodb:PutItem", "times": 1}],
    "throttle": [{"function": "*", "operation": "sqs:*", "probability": 0.25}],
    "crash_invocations": {"function": "*", "probability": 0.1, "within_calls": 4},
    "seed": 9,
}


class Control:
    def __init__(self, server: EmulatorServer):
        self.server = server
        self.base = server.endpoint_url + "/_emulator/"

    def call(self, path: str, body=None, method: str | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path, data=data, method=method or ("POST" if data else "GET")
        )
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def switches(self) -> dict:
        status, body = self.call("faults")
        assert status == 200
        return {name: value for name, value in body.items() if name != "injected"}


@pytest.fixture(scope="module")
def control():
    server = EmulatorServer(0, faults=fault_switches(_parser().parse_args(START_FLAGS)))
    server.start()
    try:
        yield Control(server)
    finally:
        server.stop()
        moto_patches.uninstall()


@pytest.fixture
def started(control):
    """The server's switches as it started, before and after the test."""
    assert control.call("faults/reset", method="POST")[0] == 200
    yield control
    control.call("faults/reset", method="POST")


def test_get_shows_every_switch_with_its_start_up_value(started):
    status, body = started.call("faults")
    assert status == 200
    assert body == {**START, "injected": {}}
    assert list(body) == [*START, "injected"]  # declaration order


@pytest.mark.parametrize("name", list(CHANGED))
def test_every_switch_round_trips_through_post_and_get(started, name):
    status, body = started.call("faults", {name: CHANGED[name]})
    assert status == 200
    assert body[name] == CHANGED[name]
    assert started.switches() == {**START, name: CHANGED[name]}


def test_all_switches_at_once_and_get_posted_back_unchanged(started):
    assert started.call("faults", CHANGED)[0] == 200
    assert started.switches() == CHANGED
    state = started.switches()
    assert started.call("faults", state)[0] == 200
    assert started.switches() == CHANGED


def test_null_clears_the_nullable_switches(started):
    started.call("faults", CHANGED)
    status, _ = started.call("faults", {"sqs_pollers": None, "crash_invocations": None})
    assert status == 200
    switches = started.switches()
    assert switches["sqs_pollers"] is None
    assert switches["crash_invocations"] is None


def test_an_unknown_switch_is_refused_naming_it_and_the_known_ones(started):
    before = started.switches()
    status, body = started.call("faults", {"duplicate_delivery": 2, "sqs_pollers": 4})
    assert status == 400
    message = body["message"]
    assert message.startswith("unknown fault switch(es): duplicate_delivery"), message
    for name in START:
        assert name in message
    assert started.switches() == before  # nothing applied, not even the valid switch


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"duplicate_deliveries": 0}, "duplicate_deliveries must be an integer >= 1"),
        ({"duplicate_deliveries": True}, "duplicate_deliveries must be an integer >= 1"),
        ({"duplicate_rate": 1.5}, "duplicate_rate must be a number with 0 <= p <= 1"),
        ({"sqs_pollers": 0}, "sqs_pollers must be an integer >= 1"),
        ({"crash_after_side_effects": {"FnA": -1}}, "crash_after_side_effects must map"),
        ({"crash_invocations": {"probability": 0}}, "crash_invocations.probability: must be"),
        ({"seed": 1.5}, "seed must be an integer"),
        ([1], "faults must be a JSON object"),
    ],
)
def test_an_invalid_value_is_refused_naming_the_switch(started, body, message):
    status, answer = started.call("faults", body)
    assert status == 400
    assert answer["message"].startswith(message), answer["message"]
    assert started.switches() == START


def test_reset_restores_the_start_up_values(started):
    started.call("faults", CHANGED)
    status, body = started.call("faults/reset", method="POST")
    assert status == 200
    assert body == {**START, "injected": {}}
    assert started.switches() == START


def test_reset_clears_crash_and_throttle_switches(started):
    started.call(
        "faults",
        {
            "crash_after_side_effects": {"FnA": 1, "FnB": 3},
            "crash_after_call": CHANGED["crash_after_call"],
            "throttle": CHANGED["throttle"],
            "crash_invocations": CHANGED["crash_invocations"],
        },
    )
    _, body = started.call("faults/reset", method="POST")
    assert body["crash_after_side_effects"] == {}
    assert body["crash_after_call"] == body["throttle"] == []
    assert body["crash_invocations"] is None


def test_reset_takes_post_only(started):
    status, body = started.call("faults/reset")
    assert status == 405
    assert "GET not allowed" in body["message"]


# --- without a server ----------------------------------------------------------------------------


def test_age_deduplication_answers_its_counts_and_refuses_what_is_not_a_time(control):
    # No stack deployed: no FIFO topic or queue to age, each counted as none.
    assert control.call("age-deduplication", {"seconds": 301}) == (
        200,
        {
            "sns": {"topics": 0, "aged": 0, "expired": 0},
            "sqs": {"queues": 0, "aged": 0, "expired": 0},
        },
    )
    for body in ({}, {"seconds": 0}, {"seconds": True}, {"seconds": "301"}):
        assert control.call("age-deduplication", body) == (
            400,
            {"message": "seconds must be a number > 0"},
        )
    assert control.call("age-deduplication")[0] == 405


def test_reset_restores_the_start_up_call_faults_even_once_used_up():
    faults = fault_switches(
        _parser().parse_args(["up", "--throttle", "FnA:sqs:SendMessage:1", "--sqs-pollers", "2"])
    )
    assert faults.take_call_fault("FnA", "sqs:SendMessage") == "throttle"
    assert faults.snapshot()["throttle"] == []  # used up
    faults.update({"sqs_pollers": None})
    state = faults.reset()
    assert state["throttle"] == [{"function": "FnA", "operation": "sqs:SendMessage", "times": 1}]
    assert state["sqs_pollers"] == 2
    assert faults.take_call_fault("FnA", "sqs:SendMessage") == "throttle"


def test_reset_keeps_the_injected_counts():
    faults = Faults()
    faults.update({"throttle": [{"function": "*", "operation": "*"}]})
    fault = faults.take_call_fault("FnA", "sns:Publish")
    assert fault == "throttle"
    faults.count(fault)
    assert faults.reset()["injected"] == {"throttle": 1}


def test_reset_replays_the_start_up_seeds_random_choices():
    args = _parser().parse_args(["up", "--duplicate-rate", "0.5", "--fault-seed", "3"])
    faults = fault_switches(args)
    first = [faults.draw_duplicate() for _ in range(32)]
    faults.update({"seed": 4})
    faults.reset()
    assert [faults.draw_duplicate() for _ in range(32)] == first
    assert 0 < first.count(True) < len(first)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--duplicate-deliveries", "0"], "--duplicate-deliveries: duplicate_deliveries must be"),
        (["--duplicate-rate", "1.5"], "--duplicate-rate: duplicate_rate must be a number"),
        (["--sqs-pollers", "0"], "--sqs-pollers: sqs_pollers must be an integer >= 1"),
        (["--fault-seed", "x"], "--fault-seed"),
    ],
)
def test_invalid_up_flags_are_refused_naming_the_flag(capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["up", *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_up_flags_not_given_leave_the_defaults():
    assert fault_switches(_parser().parse_args(["up"])).snapshot() == Faults().snapshot()


def test_duplicate_rate_draws_from_the_seeded_random():
    def draws(seed: int) -> list[bool]:
        switches = Faults()
        switches.update({"duplicate_rate": 0.3, "seed": seed})
        return [switches.draw_duplicate() for _ in range(200)]

    first = draws(7)
    assert first == draws(7)
    assert 30 <= sum(first) <= 90  # about 30%
    assert not any(Faults().draw_duplicate() for _ in range(100))  # off by default
    with pytest.raises(ValueError, match="duplicate_rate"):
        Faults().update({"duplicate_rate": 1.5})
