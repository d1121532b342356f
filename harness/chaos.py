"""The chaos run's operator and verdict (`make chaos`: python -m harness.demo --chaos).

The run puts the demo's data through the local stack's faults (CHAOS). Before its steps (each a
Firehose delivery or a flat file), at moments drawn from the chaos seed, an operator does what
docs/operations.md has them do, with `python -m ops` as a separate process (harness.ops_process):

- four outages, each while a step goes in. Three are a bad release (every invocation fails, the
  `fail_invocations` switch): the stream consumers until their failed changes are where the
  fan-out mode puts them, recovered once fixed (`stream replay` or `dlq redrive`,
  StackClient.failure_route); NotifierFunction until NotificationDeadLetterQueue holds
  messages; IngestFunction until IngestDeadLetterQueue does (their queues redeliver after 1 s
  meanwhile). The fourth is a queue policy gone wrong: MailQueue, and LastAgentQueue in the
  modes that deliver the changes through a bus or a topic, refuse every sender until their
  delivery DLQs (MailDeliveryDeadLetterQueue, LastAgentChangeDeliveryDeadLetterQueue) hold
  messages. Those DLQs are redriven later.
- once each: `dlq redrive` of every dead-letter queue of the mode (IngestDeadLetterQueue,
  NotificationDeadLetterQueue, the consumers' and the fan-out's delivery DLQs), `stream replay`,
  `file reprocess` of a file in, `contact redrive` of a stored contact with a notification due,
  a re-upload of a flat file put before (its bytes again: a new version, a new file), and
  `idempotency purge NotifierFunction` of a claim in progress (the notifier is made to crash right
  after a claim at the moment before; a claim completed since is refused);
- SNS FIFO's 5-minute deduplication passes (POST /_emulator/age-deduplication), at one moment and
  again at the end: every duplicate after it (the faults' copies, the redrives, the replays, the
  contacts sent again) meets an expired window, and only the notifier's claims, kept for the
  record's life, keep the customer from a second notification. Time moves only while the
  pipeline is idle and no notification is claimed and unrecorded: the claims' clock does not move
  with it, and a claim young by its own clock is published again in the trust that SNS drops the
  copy (shared.aws.batch_claims).

None of them takes --resend: a command that could repeat what the customer got refuses (exit 2)
and is counted as refused. At the end the operator lets the window pass, sends a contact again,
and redrives or replays whatever is left in a failure queue; then the run settles. The verdict:
what the faults and the commands may never cause (each 0), and per command how often it ran,
what it did and what it refused.
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from shared import idempotency, keys, model

from harness import ROOT, ops_process
from harness import mail as last_hop
from harness.demo_data import Step
from harness.polling import say, wait_until
from harness.stack import StackClient
from ops.stack import CONSUMERS

if TYPE_CHECKING:
    from harness.demo import Run

# The chaos run's faults (docs/local-stack.md): throttles are drawn per call attempt, so boto3's
# retries see them too; a crash strikes one of an invocation's first ten calls.
CHAOS = {
    "duplicate_deliveries": 3,
    "sqs_pollers": 2,
    "reorder_rate": 0.2,
    "crash_invocations": {"function": "*", "probability": 0.05, "within_calls": 10},
    "throttle": [{"function": "*", "operation": "*", "probability": 0.01}],
    # the last hop's uncertain moment: SES sent it, the sender dies before recording it
    "crash_after_call": [
        {"function": "MailSenderFunction", "operation": "ses:SendEmail", "probability": 0.1}
    ],
}
# A command exits 1 when something failed that running it again may mend (a chaos crash can strike
# a replay's invocation too): the operator runs it again, as often as this.
RECOVERY_RUNS = 3
# SNS FIFO's (and SQS FIFO's) deduplication interval, and a second: "5 minutes pass".
WINDOW_SECONDS = 301
# Bound of a wait for the pipeline to be idle: 120 s, and more for a larger run's backlogs
# (10,000 contacts: 420 s).
IDLE_SECONDS = 120
IDLE_SECONDS_A_CONTACT = 0.03
# Bound for a broken function's messages to reach its DLQ: 5 receives, 1 s apart, once the step's
# work reaches its queue.
OUTAGE_SECONDS = 90
# How long the purge looks for a claim the throttled saves left (the step's notifications reach
# the notifier within seconds).
CLAIM_SECONDS = 30
NOTIFIER, INGEST = "NotifierFunction", "IngestFunction"
SAVES = {"function": NOTIFIER, "operation": "dynamodb:UpdateItem"}  # the records' saves
OUTCOMES = {0: "done", 1: "failed", 2: "refused"}
# Put one step: (step, wait for its outcome) -> whether it went in.
Put = Callable[[Step, bool], bool]


@dataclass
class Tally:
    """One operator command's runs: what each ended in, and what the done ones did (DID)."""

    what: str  # what DID counts
    runs: int = 0
    done: int = 0
    refused: int = 0
    failed: int = 0
    did: int = 0


def ops(stack: StackClient, *argv: str) -> subprocess.CompletedProcess:
    """`python -m ops --stack <the stack> ...` as an operator runs it against the local stack (a
    separate process: ops imports the harness, not the other way round)."""
    return subprocess.run(  # noqa: S603 (this interpreter, fixed arguments)
        [sys.executable, "-m", "ops", "--stack", stack.name, *argv],
        cwd=ROOT,
        env=ops_process.environment(stack),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# What a command's --json answer says it did, by its first two words.
DID: dict[str, tuple[str, Callable[[dict], int]]] = {
    "dlq redrive": ("messages moved back", lambda data: int(data.get("moved", 0))),
    "stream replay": (
        "batches replayed",
        lambda data: sum(b.get("outcome") == "replayed" for b in data.get("batches", [])),
    ),
    "file reprocess": ("files run again", lambda data: 1),
    "idempotency purge": ("claims released", lambda data: len(data.get("purged", []))),
    "contact redrive": (
        "notifications delivered again",
        lambda data: len(data.get("notifications", {})),
    ),
}
REUPLOAD = "re-upload of an old object"


class Operator:
    """The chaos run's operator: the drills between the steps, the sweep at the end, the tally."""

    def __init__(self, demo: Run, seed: int) -> None:
        self.demo = demo
        self.stack = demo.stack
        self.random = random.Random(seed)  # noqa: S311 (the run's moments, not secrets)
        self.tally: dict[str, Tally] = {}  # by command, in the order they first ran
        self.failed: list[str] = []  # commands still failing after RECOVERY_RUNS
        self.windows: list[dict] = []  # each time the deduplication window passed: its counts
        self.windows_held = 0  # moments it could not pass (busy, or a claim in progress)
        self.late_deliveries = 0  # notifications the operator delivered after a window passed
        self.stored: list[str] = []  # contacts of the steps in so far (Connect's records)
        self.flat_files: list[tuple[str, str]] = []  # (key, version) of the flat files put
        self._claims: dict[str, str] | None = None  # notifier claim key -> notification id
        self.began = time.monotonic()

    def at(self) -> str:
        """When, in the run: where the waits went."""
        return f"[{time.monotonic() - self.began:5.0f} s]"

    # -- the run ---------------------------------------------------------------------------------
    def put_steps(self, put: Put) -> bool:
        """Every step of the data in order, the drills before (or after) the steps their moments
        name; whether every step went in."""
        steps = self.demo.data.steps
        moments = list(range(1, len(steps)))
        before: dict[int, list[Callable[[], None]]] = collections.defaultdict(list)
        after: dict[int, list[Callable[[], None]]] = collections.defaultdict(list)
        kinds = (
            self.consumers_outage,
            self.notifier_outage,
            self.ingest_outage,
            self.delivery_outage,
        )
        outages = dict(
            zip(self.random.sample(moments, min(len(kinds), len(moments))), kinds, strict=False)
        )
        # The window passes where the consumers' outage waits for the pipeline to be idle anyway.
        before[next(iter(outages))].append(self.window_passes)
        broken = {outage.__name__: moment for moment, outage in outages.items()}
        for drill, since in self.drills(broken):
            later = [moment for moment in moments if moment > since]
            if later:  # else the sweep at the end redrives what is left
                before[self.random.choice(later)].append(drill)
        # The purge as soon as the throttles left a claim, at a moment no outage holds up: saves
        # throttled for minutes leave claims past the notifier's 270 s to adopt them, which only
        # --resend (never taken here) releases.
        armed = self.random.choice([m for m in moments if m not in outages] or moments)
        before[armed].append(self.throttle_saves)
        after[armed].append(self.purge_in_progress)
        first_in = True
        for index, step in enumerate(steps):
            for drill in before.get(index, []):
                drill()
            outage = outages.get(index)
            if outage is None:
                went_in = put(step, True)
            else:
                went_in = outage(lambda wait, step=step: put(step, wait))
            first_in = first_in and went_in
            if step.file is not None:  # its id the last one put
                self.flat_files.append((step.file.key, self.demo.file_ids[-1].rsplit("#", 1)[1]))
            elif outage != self.ingest_outage:  # that one's records wait in IngestDeadLetterQueue
                self.stored += [model.canonical_id(r["ContactId"]) for r in step.records or []]
            for drill in after.get(index, []):
                drill()
        return first_in

    def drills(self, broken: dict[str, int]) -> list[tuple[Callable[[], None], int]]:
        """The commands run once each at a moment of the run, each with the moment it comes
        after: a DLQ's redrive after its function's outage (``broken``: outage -> its moment).
        Not those the consumers' outage recovers with (stream replay in mode lambda, their DLQs'
        redrives in the others)."""
        stack = self.stack
        recovered = {"StreamFailureQueue"}
        if stack.consumers_read_queues:
            recovered = {stack.consumer_dead_letter_queue(c).removesuffix("Url") for c in CONSUMERS}
        since = {
            "IngestDeadLetterQueue": broken.get("ingest_outage", 0),
            "NotificationDeadLetterQueue": broken.get("notifier_outage", 0),
        } | dict.fromkeys(stack.delivery_dead_letter_queues, broken.get("delivery_outage", 0))
        drills: list[tuple[Callable[[], None], int]] = [
            (
                lambda queue=queue: self.recover(f"dlq redrive {queue}", *self.redrive_args(queue)),
                since.get(queue, 0),
            )
            for queue in stack.dead_letter_queues
            if queue not in recovered
        ]
        if "StreamFailureQueue" not in recovered:
            drills.append((lambda: self.recover("stream replay", "stream", "replay"), 0))
        return [
            *drills,
            (self.file_reprocess, 0),
            (self.contact_redrive, 0),
            (self.reupload, 0),
        ]

    def sweep(self) -> None:
        """After the last step: the window passes, a contact is sent again (a late duplicate for
        the notifier), a file put before is re-uploaded if none was; then whatever is left in a
        failure queue is redriven or replayed until none is (or RECOVERY_RUNS rounds)."""
        say("\nOperator, at the end: the deduplication window passes, then the failure queues")
        self.window_passes()
        self.contact_redrive()
        if REUPLOAD not in self.tally:
            self.reupload()
        for _ in range(RECOVERY_RUNS):
            self.wait_idle()
            left = [q for q in self.stack.failure_queues if self.stack.queue_depth(q)]
            if not left:
                return
            for output in left:
                queue = output.removesuffix("Url")
                if queue == "StreamFailureQueue":
                    self.recover("stream replay", "stream", "replay")
                else:
                    self.recover(f"dlq redrive {queue}", *self.redrive_args(queue))

    # -- commands --------------------------------------------------------------------------------
    def command(self, label: str, *argv: str) -> str:
        """Run `python -m ops --json ...` once; tally and say its outcome; the outcome."""
        done = ops(self.stack, "--json", *argv)
        outcome = OUTCOMES.get(done.returncode, "failed")
        what, did = DID[" ".join(label.split()[:2])]
        tally = self.tally.setdefault(label, Tally(what))
        tally.runs += 1
        setattr(tally, outcome, getattr(tally, outcome) + 1)
        detail = (done.stderr.strip().splitlines() or [""])[0][:150]
        if outcome != "refused":
            with contextlib.suppress(ValueError):
                count = did(json.loads(done.stdout))
                tally.did += count  # a failed run did this much too
                detail = f"{what}: {count}"
                if label.startswith("contact redrive") and self.windows:
                    self.late_deliveries += count
                if label == "dlq redrive NotificationDeadLetterQueue" and self.windows:
                    self.late_deliveries += count
        say(
            f"  {self.at()} python -m ops {' '.join(argv)} -> {outcome} (exit {done.returncode}) "
            + detail
        )
        return outcome

    def recover(self, label: str, *argv: str) -> None:
        """A command run again while it fails (not when refused), as the operator would."""
        for _ in range(RECOVERY_RUNS):
            outcome = self.command(label, *argv)
            if outcome != "failed":
                return
        self.failed.append(" ".join(argv))

    @staticmethod
    def redrive_args(queue: str) -> tuple[str, ...]:
        """`dlq redrive` asks before it moves a notification (listing which were published):
        --yes, never --resend."""
        return ("dlq", "redrive", queue, *(("--yes",) if queue.startswith("Notification") else ()))

    def file_reprocess(self) -> None:
        """A file in so far ingested again (refused while a step of it runs)."""
        file_id = self.random.choice(self.demo.file_ids)
        bucket_key, version = file_id.rsplit("#", 1)
        self.recover(
            "file reprocess",
            *("file", "reprocess", f"s3://{bucket_key}", "--version-id", version, "--yes"),
        )

    def contact_redrive(self) -> None:
        """A stored contact whose interaction has a notification due, sent to the consumers
        again: its notification, published already, reaches the notifier once more (refused
        while claimed and unrecorded)."""
        due = {interaction for _, interaction in self.demo.data.notifications}
        stored = self.demo.data.stored
        candidates = [c for c in self.stored if keys.interaction_id(stored[c]) in due]
        if not candidates:
            return
        contact = self.random.choice(candidates)
        self.recover("contact redrive", "contact", "redrive", contact, "--yes")

    def reupload(self) -> None:
        """A flat file put and ingested before, put again as it was: a new version, ingested as a
        new file, whose rows change nothing (each contact's version is its own)."""
        done = [(key, v) for key, v in self.flat_files if self.stack.file_outcome(key, v)]
        if not done:
            return
        key, version = self.random.choice(done)
        s3 = self.stack.s3
        body = s3.get_object(Bucket=self.stack.bucket, Key=key, VersionId=version)["Body"].read()
        new = s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body)["VersionId"]
        file_id = self.stack.file_id(key, new)
        self.demo.file_ids.append(file_id)
        self.demo.reuploads.append(file_id)
        tally = self.tally.setdefault(REUPLOAD, Tally("objects put again"))
        tally.runs += 1
        tally.done += 1
        tally.did += 1
        say(f"  {self.at()} re-upload of {key} (version {version}) -> version {new}")

    def throttle_saves(self) -> None:
        """NotifierFunction's saves of a published notification's record are throttled (issue
        42's first finding), every attempt, until the purge: published, their claims stay
        unrecorded until a later delivery of their message publishes them again (SNS drops the
        copy) and records them."""
        say(f"  {self.at()} NotifierFunction's record saves are throttled")
        self.stack.faults(throttle=[SAVES, *CHAOS["throttle"]])

    def purge_in_progress(self) -> None:
        """As soon as the throttles left one (bounded): `idempotency purge` of a notification
        claimed and unrecorded, allowed while its claim is younger than SNS's deduplication (its
        message, delivered again, publishes it again and SNS drops the copy); else of one
        published (refused without --resend). Then the saves go through again."""
        claimed: list[str] = []

        def found() -> bool:
            claimed[:] = self.claims_in_progress()
            return bool(claimed)

        wait_until(found, CLAIM_SECONDS, lambda: "looking for a claim the throttles left")
        target = self.random.choice(claimed or self.published() or [""])
        if target:
            self.recover(
                "idempotency purge NotifierFunction",
                *("idempotency", "purge", NOTIFIER, "--notification-id", target, "--yes"),
            )
        self.stack.faults(throttle=CHAOS["throttle"])

    def window_passes(self) -> None:
        """SNS's and SQS's FIFO deduplication 5 minutes on, when the pipeline is idle and no
        notification is claimed and unrecorded (NotificationDeadLetterQueue redriven first, once,
        if it holds the claimed one); else the window stays, counted as held."""
        idle = self.wait_idle()
        if idle and self.claims_in_progress():
            queue = "NotificationDeadLetterQueue"
            if self.stack.queue_depth(f"{queue}Url"):
                self.recover(f"dlq redrive {queue}", *self.redrive_args(queue))
                idle = self.wait_idle()
        if not idle or self.claims_in_progress():
            self.windows_held += 1
            why = "a notification is claimed and unrecorded" if idle else "the pipeline is busy"
            say(f"  {self.at()} the deduplication window stays: {why}")
            return
        aged = self.stack.age_deduplication(WINDOW_SECONDS)
        self.windows.append(aged)
        say(
            f"  {self.at()} 5 minutes pass for deduplication: {aged['sns']['expired']:,} SNS and "
            f"{aged['sqs']['expired']:,} SQS deduplication ids expire"
        )

    # -- outages ---------------------------------------------------------------------------------
    def consumers_outage(self, put: Callable[[bool], bool]) -> bool:
        """The stream consumers break while ``put`` puts the step in, until each one's failed
        changes are where the fan-out mode puts them (or its bound passes); then they are fixed,
        the pipeline drains, and the operator recovers what failed. Whether the step went in."""
        stack = self.stack
        say(f"\n{self.at()} Outage: the stream consumers break while the next step goes in")
        self.wait_idle()
        began = time.time()

        def failed_so_far() -> str:
            counts = (f"{len(stack.failed_changes(r, '', began))} of {r.function}" for r in routes)
            return f"failed changes so far: {', '.join(counts)}"

        with contextlib.ExitStack() as outage:
            routes = [outage.enter_context(stack.failing_consumer(c)) for c in CONSUMERS]
            stack.faults(fail_invocations=dict.fromkeys(CONSUMERS, 10**9))
            try:
                went_in = put(True)
                wait_until(
                    lambda: all(stack.failed_changes(r, "", began) for r in routes),
                    max(route.bound_seconds for route in routes),
                    failed_so_far,
                )
            finally:
                stack.faults(fail_invocations=dict.fromkeys(CONSUMERS, 0))
        say(f"  {self.at()} fixed; waiting for the pipeline to drain before the recovery")
        self.wait_idle()
        failed = [route for route in routes if stack.failed_changes(route, "", began)]
        if not failed:
            say("  nothing failed, nothing to recover")
        elif failed[0].recover[0] == "stream":  # one replay of StreamFailureQueue takes them all
            self.recover("stream replay", "stream", "replay")
        for route in failed:
            if route.recover[0] != "stream":
                self.recover(f"dlq redrive {route.queue}", *route.recover)
        return went_in

    def notifier_outage(self, put: Callable[[bool], bool]) -> bool:
        say(f"\n{self.at()} Outage: NotifierFunction breaks while the next step goes in")
        return self.function_outage(NOTIFIER, "NotificationQueueUrl", put, wait=True)

    def ingest_outage(self, put: Callable[[bool], bool]) -> bool:
        say(f"\n{self.at()} Outage: IngestFunction breaks while the next step goes in")
        return self.function_outage(INGEST, "IngestQueueUrl", put, wait=False)

    def function_outage(
        self, function: str, queue: str, put: Callable[[bool], bool], *, wait: bool
    ) -> bool:
        """``function`` fails every invocation while the step goes in, until its queue's DLQ holds
        messages (or the bound passes); then it is fixed. The DLQ waits for its redrive."""
        stack = self.stack
        dead_letters = queue.replace("Queue", "DeadLetterQueue")
        before = stack.queue_depth(dead_letters)
        with stack.redelivering_at_once(queue):
            stack.faults(fail_invocations={function: 10**9})
            try:
                went_in = put(wait)
                wait_until(
                    lambda: stack.queue_depth(dead_letters) > before,
                    OUTAGE_SECONDS,
                    lambda: (
                        f"{dead_letters.removesuffix('Url')}: "
                        f"{stack.queue_depth(dead_letters)} message(s)"
                    ),
                )
            finally:
                stack.faults(fail_invocations={function: 0})
        say(f"  {self.at()} {function} fixed; its dead letters wait for the operator's redrive")
        return went_in

    def delivery_outage(self, put: Callable[[bool], bool]) -> bool:
        """A queue policy gone wrong while the step goes in: MailQueue refuses NotificationsTopic,
        and in the modes that deliver the changes through a bus or a topic, LastAgentQueue refuses
        them (LastAgentFunction sends no notification: the other consumers' still reach MailQueue),
        until each one's delivery DLQ holds messages and the step is through (or the bound
        passes); then the policies are set back. The DLQs wait for the operator's redrive."""
        stack = self.stack
        last_agent = stack.consumer_delivery_dead_letter_queue(CONSUMERS[0]).removesuffix("Url")
        refused = {
            queue: destination
            for queue, destination in stack.delivery_dead_letter_queues.items()
            if queue in ("MailDeliveryDeadLetterQueue", last_agent)
        }
        names = ", ".join(output.removesuffix("Url") for output in refused.values())
        say(f"\n{self.at()} Outage: a queue policy refuses deliveries to {names}")
        before = {queue: stack.queue_depth(f"{queue}Url") for queue in refused}

        def held() -> dict[str, int]:
            return {q: stack.queue_depth(f"{q}Url") - n for q, n in before.items()}

        with contextlib.ExitStack() as outage:
            for destination in refused.values():
                outage.enter_context(stack.refusing_sends(destination))
            went_in = put(True)
            wait_until(
                lambda: all(held().values()) and stack.idle(),
                OUTAGE_SECONDS,
                lambda: f"held so far: {held()}",
            )
        say(f"  {self.at()} the policies set back; held for the operator's redrive: {held()}")
        return went_in

    # -- what the operator looks at --------------------------------------------------------------
    def wait_idle(self) -> bool:
        """Whether the pipeline became idle within the bound (a backlog's time grows with the
        run's contacts)."""
        return wait_until(
            self.stack.idle,
            IDLE_SECONDS + IDLE_SECONDS_A_CONTACT * len(self.demo.data.stored),
            lambda: "waiting for the pipeline to be idle",
        )

    def claim_keys(self) -> dict[str, str]:
        """The notifier's claim key of every notification due -> its id (Powertools' own hash of
        the data, as NotifierFunction claims it)."""
        if self._claims is None:
            claims = idempotency.NOTIFICATIONS
            layer = DynamoDBPersistenceLayer(
                table_name=self.stack.outputs["IdempotencyTableName"],
                boto3_client=self.stack.dynamodb,
            )
            layer.configure(claims.config(), key_prefix=claims.key_prefix)
            ids = [keys.notification_id(*due) for due in self.demo.data.notifications]
            self._claims = {
                # the key Powertools computes for the data (no public name for it)
                layer._get_hashed_idempotency_key({"notification_id": n}): n
                for n in ids
            }
        return self._claims

    def notifier_records(self, status: str) -> list[str]:
        """Notification ids whose notifier record has this status (INPROGRESS, COMPLETED)."""
        claims = self.claim_keys()
        found = []
        paginator = self.stack.dynamodb.get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.stack.outputs["IdempotencyTableName"],
            FilterExpression="#status = :status AND begins_with(id, :prefix)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":status": {"S": status},
                ":prefix": {"S": f"{idempotency.NOTIFICATIONS.key_prefix}#"},
            },
            ProjectionExpression="id",
        ):
            found += [claims[i["id"]["S"]] for i in page["Items"] if i["id"]["S"] in claims]
        return found

    def claims_in_progress(self) -> list[str]:
        return self.notifier_records("INPROGRESS")

    def published(self) -> list[str]:
        return self.notifier_records("COMPLETED")


# --------------------------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------------------------
def verdict(demo: Run, operator: Operator) -> int:
    """The chaos run's table: what the faults and the operator may never cause, each expected 0;
    then what each operator command did."""
    data, stack = demo.data, demo.stack
    messages = demo.topic.collect()
    per_id = collections.Counter(m.get("notification_id") for m in messages)
    kinds = collections.Counter(m.get("kind") for m in messages)
    injected = stack.faults()["injected"]
    rows = {
        "contacts lost": len(data.stored) - min(demo.contacts, len(data.stored)),
        "contacts not at their newest copy": demo.contacts_not_newest,
        "duplicate notifications": sum(n - 1 for n in per_id.values()),
        "missing notifications": max(0, data.surveys - kinds[keys.SURVEY])
        + max(0, data.gift_cards - kinds[keys.GIFT_CARD]),
        "wrong last agents": len(demo.wrong_last_agents),
        "operator commands failing (ops)": len(operator.failed),
        **last_hop.chaos_rows(stack, messages),
        **{
            output.removesuffix("Url"): stack.queue_depth(output) for output in stack.failure_queues
        },
    }
    width = max(map(len, rows))
    say("\nChaos verdict")
    say(f"  {'':<{width}} {'found':>7} {'expected':>9}")
    for label, found in rows.items():
        say(f"  {label:<{width}} {found:>7,} {0:>9}   {'ok' if found == 0 else 'FAILED'}")
    say(
        f"  faults that struck: {injected.get('crash', 0):,} crashes inside an invocation, "
        f"{injected.get('throttle', 0):,} throttled calls; {stack.failed_invocations():,} "
        "failed invocations, each retried by its event source"
    )
    for line in last_hop.mailed_twice(stack, messages):
        say(f"  mailed twice: {line}")
    say(last_hop.send_event_window(stack, messages))
    show_operator(operator)
    bad = [label for label, found in rows.items() if found]
    if bad or not demo.settled:
        say("\nCHAOS FAILED: " + ", ".join(bad or ["the pipeline did not settle"]))
        return 1
    say(
        "\nNo contact lost, nothing sent twice or missed, every last agent right, every "
        "operator command done or refused."
    )
    return 0


def show_operator(operator: Operator) -> None:
    """Per operator command: runs, and what they ended in (none took --resend)."""
    tally = operator.tally
    width = max([len(label) for label in tally] + [7])
    say("\n  Operator commands (python -m ops at random moments, none with --resend)")
    say(f"    {'command':<{width}} {'runs':>5} {'done':>5} {'refused':>8} {'failed':>7}  did")
    for label, t in tally.items():
        say(
            f"    {label:<{width}} {t.runs:>5} {t.done:>5} {t.refused:>8} {t.failed:>7}  "
            f"{t.did:,} {t.what}"
        )
    expired = sum(w["sns"]["expired"] for w in operator.windows)
    say(
        f"  the 5-minute deduplication window passed {len(operator.windows)} time(s) "
        f"({expired:,} SNS deduplication ids expired"
        + (f"; held {operator.windows_held} time(s)" if operator.windows_held else "")
        + f"); after it the operator's contact redrives and NotificationDeadLetterQueue's "
        f"redrive delivered {operator.late_deliveries:,} notifications to the notifier (those "
        "already published, duplicates past SNS's window, are what its claims must stop)"
    )
