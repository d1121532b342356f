"""Model-based test of the promise: hypothesis drives the whole pipeline (tests/unit/model/
pipeline.py), in each fan-out mode, through S3 events that are duplicated, late or for reordered
versions (their event times in any order); exports and corrections of every kind (agent changed,
disposition changed, ended_at moved, agent removed) in JSON lines, CSV and Connect's contact
records (transfers; re-deliveries with older, equal and newer LastUpdateTimestamp), timestamps in
UTC or at an offset, over two days; stream and queue deliveries that are duplicated, reordered,
held in flight past their visibility timeout, overlapping, dead-lettered or given up; a
consumer's queue refusing the bus or the topic (its change in its delivery dead-letter queue);
crashes after any AWS call of any invocation and throttled calls; time passing (seconds to hours:
claims age and expire, SNS FIFO's 5-minute deduplication closes, stream records unread for an
hour are given up; a day, a few times, the queues delivered meanwhile: a failed stream batch
outlives the stream's 24 hours); and the operator's commands at any moment, through ops' own
code and on clients a throttle may strike (`ops stream replay`, refused past 24 hours, then the
runbook's `ops contact redrive` of the batch's contacts; `ops dlq redrive` of every DLQ with and
without --resend, `ops file reprocess`, `ops idempotency purge` of a file's or a notification's
records with and without --resend, `ops contact redrive` with and without --resend). Then
everything is delivered without faults, and the final state must be the one the design defines
for the same files (tests/unit/model/design.py).

Once in an example the contacts' retention passes: everything is delivered and the final state
checked, then the clock of everything jumps about 400 days (past the first day's contacts'
expiry, every contact's, or the notifier's claims' too), and from then on DynamoDB's TTL
deletes expired items in any order among the steps above (the old exports uploaded again, their
S3 events late or twice, the operator's commands, faults); at the end TTL deletes every expired
item, and nothing the old exports hold may have produced an effect since (design.py's
check_after_retention).

`make test` runs MODEL_EXAMPLES=6 examples of up to MODEL_STEPS=30 steps per mode; larger
MODEL_EXAMPLES (and MODEL_STEPS) search deeper.
"""

import os
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from shared import idempotency, ingest, keys, model, rules

from tests.unit.model.design import Remembered, check_after_retention, check_final_state
from tests.unit.model.pipeline import (
    CONSUMERS,
    MODES,
    OPERATIONS,
    OPS_OPERATIONS,
    PIPE,
    RECORDER,
    SEND_EMAIL_CALL,
    SENDER,
    Pipeline,
    past_retention,
)
from tests.unit.support import moto_stack

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "6"))
STEPS = int(os.environ.get("MODEL_STEPS", "30"))
# Flat exports (JSON lines, CSV), and Connect's contact records as Firehose writes them (no
# suffix).
KEYS = (
    "incoming/a.jsonl",
    "incoming/b.jsonl",
    "incoming/c.csv",
    "contact-records/2026/11/29/12/contact-records-1-2026-11-29-12-00-00-a",
    "contact-records/2026/11/29/12/contact-records-1-2026-11-29-12-05-00-b",
)
CALLERS = ("+15550000001", "+15550000002", "+15550000003")
CONTACTS = 10  # c-0 .. c-9, r-0 .. r-9
ROWS = 12  # at most, a file
MAIL_WAIT = idempotency.MAIL_SEND_EVENT_WAIT_SECONDS  # the template's MailSendEventWaitSeconds
# The legs of the small world's interactions: r-1 was transferred on from r-0, r-3 from r-2.
# Records have ids of their own: one contact's copies come from one source, and share one
# interaction.
INITIAL_CONTACT = {"r-1": "r-0", "r-3": "r-2"}
AGENT_ARN = "arn:aws:connect:us-east-1:111122223333:instance/i-1/agent/"
# At most so many days pass in an example besides the retention's jump: a dead-letter queue keeps
# its messages 14 days, and what waits longer than that is past the design's horizon.
DAYS = 3
# The contacts' retention passing: to where the first day's contacts have expired and the
# second's not, past every contact's expiry, or past the notifier's and the mail sender's claims
# too (400 days after the notification: TTL may not have deleted every contact by then).
RETENTION_PASSES = {
    "the first day's contacts expired": lambda now: (
        datetime(2026, 11, 28, 10, 4, tzinfo=UTC) + model.CONTACT_RETENTION + timedelta(hours=12)
    ).timestamp(),
    "every contact expired": lambda now: (
        datetime(2026, 11, 29, 10, 4, tzinfo=UTC) + model.CONTACT_RETENTION + timedelta(hours=1)
    ).timestamp(),
    "the claims expired too": lambda now: now + idempotency.ONCE_PER_NOTIFICATION_SECONDS + 3600,
}


def is_record(key: str) -> bool:
    return key.startswith("contact-records/")


def moment(draw, day: int, hour: int, minute: int) -> str:
    """An instant of November 2026, spelled in UTC or at an offset (the same instant spelled
    otherwise is the same time)."""
    instant = datetime(2026, 11, day, hour, minute, tzinfo=UTC)
    offset = draw(st.sampled_from([0, 0, 2, -5]))
    if offset == 0:
        return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    return instant.astimezone(timezone(timedelta(hours=offset))).isoformat()


def updated(draw) -> str:
    """A copy's version: one of four minutes, so newer, older and equal ones all happen."""
    return moment(draw, 29, 11, draw(st.integers(0, 3)))


def ended(draw) -> str:
    return moment(draw, draw(st.sampled_from([28, 29])), 10, draw(st.integers(0, 3)))


STARTED = "2026-11-28T09:00:00Z"  # before every end


@st.composite
def contact_rows(draw) -> dict | str:
    """A row of a small world (few contact ids, callers and times), so that re-exports,
    corrections and ties happen; now and then a line that is no contact at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(['{"contact_id": "c-broken"}', "not json", "[]"]))
    disposition = draw(st.sampled_from(rules.DISPOSITIONS))
    row = {
        "contact_id": f"c-{draw(st.integers(0, CONTACTS - 1))}",
        "caller": draw(st.sampled_from(CALLERS)),
        "started_at": STARTED,
        "ended_at": ended(draw),
        "updated_at": updated(draw),
        "disposition": disposition,
        "wait_seconds": draw(st.sampled_from([5, 900])),
    }
    if disposition not in rules.WITHOUT_AGENT or draw(st.booleans()):
        row["agent_id"] = f"agent-{draw(st.integers(0, 3))}"
    if draw(st.booleans()):
        row["email"] = "someone@example.com"
        row["survey_opt_in"] = draw(st.booleans())
    return row


@st.composite
def contact_records(draw) -> dict | str:
    """A contact record of the same small world as Connect writes it: a leg of an interaction
    (transferred on, handled, abandoned in its queue, or served by the flow alone), a voice call
    or a chat (no number); now and then a record that is broken or no contact record."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(['{"ContactId": "r-broken"}', "not json", "[]", "{"]))
    contact_id = f"r-{draw(st.integers(0, CONTACTS - 1))}"
    voice = draw(st.integers(0, 5)) > 0
    record = {
        "AWSContactTraceRecordFormatVersion": "2017-03-10",
        "ContactId": contact_id,
        "InitialContactId": INITIAL_CONTACT.get(contact_id),
        "Channel": "VOICE" if voice else "CHAT",
        "InitiationMethod": "TRANSFER" if contact_id in INITIAL_CONTACT else "INBOUND",
        "InitiationTimestamp": STARTED,
        "DisconnectTimestamp": ended(draw),
        "LastUpdateTimestamp": updated(draw),
        "CustomerEndpoint": (
            {"Address": draw(st.sampled_from(CALLERS)), "Type": "TELEPHONE_NUMBER"}
            if voice
            else None
        ),
        "Agent": None,
        "Queue": None,
        "NextContactId": None,
        "Attributes": {},
    }
    return with_outcome(record, draw)


def with_outcome(record: dict, draw) -> dict:
    """The record as one of the ways a leg ends: its agent, queue, transfer and survey
    attributes drawn afresh (a re-delivery may change any of them)."""
    fixed = dict(record)
    outcome = draw(st.sampled_from(["handled", "transferred", "abandoned", "self-service"]))
    if outcome in ("handled", "transferred"):
        fixed["Agent"] = {"ARN": AGENT_ARN + f"agent-{draw(st.integers(0, 3))}", "Username": "a"}
    else:
        fixed["Agent"] = None
    queued = outcome != "self-service"
    fixed["Queue"] = (
        {"Name": "support", "Duration": draw(st.sampled_from([5, 900]))} if queued else None
    )
    fixed["NextContactId"] = "c-next" if outcome == "transferred" else None
    attributes = {}
    if draw(st.booleans()):
        attributes = {
            "email": "someone@example.com",
            "survey_opt_in": draw(st.sampled_from(["true", "false"])),
        }
    fixed["Attributes"] = attributes
    return fixed


# After any call of an invocation: its first few (claims, reads) most often, any later one too.
crash_points = st.one_of(st.none(), st.integers(1, 6), st.integers(7, 40))
# A consumer's queue refusing the next 1-3 changes of the bus or the topic.
change_queue_refusals = st.tuples(st.sampled_from(CONSUMERS), st.integers(1, 3))
# How a correction changes an exported contact (the design's corrections: any field may change).
CORRECTIONS = (
    "agent changed",
    "disposition changed",
    "ended_at moved",
    "agent removed",
    "re-uploaded",
)


def corrected(row: dict, kind: str, draw) -> dict:
    fixed = dict(row)
    if kind == "re-uploaded":  # an old copy uploaded again as it was (the runbooks once did)
        return fixed
    fixed["updated_at"] = updated(draw)
    if kind == "agent changed":
        fixed["agent_id"] = f"agent-{draw(st.integers(4, 6))}"
        if fixed["disposition"] == rules.ABANDONED:
            fixed["disposition"] = rules.RESOLVED
    elif kind == "disposition changed":
        others = [d for d in rules.DISPOSITIONS if d != row["disposition"]]
        fixed["disposition"] = draw(st.sampled_from(others))
        fixed.setdefault("agent_id", "agent-7")
    elif kind == "ended_at moved":
        moved = ended(draw)
        fixed["ended_at"] = moved if moved != row["ended_at"] else moment(draw, 29, 10, 4)
    else:  # agent removed: only an abandoned contact may have none (the input contract)
        fixed.pop("agent_id", None)
        fixed["disposition"] = rules.ABANDONED
    return fixed


class PipelineMachine(RuleBasedStateMachine):
    def __init__(self, pipeline: Pipeline):
        super().__init__()
        self.pipeline = pipeline
        self.remembered: Remembered | None = None  # once the contacts' retention passes
        self.days = 0  # days passed in a_day_passes

    def may_fail_part_way(self, reader: str) -> bool:
        """A function, or pipe-sfn's pipe (its machine's execution fails after some sends); the
        other pipes deliver a batch whole or not at all (the pipe is no function: it neither
        crashes nor is throttled)."""
        return reader != PIPE or self.pipeline.mode == "pipe-sfn"

    def functions(self) -> st.SearchStrategy[str]:
        """What may crash part way in the mode."""
        return st.sampled_from([f for f in self.pipeline.order if self.may_fail_part_way(f)])

    def contact_ids(self, interactions: bool = False) -> list[str]:
        """The contact ids of the files' rows (their interactions': a transferred leg's first)."""
        found = set()
        for upload in self.pipeline.uploads:
            for row in upload.rows:
                if isinstance(row, dict):
                    leg = row.get("contact_id") or row.get("ContactId")
                    found.add((interactions and row.get("InitialContactId")) or leg)
        return sorted(found - {None, "c-broken", "r-broken"})

    @initialize(data=st.data(), key=st.sampled_from(KEYS), newline=st.booleans())
    def first_upload(self, data, key, newline):
        rows = data.draw(
            st.lists(
                contact_records() if is_record(key) else contact_rows(), min_size=1, max_size=ROWS
            )
        )
        self.pipeline.upload(key, rows, newline=newline)

    @rule(
        data=st.data(),
        key=st.sampled_from(KEYS),
        moment=st.one_of(st.none(), st.integers(0, 3599)),
        newline=st.booleans(),
    )
    def upload(self, data, key, moment, newline):
        """A file; its event's time the next second, or any second of the hour (earlier than
        an upload before it, or the same)."""
        rows = data.draw(
            st.lists(
                contact_records() if is_record(key) else contact_rows(), min_size=1, max_size=ROWS
            )
        )
        self.pipeline.upload(key, rows, moment, newline)

    @rule(data=st.data(), key=st.sampled_from(KEYS), kind=st.sampled_from(CORRECTIONS))
    def a_correction_is_exported(self, data, key, kind):
        """A contact delivered again, changed, with a newer, older or equal version: in the
        format of the file it goes into (any old copy may also be re-uploaded as it was)."""
        exported = [row for upload in self.pipeline.uploads for row in upload.rows]
        copies = [
            row
            for row in exported
            if isinstance(row, dict) and is_record(key) == ("ContactId" in row)
        ]
        if copies:
            row = data.draw(st.sampled_from(copies))
            if is_record(key):
                fixed = with_outcome(row, data.draw) if kind != "re-uploaded" else dict(row)
                fixed["LastUpdateTimestamp"] = updated(data.draw)
            else:
                fixed = corrected(row, kind, data.draw)
            self.pipeline.upload(key, [fixed])

    @rule(data=st.data())
    def s3_delivers_an_event_again(self, data):
        upload = data.draw(st.sampled_from(self.pipeline.uploads))
        self.pipeline.send_ingest(upload.event)

    @rule()
    def s3_delivers_an_event_late(self):
        self.pipeline.hold_ingest_message()

    @rule()
    def held_events_arrive(self):
        self.pipeline.release_held()

    @rule(data=st.data(), crash_after=st.one_of(st.integers(1, 6), st.integers(7, 40)))
    def everything_flows_with_a_crash(self, data, crash_after):
        self.pipeline.flow(data.draw(self.functions()), crash_after)

    @rule(
        data=st.data(),
        n=st.integers(1, 10),
        crash_after=crash_points,
        twice=st.booleans(),
        reverse=st.booleans(),
    )
    def deliver_one_batch(self, data, n, crash_after, twice, reverse):
        function = data.draw(st.sampled_from(self.pipeline.order))
        self.pipeline.deliver(
            function, n, crash_after if self.may_fail_part_way(function) else None, twice, reverse
        )

    @rule(
        data=st.data(),
        n=st.integers(1, 10),
        overlap_after=st.integers(1, 12),
        crash_after=crash_points,
    )
    def two_invocations_overlap(self, data, n, overlap_after, crash_after):
        """A batch whose visibility timeout ends while its invocation runs: after the first
        invocation's k-th call, a second one gets the same messages and runs to its end, then
        the first goes on (and may crash)."""
        readers = [f for f in self.pipeline.order if f not in self.pipeline.filters]
        function = data.draw(st.sampled_from(readers))
        self.pipeline.deliver_queue(function, n, crash_after, False, overlap_after=overlap_after)

    @rule(data=st.data(), crash_after=st.integers(1, 8))
    def a_batch_fails_until_dead_lettered(self, data, crash_after):
        """A queue's batch crashes at every receive, its visibility timeout apart, until its
        messages are in the dead-letter queue (a notification's claim then older than 270 s
        after a few such minutes, or not)."""
        readers = [f for f in self.pipeline.order if f not in self.pipeline.filters]
        self.pipeline.dead_letter(data.draw(st.sampled_from(readers)), crash_after)

    @rule(data=st.data(), n=st.integers(1, 10))
    def a_stream_batch_is_given_up(self, data, n):
        reader = data.draw(st.sampled_from(sorted(self.pipeline.filters)))
        self.pipeline.deliver_stream(reader, n, None, twice=False, give_up=True)

    @rule(data=st.data())
    def a_message_is_held_in_flight(self, data):
        """A change, a notification at the mail sender (its FIFO group held up behind it) or an
        SES event at its recorder."""
        queues = [*sorted(self.pipeline.change_queues), SENDER, RECORDER]
        self.pipeline.hold_in_flight(data.draw(st.sampled_from(queues)))

    @rule(events_dead_lettered=st.booleans())
    def the_mail_sender_dies_after_send_email(self, events_dead_lettered):
        """What is on its way reaches MailQueue; the sender's batch of one notification dies once
        SES accepted its e-mail, before its claim is saved (a notification claimed anew, or one
        retried past the wait; a batch that sends nothing does not die); SES's Send event may
        then fail at its recorder until MailEventsDeadLetterQueue holds it, so the sender's
        retries stay in doubt."""
        self.pipeline.flow_up_to(SENDER)
        self.pipeline.deliver_queue(SENDER, 1, SEND_EMAIL_CALL, twice=False)
        if events_dead_lettered:
            self.pipeline.recorder_fails_until_dead_lettered()

    @rule(deliveries=st.integers(1, 3))
    def the_mail_queue_refuses_the_topic(self, deliveries):
        """SNS cannot deliver the next notifications to MailQueue: MailDeliveryDeadLetterQueue
        holds them until the operator's redrive."""
        self.pipeline.mail_queue_refuses_the_topic(deliveries)

    @initialize(refusal=st.one_of(st.none(), change_queue_refusals))
    def a_change_queue_may_refuse_from_the_start(self, refusal):
        """The refusal below, armed before the first upload's changes pass the bus or the topic
        (most examples' later changes are few: armed later, it rarely strikes)."""
        if refusal and self.pipeline.change_delivery_dead_letters:
            self.pipeline.change_queue_refuses_the_fan_out(*refusal)

    @precondition(lambda self: self.pipeline.change_delivery_dead_letters)
    @rule(refusal=change_queue_refusals)
    def a_change_queue_refuses_the_fan_out(self, refusal):
        """The bus (pipe) or the topic (router, pipe-topic) cannot deliver the next changes to
        the consumer's queue: <X>ChangeDeliveryDeadLetterQueue holds them until the operator's
        redrive."""
        self.pipeline.change_queue_refuses_the_fan_out(*refusal)

    @rule()
    def the_mail_events_fail_until_dead_lettered(self):
        """MailEventsFunction fails (its writes throttled) at every receive of what its queue
        holds, until it is all in MailEventsDeadLetterQueue: a send in doubt then waits for the
        operator's redrive."""
        self.pipeline.recorder_fails_until_dead_lettered()

    @rule(seconds=st.sampled_from([5, 31, 61, 121, 271, 301, MAIL_WAIT + 1, 721, 3600, 4 * 3600]))
    def time_passes(self, seconds):
        """Visibility timeouts end (a queue's messages come back after theirs: 60 s, IngestQueue's
        720 s), crashed invocations' claims expire, SNS's 5-minute deduplication window closes,
        the notifier's 270 s to adopt a claim and the mail sender's wait for SES's Send event run
        out; a backlog of hours: stream records unread for more than an hour are given up to
        StreamFailureQueue (MaximumRecordAgeInSeconds)."""
        self.pipeline.time_passes(seconds)

    @precondition(lambda self: self.days < DAYS)
    @rule()
    def a_day_passes(self):
        """A failed stream batch outlives the stream's 24 hours; the queues' mappings deliver
        meanwhile (a message does not wait a day unreceived)."""
        self.pipeline.a_day_passes()
        self.days += 1

    @precondition(lambda self: self.remembered is None)
    @rule(until=st.sampled_from(sorted(RETENTION_PASSES)))
    def the_contacts_retention_passes(self, until):
        """Everything is delivered and checked (tests/unit/model/design.py), then the clock of
        everything that decides by time, the ingest's included, jumps about 400 days on. Only
        once all is delivered: a message waiting in a queue would be lost past its retention (4
        days; a dead-letter queue's 14), which is past the design's horizon, not a fault of it."""
        self.pipeline.drain()
        check_final_state(self.pipeline)
        self.remembered = Remembered.of(self.pipeline)
        now = self.pipeline.clock.time()
        self.pipeline.time_passes(max(0.0, RETENTION_PASSES[until](now) - now))
        self.pipeline.operator[f"the contacts' retention passed: {until}"] += 1

    @precondition(lambda self: self.remembered is not None)
    @rule(data=st.data())
    def ttl_deletes_expired_items(self, data):
        """DynamoDB's TTL deletes some of the expired items, in any order (up to days after they
        expired): each a REMOVE on the stream, as the service's."""
        expired = self.pipeline.expired()
        if expired:
            order = data.draw(st.permutations(expired))
            self.pipeline.ttl_deletes(order[: data.draw(st.integers(1, len(order)))])
            self.pipeline.operator["TTL deleted items between the other steps"] += 1

    @rule(data=st.data(), function=st.sampled_from(sorted(OPERATIONS)), times=st.integers(1, 3))
    def throttle(self, data, function, times):
        if function in self.pipeline.order:
            operation = data.draw(st.sampled_from(OPERATIONS[function]))
            self.pipeline.throttle(function, operation, times)

    # -- the operator, at any moment (once there is something to act on) --------------------------
    def ingested(self) -> bool:
        return bool(self.pipeline.started_files)

    @precondition(lambda self: self.pipeline.stream_failures)
    @rule(crash_after=crash_points)
    def operator_replays_a_failed_stream_batch(self, crash_after):
        self.pipeline.stream_replay(crash_after)

    @precondition(lambda self: any(past_retention(r) for _, r in self.pipeline.stream_failures))
    @rule(resend=st.booleans())
    def operator_redrives_the_contacts_of_a_batch_past_retention(self, resend):
        """docs/operations.md's runbook for a batch `ops stream replay` refuses: each contact it
        holds through `ops contact redrive`, then the failure record deleted."""
        self.pipeline.redrive_past_retention(resend)

    @precondition(lambda self: self.pipeline.dead_letters_held())
    @rule(resend=st.booleans())
    def operator_redrives_the_dead_letter_queues(self, resend):
        self.pipeline.dlq_redrive(resend)

    @precondition(ingested)
    @rule(data=st.data())
    def operator_reprocesses_a_file(self, data):
        self.pipeline.file_reprocess(data.draw(st.sampled_from(self.pipeline.uploads)))

    @precondition(ingested)
    @rule(data=st.data(), resend=st.booleans())
    def operator_purges_a_notifications_record(self, data, resend):
        """Of a notification some interaction of the files may be due (most have a record by
        now)."""
        contacts = self.contact_ids(interactions=True)
        if contacts:
            kind = data.draw(st.sampled_from(keys.NOTIFICATION_KINDS))
            contact = data.draw(st.sampled_from(contacts))
            self.pipeline.idempotency_purge(keys.notification_id(kind, contact), resend)

    @precondition(ingested)
    @rule(data=st.data(), resend=st.booleans())
    def operator_redrives_a_contact(self, data, resend):
        contacts = self.contact_ids()
        if contacts:
            self.pipeline.contact_redrive(data.draw(st.sampled_from(contacts)), resend)

    @precondition(ingested)
    @rule(data=st.data())
    def operator_purges_a_files_records(self, data):
        self.pipeline.idempotency_purge(data.draw(st.sampled_from(self.pipeline.uploads)), False)

    @rule(operation=st.sampled_from(OPS_OPERATIONS), times=st.integers(1, 3))
    def the_operators_calls_are_throttled(self, operation, times):
        self.pipeline.throttle_operator(operation, times)

    def teardown(self):
        self.pipeline.drain()
        if self.remembered is None:
            check_final_state(self.pipeline)
        else:
            self.pipeline.ttl_deletes_every_expired_item()
            check_after_retention(self.pipeline, self.remembered)
        # what the example reached (pytest --hypothesis-show-statistics)
        for reached in self.pipeline.operator:
            event(reached)
        if any(count > 1 for count in self.pipeline.received_by_subscriber().values()):
            event("a notification received again after --resend")
        if any(calls[-1:] == ("email:SendEmail",) for _, calls in self.pipeline.crashes):
            event("the mail sender died after SendEmail, before its save")


@pytest.mark.parametrize("mode", MODES)
def test_the_pipeline_keeps_its_promise_under_any_faults(aws_env, monkeypatch, capsys, mode):
    # Writes of two contacts, so a file of a few rows needs continuations (three per invocation).
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)

    class Machine(PipelineMachine):
        def __init__(self):
            self._stack = moto_stack(monkeypatch)
            super().__init__(Pipeline(self._stack.__enter__(), monkeypatch, mode))

        def teardown(self):
            try:
                super().teardown()
            finally:
                self._stack.__exit__(None, None, None)
                capsys.readouterr()  # the handlers' logs: not this test's output

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
