"""The chaos run's operator (harness.chaos): which `python -m ops` commands it runs and when, how
it plays a recovery a crash struck, and what it counts of each command."""

import contextlib
import json
import subprocess

import pytest

from harness import chaos, demo, demo_data
from harness.stack import FailureRoute
from ops.stack import CONSUMERS

DEAD_LETTER_QUEUES = (
    "IngestDeadLetterQueue",
    "NotificationDeadLetterQueue",
    "MailDeliveryDeadLetterQueue",
)


class Body:
    def __init__(self, data: bytes):
        self.data = data

    def read(self) -> bytes:
        return self.data


class Objects:
    """The bucket's versions, as the operator reads and puts them."""

    def __init__(self):
        self.versions: dict[tuple[str, str], bytes] = {}

    def get_object(self, Bucket, Key, VersionId):
        return {"Body": Body(self.versions.get((Key, VersionId), b"rows"))}

    def put_object(self, Bucket, Key, Body):
        version = f"v{len(self.versions) + 1}"
        self.versions[(Key, version)] = Body
        return {"VersionId": version}


class Scans:
    """The idempotency table: no notification claimed or published (a scan finds nothing)."""

    def get_paginator(self, _operation):
        return self

    def paginate(self, **_request):
        return [{"Items": []}]


class ChaosStack:
    """What the operator asks of a stack. A broken function's queue dead-letters at once, each
    consumer has a failed change to recover, the pipeline is always idle."""

    bucket = "contacts"
    outputs = {"IdempotencyTableName": "idempotency"}  # noqa: RUF012 (read only)
    dead_letter_queues = DEAD_LETTER_QUEUES
    failure_queues = tuple(f"{queue}Url" for queue in DEAD_LETTER_QUEUES)

    def __init__(self, consumers_read_queues: bool = False):
        # lambda: the consumers' failures in StreamFailureQueue; pipe: in their own DLQs
        self.consumers_read_queues = consumers_read_queues
        self.delivery_dead_letter_queues = {"MailDeliveryDeadLetterQueue": "MailQueueUrl"}
        if consumers_read_queues:  # pipe: the bus's deliveries too
            self.delivery_dead_letter_queues |= {
                f"{c.removesuffix('Function')}ChangeDeliveryDeadLetterQueue": self.consumer_queue(c)
                for c in CONSUMERS
            }
        self.refusing: list[str] = []  # the queues refusing deliveries now
        self.s3 = Objects()
        self.dynamodb = Scans()
        self.depths: dict[str, int] = {}
        self.switches: list[dict] = []
        self.aged: list[float] = []

    busy = False  # a backlog that outlasts any bound

    def idle(self) -> bool:
        return not self.busy

    def faults(self, **switches) -> dict:
        self.switches.append(switches)
        for function, count in switches.get("fail_invocations", {}).items():
            queue = {"NotifierFunction": "Notification", "IngestFunction": "Ingest"}.get(function)
            if queue and count:
                self.depths[f"{queue}DeadLetterQueueUrl"] = 1
        return {"throttle": switches.get("throttle", []), "injected": {}}

    def queue_depth(self, output: str) -> int:
        return self.depths.get(output, 0)

    @contextlib.contextmanager
    def redelivering_at_once(self, _queue: str):
        yield

    @contextlib.contextmanager
    def refusing_sends(self, queue: str):
        """What the topic or the bus delivers meanwhile goes to the queue's delivery DLQ."""
        self.refusing.append(queue)
        self.switches.append({"refusing": queue})
        for dead, destination in self.delivery_dead_letter_queues.items():
            if destination == queue:
                self.depths[f"{dead}Url"] = self.depths.get(f"{dead}Url", 0) + 1
        try:
            yield
        finally:
            self.refusing.remove(queue)

    @staticmethod
    def consumer_queue(function: str) -> str:
        return f"{function.removesuffix('Function')}QueueUrl"

    @staticmethod
    def consumer_delivery_dead_letter_queue(function: str) -> str:
        return f"{function.removesuffix('Function')}ChangeDeliveryDeadLetterQueueUrl"

    @staticmethod
    def consumer_dead_letter_queue(function: str) -> str:
        return f"{function.removesuffix('Function')}DeadLetterQueueUrl"

    @contextlib.contextmanager
    def failing_consumer(self, function: str):
        if not self.consumers_read_queues:
            recover = ("stream", "replay", "--function", function)
            yield FailureRoute(function, "StreamFailureQueueUrl", False, 1, recover, None)
            return
        queue = self.consumer_dead_letter_queue(function)
        recover = ("dlq", "redrive", queue.removesuffix("Url"))
        yield FailureRoute(function, queue, True, 1, recover, None)

    def failed_changes(self, route, *_args) -> list[str]:
        return ["a failure record"]

    def age_deduplication(self, seconds: float) -> dict:
        self.aged.append(seconds)
        return {"sns": {"expired": 2}, "sqs": {"expired": 2}}

    def file_outcome(self, _key: str, _version: str) -> dict:
        return {"outcome": {"S": "PROCESSED"}}

    def file_id(self, key: str, version: str) -> str:
        return f"{self.bucket}/{key}#{version}"


def operator_of(stack: ChaosStack) -> chaos.Operator:
    data = demo_data.generate(200, 20, 5, 600)
    return chaos.Operator(demo.Run(stack, None, None, data), seed=3)


def answering(exits: dict[str, list[int]] | None = None, ran: list | None = None):
    """`python -m ops` as the operator's runs see it: exit 0 with a JSON answer, unless
    ``exits`` names the codes a command's last argument gets in turn."""

    def ops(_stack, *argv):
        if ran is not None:
            ran.append(argv)
        codes = (exits or {}).get(argv[-1])
        code = codes.pop(0) if codes else 0
        return subprocess.CompletedProcess(argv, code, stdout=json.dumps({"moved": 2}), stderr="")

    return ops


def put_into(operator: chaos.Operator):
    def put(step, _wait) -> bool:
        key = step.file.key if step.file is not None else "contact-records/an-object"
        operator.demo.file_ids.append(f"contacts/{key}#v0")  # the flat file, or Firehose's object
        return True

    return put


DEAD_LETTERS = [f"{c.removesuffix('Function')}DeadLetterQueue" for c in CONSUMERS]


def test_one_stream_replay_recovers_every_consumers_failed_changes(monkeypatch):
    ran = []
    monkeypatch.setattr(chaos, "ops", answering(ran=ran))
    operator = operator_of(ChaosStack())
    assert operator.consumers_outage(lambda _wait: True)
    assert ran == [("--json", "stream", "replay")]
    assert operator.failed == []


@pytest.mark.parametrize(
    ("consumers_read_queues", "refused"),
    [(False, ["MailQueueUrl"]), (True, ["MailQueueUrl", "LastAgentQueueUrl"])],
)
def test_the_delivery_outage_refuses_the_mail_queue_and_a_consumers_while_the_step_goes_in(
    consumers_read_queues, refused
):
    """MailQueue refuses NotificationsTopic; where a bus or a topic delivers the changes,
    LastAgentQueue refuses them too (the notifying consumers' queues do not: their
    notifications reach MailQueue's refusal). Set back once their DLQs hold messages."""
    stack = ChaosStack(consumers_read_queues)
    operator = operator_of(stack)
    during: list[list[str]] = []
    assert operator.delivery_outage(lambda _wait: during.append(list(stack.refusing)) or True)
    assert during == [refused]
    assert stack.refusing == []


def test_a_recovery_a_crash_struck_is_run_again_until_it_succeeds(monkeypatch):
    exits = {queue: [0] for queue in DEAD_LETTERS}
    exits[DEAD_LETTERS[-1]] = [1, 1, 0]  # a chaos crash in the redriven message's invocation
    ran = []
    monkeypatch.setattr(chaos, "ops", answering(exits, ran))
    operator = operator_of(ChaosStack(consumers_read_queues=True))
    assert operator.consumers_outage(lambda _wait: True)
    assert [argv[-1] for argv in ran] == [*DEAD_LETTERS, DEAD_LETTERS[-1], DEAD_LETTERS[-1]]
    assert operator.failed == []
    redrives = operator.tally[f"dlq redrive {DEAD_LETTERS[-1]}"]
    assert (redrives.runs, redrives.done, redrives.failed) == (3, 1, 2)


def test_a_recovery_failing_every_run_is_reported_failed(monkeypatch):
    exits = {DEAD_LETTERS[0]: [1] * chaos.RECOVERY_RUNS}
    monkeypatch.setattr(chaos, "ops", answering(exits))
    operator = operator_of(ChaosStack(consumers_read_queues=True))
    operator.consumers_outage(lambda _wait: True)
    assert operator.failed == [f"dlq redrive {DEAD_LETTERS[0]}"]


def test_a_refused_command_is_counted_refused_and_not_run_again(monkeypatch):
    ran = []
    monkeypatch.setattr(chaos, "ops", answering({"--yes": [2]}, ran))
    operator = operator_of(ChaosStack())
    operator.recover("dlq redrive NotificationDeadLetterQueue", "dlq", "redrive", "X", "--yes")
    tally = operator.tally["dlq redrive NotificationDeadLetterQueue"]
    assert (tally.runs, tally.refused, tally.did, len(ran)) == (1, 1, 0, 1)
    assert operator.failed == []


def test_every_operator_command_runs_at_a_moment_of_the_run_and_none_resends(monkeypatch):
    monkeypatch.setattr(chaos, "CLAIM_SECONDS", 0)  # no claim left in progress here
    ran = []
    monkeypatch.setattr(chaos, "ops", answering(ran=ran))
    stack = ChaosStack()
    operator = operator_of(stack)
    assert operator.put_steps(put_into(operator))
    operator.sweep()
    commands = {" ".join(argv[1:3]) for argv in ran}
    assert commands >= {"dlq redrive", "stream replay", "file reprocess", "contact redrive"}
    redriven = {argv[3] for argv in ran if argv[1:3] == ("dlq", "redrive")}
    assert redriven == set(DEAD_LETTER_QUEUES)
    assert all("--resend" not in argv for argv in ran)
    assert chaos.REUPLOAD in operator.tally
    assert stack.aged == [chaos.WINDOW_SECONDS] * 2  # at a moment of the run, and at the end
    # The notifier and the ingest each broke once, the consumers once, and every one was fixed.
    broken = [s["fail_invocations"] for s in stack.switches if "fail_invocations" in s]
    assert {f for b in broken for f, n in b.items() if n} == {
        *CONSUMERS,
        "NotifierFunction",
        "IngestFunction",
    }
    assert all(not any(b.values()) for b in broken[1::2])


@pytest.mark.parametrize("seed", range(12))
def test_no_outage_runs_while_the_notifiers_saves_are_throttled(monkeypatch, seed):
    """The saves are throttled from one step until the purge after it: an outage in between
    (minutes, in the consumers') would age the claims they leave past the notifier's 270 s to
    adopt them, and only --resend releases those."""
    monkeypatch.setattr(chaos, "CLAIM_SECONDS", 0)
    monkeypatch.setattr(chaos, "ops", answering())
    stack = ChaosStack(consumers_read_queues=True)
    data = demo_data.generate(200, 20, 5, 600)
    operator = chaos.Operator(demo.Run(stack, None, None, data), seed=seed)
    assert operator.put_steps(put_into(operator))
    throttled = [chaos.SAVES in s.get("throttle", []) for s in stack.switches]
    start = throttled.index(True)
    end = next(i for i in range(start + 1, len(throttled)) if "throttle" in stack.switches[i])
    between = stack.switches[start + 1 : end]
    assert not [s for s in between if "fail_invocations" in s or "refusing" in s], between


@pytest.mark.parametrize(
    ("exit_code", "outcome"), [(0, "done"), (1, "failed"), (2, "refused"), (130, "failed")]
)
def test_a_commands_exit_is_its_outcome_and_what_it_did_is_read_from_its_answer(
    monkeypatch, exit_code, outcome
):
    monkeypatch.setattr(chaos, "ops", answering({"IngestDeadLetterQueue": [exit_code]}))
    operator = operator_of(ChaosStack())
    assert operator.command("dlq redrive", "dlq", "redrive", "IngestDeadLetterQueue") == outcome
    tally = operator.tally["dlq redrive"]
    assert (tally.runs, getattr(tally, outcome), tally.did) == (
        1,
        1,
        0 if outcome == "refused" else 2,
    )


def test_the_deduplication_window_stays_while_the_pipeline_is_busy(monkeypatch):
    monkeypatch.setattr(chaos, "IDLE_SECONDS", 0)
    monkeypatch.setattr(chaos, "IDLE_SECONDS_A_CONTACT", 0)
    stack = ChaosStack()
    stack.busy = True
    operator = operator_of(stack)
    operator.window_passes()
    assert (stack.aged, operator.windows, operator.windows_held) == ([], [], 1)
    stack.busy = False
    operator.window_passes()
    assert (stack.aged, len(operator.windows)) == ([chaos.WINDOW_SECONDS], 1)
