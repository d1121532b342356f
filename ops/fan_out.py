"""The fan-out modes: how the table's changes reach the stream consumers (template parameter
FanOut, docs/design.md "Fan-out modes"). One table of what each mode deploys, read by the stack
client, ops, the demo, the bench and the tests; tests/unit/ops/test_fan_out.py holds it to
template.yaml's AllowedValues and Conditions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FanOutMode:
    name: str
    # What reads the table's stream: each consumer's own mapping (lambda), RouterFunction's
    # mapping (router) or ChangePipe (every pipe mode).
    stream_reader: str
    # Each consumer reads a queue of its own, with its DLQ (condition FanOutByQueues).
    consumer_queues: bool
    # ChangePipe reads the stream (HasChangePipe); ChangeTopic fans out (HasChangeTopic).
    change_pipe: bool
    change_topic: bool
    # A change the bus or the topic cannot deliver to a consumer's queue goes to that consumer's
    # <X>ChangeDeliveryDeadLetterQueue (HasDeliveryDeadLetters). pipe-sfn has none: a send that
    # fails fails ChangeMachine's execution, hence the pipe's batch (StreamFailureQueue).
    delivery_dead_letters: bool


LAMBDA = FanOutMode("lambda", "consumers", False, False, False, False)
PIPE = FanOutMode("pipe", "ChangePipe", True, True, False, True)
ROUTER = FanOutMode("router", "RouterFunction", True, False, True, True)
PIPE_TOPIC = FanOutMode("pipe-topic", "ChangePipe", True, True, True, True)
PIPE_SFN = FanOutMode("pipe-sfn", "ChangePipe", True, True, False, False)

MODES: dict[str, FanOutMode] = {m.name: m for m in (LAMBDA, PIPE, ROUTER, PIPE_TOPIC, PIPE_SFN)}
NAMES: tuple[str, ...] = tuple(MODES)


def mode(name: str) -> FanOutMode:
    """The mode of that name; ValueError naming the modes for any other."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown fan-out mode {name!r}: {' | '.join(NAMES)}") from None
