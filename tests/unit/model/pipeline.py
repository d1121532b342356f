"""The whole pipeline in one process for the model-based test: the real handlers, moto for AWS,
and every delivery made one step at a time by the test, the way the event source mappings would
make it: which messages or stream records, in which batch and order, delivered twice or not, and
whether the invocation crashes after its k-th AWS call or meets a throttled call; and the
operator's commands, run whenever the test says.

Every fan-out mode (template parameter FanOut):
- lambda: each consumer reads the table's stream through its own mapping (its FilterCriteria
  from template.yaml), in stream order per shard; a batch that keeps failing is given up to
  StreamFailureQueue (the test says when: retries exhausted), and so are the records older than
  the mapping's MaximumRecordAgeInSeconds when a batch is read (an hour: the model's clock says
  how old a record is, as it does for the record's ApproximateCreationDateTime); `ops stream
  replay` invokes the consumer again with a batch's records, later, whatever came in between,
  and refuses a batch whose first record is more than 24 h old as ops refuses it (ops.replay's
  own check, by the model's clock): the operator then follows docs/operations.md ("Stream
  failures", step 2): `ops contact redrive` of each contact of the batch, with or without
  --resend, then the failure record deleted. Bisection is covered by the batch sizes the test
  picks.
- pipe: one stream reader (ChangePipe, its filter) puts each record on the bus; each consumer's
  rule (its EventPattern, matched on the bus event) sends the record (InputPath $.detail) to the
  consumer's queue, by the local stack's delivery (emulator/services/delivery_failures.py): while
  the queue refuses (the test says for how many deliveries: its policy changed by hand), the
  event itself goes to the target's DeadLetterConfig, the consumer's
  <X>ChangeDeliveryDeadLetterQueue, with EventBridge's attributes (ERROR_CODE, ...).
- router: the real RouterFunction reads the stream and publishes to ChangeTopic (moto SNS); the
  subscriptions (the template's filter policies, raw delivery) fill the consumers' queues; while
  a queue refuses, its subscription's RedrivePolicy puts the raw message (the record) in the
  consumer's <X>ChangeDeliveryDeadLetterQueue (the local stack's SNS delivery, as for pipe).
- pipe-topic: the pipe (its filter) publishes each record to ChangeTopic, the record's JSON as the
  message; each subscription's filter policy matches the body, raw delivery fills the consumer's
  queue (or, while it refuses, its delivery dead-letter queue, as router), and the consumer's
  queue mapping admits what its FilterCriteria match on the body (Lambda deletes the others
  without an invocation).
- pipe-sfn: the pipe (its filter) runs ChangeMachine with each batch: every record to every
  consumer's queue (compact JSON, States.JsonToString), where the consumer's queue mapping admits
  what its FilterCriteria match. An execution may fail part way (the test's crash point: after
  its k-th send), having sent some records to some queues: the pipe's batch fails and is
  delivered again, or given up and replayed. No delivery dead-letter queue (as template.yaml).
In every mode but lambda a consumer's queue is a standard queue: batches are taken in any order,
a message can be held in flight and come back after its visibility timeout (behind later ones),
and after 5 receives it moves to the consumer's dead-letter queue. A given-up stream batch of
the pipe or the router is replayed as in lambda mode.

Time is the model's (ModelClock): it moves only when the test lets it (seconds to a day, and
once about 400 days), and everything that decides by time reads it: SQS's visibility timeouts
(a failed or crashed message comes back after its queue's: IngestQueue 720 s, the others 60 s)
and retention, Powertools' claims, the notifier's 270 s to adopt a claim, ops' "may have been
published" and the stream's 24 hours, the stream records' creation times, the ingest's "now"
(what the table remembers), and SNS FIFO's 5-minute deduplication (FifoSubscriber: the oracle
counts what a subscriber received, so a publish repeated past the window is a duplicate it
sees). An invocation's claims are held for the time it has left: a duplicate delivered at once
meets the claim in progress and is retried after the visibility timeout. Two invocations of a
queue's function overlap: after the first one's k-th call, a second one gets the same messages
and runs to its end, then the first goes on.

The contacts' retention: once everything is delivered (a message waiting in a queue through the
jump would be lost past its queue's retention, which is past the design's horizon, not a fault
of it), the clock jumps past the expiry (expires_at, 400 days after the contact ended) of the
first day's contacts, of every contact, or of the notifier's and mail sender's claims too.
moto's DynamoDB has no TTL sweeper: the model deletes expired items of ContactsTable itself,
some at a time in any order (TTL deletes up to days after the expiry), each only while still
expired, with the stream record TTL writes (a REMOVE whose userIdentity is the service's), among
the other steps: uploads of the old exports again and their S3 events late or twice, file
reprocess, contact redrive, DLQ redrives, crashes, throttles.
IdempotencyTable's TTL is not modelled: Powertools reads an expired record as EXPIRED whether or
not it is deleted.

SQS semantics kept from AWS (IngestQueue, NotificationQueue, the consumer queues and the last
hop's): a batch of received messages; those the function did not report as failed are deleted;
the others (or all, on a crash) come back after the visibility timeout, and after the queue's
receives (5; MailQueue's 10) move to its dead-letter queue.

The last hop: NotificationsTopic delivers to MailQueue (FIFO: a group's messages in order, none
while one is in flight; FifoSubscriber), or to MailDeliveryDeadLetterQueue while MailQueue refuses
it; MailSenderFunction sends with the local stack's SES, whose Send events MailEventsRule puts in
MailEventsQueue (or MailEventsDeadLetterQueue), which MailEventsFunction records. The recorder's
mapping polls while the model's clock moves, so an event is recorded, or dead-lettered after its
receives, within the sender's wait (docs/design.md's horizon).

The operator's commands run through ops' own code, on ops' own clients (which a throttle may
strike): `ops file reprocess`, `ops idempotency purge` (a file's records, or a notification's,
with or without --resend), `ops dlq redrive` (NotificationDeadLetterQueue's listing, refusal
and --resend are ops.records'; what the fan-out or NotificationsTopic could not deliver, each
consumer's <X>ChangeDeliveryDeadLetterQueue and MailDeliveryDeadLetterQueue, is sent on to its
queue by ops.delivery_redrive, as it would have arrived, and MailEventsDeadLetterQueue recorded
by it; SQS's move task, which moto lacks, and the other queues' redrive are the same move done
here), `ops contact redrive` (with or without --resend; its delivery to
the stream readers is the model's) and `ops stream replay` (the model's replay of a given-up
batch). What --resend releases is allowed one more message at the subscriber, as docs/design.md
says; nothing else is.

Not modelled: a delivery of the bus or the topic that fails and is retried (throttling, an
outage: the model's refusals go to the delivery dead-letter queue at once, as a refusal does; a
retried one goes there later, or is delivered late), and a delivery dead-letter queue that
refuses too (the change lost: docs/operations.md's `ops contact redrive` of the period); SES
refusing a send other than by a throttle, bounces and complaints (every address is good); the
stream's own trim of records past 24 hours (no reader reads a record that old: its maximum age,
an hour, gives it up first, and a replay past 24 hours is refused as ops refuses it);
IdempotencyTable's TTL deletes (above); a jump past the retention while messages wait in a
queue; two stream invocations of one shard at once (Lambda never does that).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import hashlib
import io
import itertools
import json
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import quote_plus

import boto3
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.idempotency.persistence import base as powertools_base
from aws_lambda_powertools.utilities.idempotency.persistence import (
    datarecord as powertools_datarecord,
)
from aws_lambda_powertools.utilities.idempotency.persistence import (
    dynamodb as powertools_dynamodb,
)
from botocore.exceptions import ClientError
from moto.core import utils as moto_utils
from moto.sqs import models as moto_sqs
from shared import ingest, keys
from shared.aws import batch_claims, send_claims
from shared.aws import mail as shared_mail

from emulator.core.filters import FilterCriteria
from emulator.delivery.stream_poller import created_at
from emulator.delivery.stream_poller import lambda_record as stream_lambda_record
from emulator.services import delivery_failures
from emulator.services import dynamodbstreams as emulator_streams
from emulator.services import sqs as emulator_sqs
from harness.events import sqs_event
from harness.in_process import ACCOUNT, REGION, ShrinkingClock, client, load_handler
from harness.stack import StackClient
from ops import cli as ops_cli
from ops import contacts as ops_contacts
from ops import delivery_redrive as ops_delivery_redrive
from ops import fan_out
from ops import files as ops_files
from ops import records as ops_records
from ops import redrive as ops_redrive
from ops import replay as ops_replay
from ops.errors import OpsError
from tests.faults import CallLog, Crash, Throttle, record_calls, throttle
from tests.unit.fanout import fanout_template
from tests.unit.fanout.fanout_template import (
    bus_event,
    deployed,
    pipe_filter,
    resources,
    router_filter,
    selections,
)
from tests.unit.fanout.helpers import create_mail, max_receives
from tests.unit.support import Stack

MODES = fan_out.NAMES
FUNCTION_DIRS = {
    "IngestFunction": "ingest",
    "RouterFunction": "router",
    "LastAgentFunction": "last_agent",
    "SurveyFunction": "survey",
    "GoodwillFunction": "goodwill",
    "NotifierFunction": "notifier",
    "MailSenderFunction": "mail_sender",
    "MailEventsFunction": "mail_events",
}
CONSUMERS = ("LastAgentFunction", "SurveyFunction", "GoodwillFunction")
SENDER = "MailSenderFunction"  # MailQueue (FIFO) -> SES
RECORDER = "MailEventsFunction"  # MailEventsQueue -> MAIL_SENT, the evidence of a send
# The mail sender's call that sends: a crash right after it dies before the claim's save
# (dynamodb:UpdateItem), whichever call of the invocation it is (a notification claimed anew: the
# 3rd; one retried past the wait, its claim retaken: the 6th).
SEND_EMAIL_CALL = "email:SendEmail"
PIPE = "ChangePipe"  # no function: EventBridge's pipe, bus and rules
# What each function calls: the operations a throttle may strike.
OPERATIONS = {
    "IngestFunction": (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:TransactWriteItems",
        "s3:GetObject",
        "s3:PutObject",
        "sqs:SendMessage",
    ),
    "RouterFunction": ("sns:Publish",),
    "LastAgentFunction": (
        "dynamodb:TransactWriteItems",
        "dynamodb:GetItem",
        "dynamodb:Query",
    ),
    "SurveyFunction": ("sqs:SendMessageBatch",),
    "GoodwillFunction": ("dynamodb:PutItem", "sqs:SendMessageBatch"),
    "NotifierFunction": ("dynamodb:PutItem", "dynamodb:UpdateItem", "sns:PublishBatch"),
    SENDER: (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "email:SendEmail",
        "sqs:GetQueueAttributes",
    ),
    RECORDER: ("dynamodb:PutItem",),
}
# template.yaml: every queue a function reads redrives to its dead-letter queue after 5 receives,
# MailQueue after 10
MAX_RECEIVES = 5
# template.yaml's defaults: how long a received message stays invisible (seconds); the mail
# queues take the notify flow's
VISIBILITY_SECONDS = {
    "IngestFunction": 720,
    "NotifierFunction": 60,
    **dict.fromkeys(CONSUMERS, 60),
    SENDER: 60,
    RECORDER: 60,
}
RECEIVES = {
    **dict.fromkeys(VISIBILITY_SECONDS, MAX_RECEIVES),
    SENDER: max_receives("MailQueue"),
    RECORDER: max_receives("MailEventsQueue"),
}
# The most messages a batch of the function's queue holds (its mapping's BatchSize), when below 10
BATCH_SIZES = {SENDER: resources()["MailQueueMapping"]["Properties"]["BatchSize"]}
# One contact row due a survey: the upload of the runs that drive a hard case for sure.
SURVEY_DUE = {
    "contact_id": "c-1",
    "caller": "+15550000001",
    "agent_id": "agent-1",
    "started_at": "2026-11-29T09:00:00Z",
    "ended_at": "2026-11-29T10:00:00Z",
    "updated_at": "2026-11-29T11:00:00Z",
    "disposition": "RESOLVED",
    "wait_seconds": 5,
    "email": "someone@example.com",
    "survey_opt_in": True,
}
RELEASE = ops_records.release  # ops' own, which the model wraps
REDRIVE = ops_redrive.redrive  # ops' own, which the model runs as moto can
REFUSAL = delivery_failures.refusal  # the local stack's queue policies, which the model wraps
# SNS FIFO drops a publish whose deduplication id was accepted less than 5 minutes before.
DEDUPLICATION_SECONDS = 300
# DynamoDB's TTL deletes an expired item as the service, and its stream record says so (GetRecords'
# Identity; Lambda's event spells it {"type": "Service", "principalId": "dynamodb.amazonaws.com"}).
TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
# What the operator's commands call (a throttle may strike them too).
OPS_OPERATIONS = (
    "dynamodb:GetItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "s3:HeadObject",
)


class ModelClock:
    """The test's clock: the real one plus the time the test let pass (seconds to hours, or a
    jump past the contacts' retention). Whatever decides by time reads it: Powertools' claims
    (their in-progress expiry), the notifier's adoption of a claim (shared.aws.batch_claims), the
    mail sender's wait for SES's Send event (shared.aws.send_claims), MAIL_SENT's expiry
    (shared.aws.mail), the ingest's "now" (what the table remembers) and LastAgentFunction's, ops'
    "may have been published", a step's claim held (ops.files) and the stream's 24 hours
    (ops.replay), SNS FIFO's deduplication (FifoSubscriber), the stream records' creation times
    (the local stack's DynamoDB Streams: their age) and SQS (moto's and the local stack's
    fidelity patches: visibility timeouts, retention, FIFO queues' deduplication)."""

    def __init__(self) -> None:
        self.passed = 0.0
        clock = self

        class AnyDatetime(type):
            """isinstance(x, Now) of every datetime (ops' JSON of a record checks it)."""

            def __instancecheck__(cls, instance) -> bool:
                return isinstance(instance, dt.datetime)

        class Now(dt.datetime, metaclass=AnyDatetime):
            @classmethod
            def now(cls, tz=None):
                return dt.datetime.now(tz) + dt.timedelta(seconds=clock.passed)

        self.datetime = Now

    def time(self) -> float:
        return time.time() + self.passed

    def advance(self, seconds: float) -> None:
        self.passed += seconds

    def install(self, monkeypatch) -> None:
        clock = self
        shifted = types.ModuleType("datetime")
        shifted.__dict__.update(vars(dt))
        shifted.datetime = self.datetime
        for module in (powertools_base, powertools_dynamodb, powertools_datarecord):
            monkeypatch.setattr(module, "dt", shifted)
        for module in (batch_claims, send_claims, shared_mail, ops_records, ops_files):
            monkeypatch.setattr(module, "time", types.SimpleNamespace(time=self.time))
        for module in (shared_mail, ops_files, ops_replay, ops_contacts):
            monkeypatch.setattr(module, "datetime", self.datetime)
        monkeypatch.setattr(
            emulator_streams,
            "time",
            types.SimpleNamespace(time=self.time, monotonic=time.monotonic),
        )

        def unix_time(at=None) -> float:
            return moto_utils.unix_time(at) if at else moto_utils.unix_time() + clock.passed

        monkeypatch.setattr(moto_sqs, "unix_time", unix_time)
        monkeypatch.setattr(moto_sqs, "unix_time_millis", lambda at=None: unix_time(at) * 1000)
        monkeypatch.setattr(emulator_sqs, "now_ms", lambda: unix_time() * 1000)

    def install_in_handler(self, module: ModuleType, monkeypatch) -> None:
        """A handler module's own `datetime.now` (the ingest's, LastAgentFunction's) reads it."""
        if getattr(module, "datetime", None) is dt.datetime:
            monkeypatch.setattr(module, "datetime", self.datetime)


class FifoSubscriber:
    """NotificationsTopic and MailQueue, its FIFO subscription (raw delivery), by the model's
    clock: each entry a PublishBatch accepted is delivered to MailQueue (its group and
    deduplication ids), unless an entry with its deduplication id was delivered less than
    DEDUPLICATION_SECONDS before (SNS FIFO's deduplication interval). So a publish repeated an
    hour later is a second message the mail sender receives. While MailQueue refuses the topic
    (`refused`: its policy changed by hand, say), what SNS accepts goes to the subscription's
    dead-letter queue instead, as SNS puts it there (no retries to a refusing queue)."""

    def __init__(self, clock: ModelClock, queue_url: str, dead_letter_queue_url: str):
        self.clock = clock
        self.queue_url = queue_url
        self.dead_letter_queue_url = dead_letter_queue_url
        self.refused = 0  # how many of the next deliveries MailQueue refuses
        self.delivered_at: dict[str, float] = {}  # deduplication id -> its window's start
        self.received: Counter = Counter()  # (kind, contact_id) of each message received
        self.ids: dict[tuple[str, str], str] = {}  # (kind, contact_id) -> notification id
        self.messages: dict[str, list[dict]] = {}  # notification id -> each message's body

    def watch(self, sns) -> None:
        """See what the client's PublishBatch calls send and what the topic accepts."""

        def sending(params, context, **kwargs):
            context["model_entries"] = {e["Id"]: e for e in params["PublishBatchRequestEntries"]}

        def accepted(parsed, context, **kwargs):
            for success in parsed.get("Successful", []):
                self.publish(context["model_entries"][success["Id"]])

        # more specific than the crash's after-call hook (tests.faults): runs first
        sns.meta.events.register("before-parameter-build.sns.PublishBatch", sending)
        sns.meta.events.register("after-call.sns.PublishBatch", accepted)

    def publish(self, entry: dict) -> None:
        now, dedup_id = self.clock.time(), entry["MessageDeduplicationId"]
        first = self.delivered_at.get(dedup_id)
        if first is not None and now - first < DEDUPLICATION_SECONDS:
            return
        self.delivered_at[dedup_id] = now
        body = json.loads(entry["Message"])
        self.received[(body["kind"], body["contact_id"])] += 1
        self.ids[(body["kind"], body["contact_id"])] = body["notification_id"]
        self.messages.setdefault(body["notification_id"], []).append(body)
        url = self.queue_url
        if self.refused:
            self.refused -= 1
            url = self.dead_letter_queue_url
        client("sqs").send_message(
            QueueUrl=url,
            MessageBody=entry["Message"],
            MessageGroupId=entry["MessageGroupId"],
            MessageDeduplicationId=dedup_id,
        )


def stream_readers(mode: str) -> dict[str, FilterCriteria]:
    """Who reads the table's stream in a fan-out mode, each with its mapping's filter."""
    if mode == "lambda":
        return {consumer: selections()[consumer].stream for consumer in CONSUMERS}
    if fan_out.mode(mode).change_pipe:
        return {PIPE: pipe_filter()}
    return {"RouterFunction": router_filter()}


def max_record_age(reader: str) -> int:
    """The reader's MaximumRecordAgeInSeconds (template.yaml): Lambda and the pipe give an older
    record to their OnFailure destination instead of delivering it."""
    found = resources()
    if reader == PIPE:
        stream = found[PIPE]["Properties"]["SourceParameters"]["DynamoDBStreamParameters"]
        return stream["MaximumRecordAgeInSeconds"]
    prefix = "Router" if reader == "RouterFunction" else fanout_template.CONSUMERS[reader]
    return found[f"{prefix}StreamMapping"]["Properties"]["MaximumRecordAgeInSeconds"]


def past_retention(records: list[dict]) -> bool:
    """ops' own decision (ops.replay.check_retention, by the model's clock) on a failed batch:
    its failure record's first arrival is its first record's creation time."""
    first = dt.datetime.fromtimestamp(created_at(records[0]), dt.UTC)
    try:
        ops_replay.check_retention({"approximateArrivalOfFirstRecord": first.isoformat()})
    except ops_replay.PastRetention:
        return True
    return False


def contacts_of(records: list[dict]) -> list[str]:
    """The contact ids of a batch's changes (its CONTACT items' images)."""
    found = {
        image["contact_id"]["S"]
        for record in records
        for image in (record["dynamodb"].get("NewImage"), record["dynamodb"].get("OldImage"))
        if image and image["type"]["S"] == keys.CONTACT
    }
    return sorted(found)


def deployed_properties(consumer: str, resource: str, mode: str) -> dict:
    """The properties of the consumer's <X><resource> as a stack of FanOut ``mode`` deploys them
    (plain JSON values)."""
    name = f"{fanout_template.CONSUMERS[consumer]}{resource}"
    return json.loads(json.dumps(deployed(resources()[name]["Properties"], mode)))


def queue_filters(mode: str) -> dict[str, FilterCriteria]:
    """Each consumer's queue mapping filter (none: every message) in a mode with change queues."""
    return {
        consumer: FilterCriteria.from_mapping(
            deployed_properties(consumer, "QueueMapping", mode).get("FilterCriteria")
        )
        for consumer in CONSUMERS
    }


@dataclass
class Upload:
    """One object version put under incoming/ and the S3 event that announces it."""

    bucket: str
    key: str
    rows: list[dict | str]  # a str is a line as it stands (not a contact)
    version_id: str
    sequencer: str
    event_time: str
    event: str  # the S3 notification body

    @property
    def file_id(self) -> str:
        return f"{self.bucket}/{self.key}#{self.version_id}"


@dataclass
class Environment:
    """An execution environment: the handler module, cold until first used and again after a
    crash, and the log of its AWS calls (where crashes are armed)."""

    function: str
    module: ModuleType
    calls: CallLog
    throttles: list[Throttle] = field(default_factory=list)


class Pipeline:
    def __init__(self, stack: Stack, monkeypatch, mode: str = "lambda"):
        self.stack = stack
        self.monkeypatch = monkeypatch
        self.mode = mode
        self.envs: dict[str, Environment] = {}
        self.filters = stream_readers(mode)
        self.max_ages = {reader: max_record_age(reader) for reader in self.filters}
        self.topic_arn: str | None = None  # ChangeTopic, in router and pipe-topic mode
        # consumer -> its <X>ChangeDeliveryDeadLetterQueue's URL: what the bus or the topic could
        # not deliver to its queue (pipe, router, pipe-topic)
        self.change_delivery_dead_letters = (
            self._change_delivery_dead_letters() if fan_out.mode(mode).delivery_dead_letters else {}
        )
        # consumer -> (its queue's URL, its dead-letter queue's URL), in the modes with queues
        self.change_queues = self._change_queues() if mode != "lambda" else {}
        # pipe: consumer -> its rule on ChangeBus and the rule's target (its queue)
        self.change_rules = self._change_rules() if mode == "pipe" else {}
        # consumer -> how many of the next deliveries of the bus or the topic its queue refuses
        self.refusing: Counter = Counter()
        self._consumer_of_queue = {
            _arn(stack.sqs, self.change_queues[consumer][0]): consumer
            for consumer in self.change_delivery_dead_letters
        }
        self.queue_filters = queue_filters(mode) if mode != "lambda" else {}
        self.clock = ModelClock()
        self.clock.install(monkeypatch)
        # the last hop: MailQueue, MailEventsQueue, their dead-letter queues, SES and its rule
        self.mail = create_mail(stack, monkeypatch)
        self.subscriber = FifoSubscriber(
            self.clock, self.mail.queue_url, self.mail.delivery_dead_letter_queue_url
        )
        # notification id -> times the operator sent it again on purpose (--resend)
        self.resent: Counter = Counter()
        # queue URL -> its dead-letter queue's URL: IngestQueue, NotificationQueue, change queues
        self.dead_letters = self._dead_letter_queues()
        # (stream reader, records): batches the mapping gave up on, in StreamFailureQueue
        self.stream_failures: list[tuple[str, list[dict]]] = []
        # what the example reached: operator commands run (and refused), records given up for
        # their age, TTL's deletes
        self.operator: Counter = Counter()
        self.operator_throttles: list[Throttle] = []
        # the order a round of deliveries follows: ingest, the stream's readers, the consumers
        self.order = [
            "IngestFunction",
            *(reader for reader in self.filters if reader not in CONSUMERS),
            *CONSUMERS,
            "NotifierFunction",
            SENDER,
            RECORDER,
        ]
        self.uploads: list[Upload] = []
        self.held: list[str] = []  # S3 events taken out of the queue, to be delivered late
        self.last_failures: list[str] = []  # what failed in the last round of drain()
        self.started_files: set[str] = set()  # file ids with a processing log, seen so far
        self.must_be_stale: set[str] = set()  # started after a newer version of their key
        self.applied_files: set[str] = set()  # file ids seen PROCESSED, so far
        self.armed: dict[str, int] = {}  # function -> the call its next invocations crash after
        self.calls_made: dict[str, int] = dict.fromkeys(FUNCTION_DIRS, 0)  # most in one call
        self.crashes: list[tuple[str, tuple[str, ...]]] = []  # function, calls it made
        self._sequencers = itertools.count(0x68CA1F3C11A9E200)
        self._seconds = itertools.count()
        stream_arn = stack.dynamodb.describe_table(TableName=stack.contacts_table)["Table"][
            "LatestStreamArn"
        ]
        self._stream_arn = stream_arn
        self._streams = client("dynamodbstreams")
        shards = self._streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        # Per shard: its iterator and the records read so far; per consumer and shard: the
        # records handled (a consumer's shards advance independently, as Lambda's do).
        self._iterators = {
            shard["ShardId"]: self._streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        }
        self._records: dict[str, list[dict[str, Any]]] = {shard: [] for shard in self._iterators}
        self._positions = {reader: dict.fromkeys(self._iterators, 0) for reader in self.filters}
        # the redrive SQS itself does (StartMessageMoveTask, which moto lacks), under ops' own
        # decisions (ops.records lists and refuses before it calls this)
        monkeypatch.setattr(ops_redrive, "redrive", self._move_back)
        # ops contact redrive's delivery to the stream readers (it invokes them through Lambda,
        # the pipe's targets or the topic): the model's readers, filtered as their mappings are
        monkeypatch.setattr(ops_contacts, "deliver", self._deliver_change)
        monkeypatch.setattr(ops_records, "release", self._release)
        # whether a change queue takes what EventBridge or SNS delivers: its policy, or the switch
        monkeypatch.setattr(delivery_failures, "refusal", self._refusal)
        # the stream records of TTL's deletes carry the service's identity, as DynamoDB's do
        self._ttl_deleting = False
        build_record = emulator_streams.build_record

        def ttl_build_record(*args) -> dict:
            record = build_record(*args)
            if self._ttl_deleting:
                record["userIdentity"] = dict(TTL_IDENTITY)
            return record

        monkeypatch.setattr(emulator_streams, "build_record", ttl_build_record)

    def _dead_letter_queues(self) -> dict[str, str]:
        """IngestQueue's and NotificationQueue's dead-letter queues (redrive after MAX_RECEIVES,
        as template.yaml sets them), each change queue's, MailQueue's and MailEventsQueue's."""
        sqs, queues = self.stack.sqs, {}
        for name, url in (
            ("ingest", self.stack.ingest_queue_url),
            ("notifications", self.stack.notification_queue_url),
        ):
            dead = sqs.create_queue(QueueName=f"{name}-dead-letters")["QueueUrl"]
            redrive = {"deadLetterTargetArn": _arn(sqs, dead), "maxReceiveCount": MAX_RECEIVES}
            sqs.set_queue_attributes(
                QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(redrive)}
            )
            queues[url] = dead
        return (
            queues
            | {url: dead for url, dead in self.change_queues.values()}
            | {
                self.mail.queue_url: self.mail.dead_letter_queue_url,
                self.mail.events_queue_url: self.mail.events_dead_letter_queue_url,
            }
        )

    def _change_delivery_dead_letters(self) -> dict[str, str]:
        """Each consumer's <X>ChangeDeliveryDeadLetterQueue: no queue's redrive target, but its
        rule target's DeadLetterConfig (pipe) or its subscription's RedrivePolicy (router,
        pipe-topic)."""
        return {
            consumer: self.stack.sqs.create_queue(QueueName=f"{consumer}-change-delivery-dlq")[
                "QueueUrl"
            ]
            for consumer in CONSUMERS
        }

    def _change_queues(self) -> dict[str, tuple[str, str]]:
        """Each consumer's queue and its dead-letter queue (redrive after MAX_RECEIVES); in router
        and pipe-topic mode ChangeTopic too, each queue subscribed as template.yaml subscribes it
        in the mode (its filter policy, the policy's scope, raw delivery, its RedrivePolicy to the
        consumer's delivery dead-letter queue)."""
        sqs, queues = self.stack.sqs, {}
        for consumer in CONSUMERS:
            dead = sqs.create_queue(QueueName=f"{consumer}-dead-letters")["QueueUrl"]
            redrive = {"deadLetterTargetArn": _arn(sqs, dead), "maxReceiveCount": MAX_RECEIVES}
            url = sqs.create_queue(
                QueueName=f"{consumer}-changes",
                Attributes={"RedrivePolicy": json.dumps(redrive)},
            )["QueueUrl"]
            queues[consumer] = (url, dead)
        if self.mode in ("router", "pipe-topic"):
            sns = client("sns")
            self.topic_arn = sns.create_topic(Name="changes")["TopicArn"]
            self.monkeypatch.setenv("CHANGE_TOPIC_ARN", self.topic_arn)
            for consumer, (url, _) in queues.items():
                subscription = deployed_properties(consumer, "ChangeSubscription", self.mode)
                sns.subscribe(
                    TopicArn=self.topic_arn,
                    Protocol=subscription["Protocol"],
                    Endpoint=_arn(sqs, url),
                    Attributes={
                        "RawMessageDelivery": json.dumps(subscription["RawMessageDelivery"]),
                        "FilterPolicyScope": subscription["FilterPolicyScope"],
                        "FilterPolicy": json.dumps(subscription["FilterPolicy"]),
                        "RedrivePolicy": json.dumps(
                            {
                                "deadLetterTargetArn": _arn(
                                    sqs, self.change_delivery_dead_letters[consumer]
                                )
                            }
                        ),
                    },
                )
        return queues

    def _change_rules(self) -> dict[str, tuple[types.SimpleNamespace, dict]]:
        """pipe: each consumer's rule and its target as template.yaml sets them (InputPath, the
        RetryPolicy), the target's queue and DeadLetterConfig the model's."""
        sqs, rules = self.stack.sqs, {}
        for consumer, (url, _) in self.change_queues.items():
            [target] = deployed_properties(consumer, "ChangeRule", self.mode)["Targets"]
            target |= {
                "Arn": _arn(sqs, url),
                "DeadLetterConfig": {"Arn": _arn(sqs, self.change_delivery_dead_letters[consumer])},
            }
            name = f"{consumer}-changes"
            rule = types.SimpleNamespace(
                name=name, arn=f"arn:aws:events:{REGION}:{ACCOUNT}:rule/changes/{name}"
            )
            rules[consumer] = (rule, target)
        return rules

    # -- S3 --------------------------------------------------------------------------------------
    def upload(
        self,
        key: str,
        rows: list[dict | str],
        moment: int | None = None,
        newline: bool = True,
    ) -> Upload:
        """Rows as lines of a flat export (JSON lines, or CSV under a header row: every value a
        string, an absent one empty), or contact records as Firehose writes them (a newline
        after each with the AppendDelimiterToRecord processor, none without it). The event's
        time is the next second, or `moment` (seconds into the hour: S3's event times need not
        grow with its sequencers across keys)."""
        if key.endswith(".csv"):
            body = csv_export(rows)
        else:
            end = "\n" if newline or key.endswith(".jsonl") else ""
            body = "".join((r if isinstance(r, str) else json.dumps(r)) + end for r in rows)
        response = self.stack.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body.encode())
        second = next(self._seconds) if moment is None else moment
        event_time = f"2026-11-29T12:{second // 60:02d}:{second % 60:02d}.000Z"
        sequencer = f"{next(self._sequencers):018X}"
        record = {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": REGION,
            "eventTime": event_time,
            "eventName": "ObjectCreated:Put",
            "s3": {
                "bucket": {"name": self.stack.bucket},
                "object": {
                    "key": quote_plus(key, safe="/"),
                    "size": len(body),
                    "eTag": hashlib.md5(body.encode()).hexdigest(),
                    "versionId": response["VersionId"],
                    "sequencer": sequencer,
                },
            },
        }
        upload = Upload(
            self.stack.bucket,
            key,
            rows,
            response["VersionId"],
            sequencer,
            event_time,
            json.dumps({"Records": [record]}),
        )
        self.uploads.append(upload)
        self.send_ingest(upload.event)
        return upload

    def send_ingest(self, body: str) -> None:
        self.stack.sqs.send_message(QueueUrl=self.stack.ingest_queue_url, MessageBody=body)

    def hold_ingest_message(self) -> bool:
        """Take one message out of IngestQueue, to deliver it later (S3 delivered it late)."""
        messages = self.stack.sqs.receive_message(
            QueueUrl=self.stack.ingest_queue_url, MaxNumberOfMessages=1, VisibilityTimeout=0
        ).get("Messages", [])
        for message in messages:
            self.stack.sqs.delete_message(
                QueueUrl=self.stack.ingest_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
            self.held.append(message["Body"])
        return bool(messages)

    def release_held(self) -> None:
        while self.held:
            self.send_ingest(self.held.pop(0))

    # -- invocations -----------------------------------------------------------------------------
    def environment(self, function: str, concurrent: bool = False) -> Environment:
        """The function's execution environment; `concurrent`: a second one, for an invocation
        that overlaps another."""
        name = f"{function} (concurrent)" if concurrent else function
        env = self.envs.get(name)
        if env is None:
            self.monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", FUNCTION_DIRS[function])
            module = load_handler(FUNCTION_DIRS[function], self.monkeypatch)
            self.clock.install_in_handler(module, self.monkeypatch)
            if function == "NotifierFunction":
                self.subscriber.watch(module.sns)
            env = self.envs[name] = Environment(function, module, record_calls(module))
        return env

    def throttle(self, function: str, operation: str, times: int) -> Throttle:
        """The environment's next `times` calls of `operation` fail with the throttling error
        (after boto3's own retries)."""
        env = self.environment(function)
        env.throttles.append(throttle(env.module, operation, times))
        return env.throttles[-1]

    def arm_crash(self, function: str, after_call: int) -> None:
        """The function's invocations from now on crash after their `after_call`-th AWS call,
        until one makes that many calls and crashes."""
        self.armed[function] = after_call

    def invoke(
        self,
        function: str,
        event: dict,
        crash_after: int | str | None,
        meanwhile: tuple[int, Any] | None = None,
        concurrent: bool = False,
    ) -> set[str] | None:
        """Run one invocation; the ids of the records it reported as failed (every id of the
        event when all failed), or None when the environment crashed. `meanwhile` (k, run): after
        its k-th call, `run` (another invocation) runs before this one goes on. Its claims are
        held for the time it has left, by the model's clock."""
        env = self.environment(function, concurrent)
        env.calls.calls.clear()
        if not concurrent:
            crash_after = crash_after or self.armed.get(function)
        env.calls.crash_after = crash_after
        env.calls.meanwhile = meanwhile
        try:
            response = env.module.lambda_handler(
                event, ShrinkingClock(cost_ms=9_000, claims_held=True)
            )
        except Crash:
            # the next invocation starts cold
            del self.envs[f"{function} (concurrent)" if concurrent else function]
            if not concurrent:
                self.armed.pop(function, None)
            self.crashes.append((function, tuple(env.calls.calls)))
            return None
        except BatchProcessingError as error:  # every record failed
            self.last_failures.append(f"{function}: all failed: {error.child_exceptions[:1]}")
            return {r.get("messageId") or r["dynamodb"]["SequenceNumber"] for r in event["Records"]}
        finally:
            env.calls.crash_after = None
            env.calls.meanwhile = None
            self.calls_made[function] = max(self.calls_made[function], len(env.calls.calls))
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        if failed:
            self.last_failures.append(f"{function}: {len(failed)} record(s) failed")
        return failed

    # -- SQS mappings ----------------------------------------------------------------------------
    def queue_url(self, function: str) -> str:
        if function == "IngestFunction":
            return self.stack.ingest_queue_url
        if function == "NotifierFunction":
            return self.stack.notification_queue_url
        if function == SENDER:
            return self.mail.queue_url
        if function == RECORDER:
            return self.mail.events_queue_url
        return self.change_queues[function][0]

    def deliver_queue(
        self,
        function: str,
        max_messages: int,
        crash_after: int | str | None,
        twice: bool,
        reverse: bool = False,
        overlap_after: int | None = None,
    ) -> bool:
        """One batch from the function's queue, of at most its mapping's batch size (in reverse
        order: a standard queue keeps none; MailQueue, FIFO, gives each group's in order and
        none of a group with a message in flight); False when the queue was empty. A failed
        message is received again once the model's clock has passed its visibility timeout.
        `overlap_after` k: after the invocation's k-th call, a second invocation (another
        environment) gets the same messages, as when their visibility timeout ended while the
        first ran, and runs to its end; then the first goes on."""
        url = self.queue_url(function)
        messages = self.stack.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(max_messages, BATCH_SIZES.get(function, max_messages)),
            VisibilityTimeout=VISIBILITY_SECONDS[function],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return False
        if reverse and not url.endswith(".fifo"):
            messages.reverse()
        event = sqs_event(messages, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rsplit('/', 1)[-1]}")
        if function in self.queue_filters:
            admitted = [self.queue_filters[function].matches(r) for r in event["Records"]]
            for message in itertools.compress(messages, [not a for a in admitted]):
                # Lambda deletes what the mapping's filter does not admit, uninvoked
                self.stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            messages = list(itertools.compress(messages, admitted))
            event["Records"] = list(itertools.compress(event["Records"], admitted))
            if not messages:
                return True
        every = {m["MessageId"] for m in messages}
        failed: set[str] = set()
        overlapping: dict[str, set[str] | None] = {}

        def overlap() -> None:
            overlapping["outcome"] = self.invoke(function, event, None, concurrent=True)
            self.operator["overlapping invocations"] += 1

        for delivery in range(2 if twice else 1):
            meanwhile = (overlap_after, overlap) if overlap_after and delivery == 0 else None
            crash = crash_after if delivery == 0 else None
            outcome = self.invoke(function, event, crash, meanwhile)
            failed = every if outcome is None else outcome
            if "outcome" in overlapping:  # received last: its receipt handles delete
                failed = every if overlapping["outcome"] is None else overlapping.pop("outcome")
        for message in messages:
            if message["MessageId"] not in failed:
                self.stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if function == "IngestFunction":
            self._watch_new_files()
        return True

    def hold_in_flight(self, function: str) -> bool:
        """A message of the function's queue received by an invocation that never answers (it
        timed out, say): invisible until its visibility timeout ends, while later messages go by
        (in MailQueue, FIFO, none of its group)."""
        messages = self.stack.sqs.receive_message(
            QueueUrl=self.queue_url(function),
            MaxNumberOfMessages=1,
            VisibilityTimeout=VISIBILITY_SECONDS[function],
        ).get("Messages", [])
        return bool(messages)

    def dead_letter(self, function: str, crash_after: int) -> None:
        """A batch of the function's queue fails at each of its receives (its invocation crashes
        after the same call each time, if it gets that far), a visibility timeout apart, until
        SQS moves its messages to the dead-letter queue (at the receive after its maximum)."""
        for _ in range(RECEIVES[function]):
            if not self.deliver_queue(function, 10, crash_after, twice=False):
                return
            self.time_passes(VISIBILITY_SECONDS[function] + 1)

    def mail_queue_refuses_the_topic(self, deliveries: int) -> None:
        """SNS cannot deliver the next `deliveries` notifications to MailQueue (its policy was
        changed by hand): they go to MailDeliveryDeadLetterQueue."""
        self.subscriber.refused = deliveries

    def change_queue_refuses_the_fan_out(self, consumer: str, deliveries: int) -> None:
        """The consumer's queue refuses the next `deliveries` changes of the bus (pipe) or the
        topic (router, pipe-topic), its policy changed by hand: EventBridge puts the event itself
        in <X>ChangeDeliveryDeadLetterQueue, SNS the raw message (the local stack's delivery,
        emulator/services/delivery_failures.py)."""
        self.refusing[consumer] = deliveries

    def _refusal(
        self, queue_arn: str, service: str, source_arn: str
    ) -> delivery_failures.Refusal | None:
        """delivery_failures.refusal, and a change queue refusing while its switch is on."""
        consumer = self._consumer_of_queue.get(queue_arn)
        if consumer is not None and self.refusing[consumer]:
            self.refusing[consumer] -= 1
            self.operator["a change queue refused the fan-out: the change in its delivery DLQ"] += 1
            return delivery_failures.Refusal(
                "NO_PERMISSIONS", f"the policy of {consumer}'s queue does not let {service} send"
            )
        return REFUSAL(queue_arn, service, source_arn)

    def recorder_fails_until_dead_lettered(self) -> None:
        """MailEventsFunction's writes are throttled at every receive of what its queue holds,
        until SQS moves it all to MailEventsDeadLetterQueue (a crash after its one write would
        come too late: the event is recorded)."""
        failing = self.throttle(RECORDER, "dynamodb:PutItem", times=10**6)
        self.time_passes(RECEIVES[RECORDER] * (VISIBILITY_SECONDS[RECORDER] + 1))
        failing.clear()

    @property
    def failure_queues(self) -> list[str]:
        """Every dead-letter queue: each queue's, and those of what a topic or the bus could not
        deliver (no queue's redrive target): MailDeliveryDeadLetterQueue (NotificationsTopic to
        MailQueue) and each consumer's <X>ChangeDeliveryDeadLetterQueue."""
        return [
            *self.dead_letters.values(),
            self.mail.delivery_dead_letter_queue_url,
            *self.change_delivery_dead_letters.values(),
        ]

    def dead_letters_held(self) -> bool:
        return any(self._count(dead) for dead in self.failure_queues)

    def time_passes(self, seconds: float) -> None:
        """The model's clock moves on: visibility timeouts end, claims held by crashed
        invocations expire, SNS's deduplication windows close, claims age. MailEventsQueue's
        mapping polls meanwhile: what the queue holds is received (recorded, or failed by the
        faults armed) as the clock passes each visibility timeout, so a Send event is recorded,
        or dead-lettered after its receives, within the mail sender's wait. (A Send event left
        unreceived for longer is past the design's horizon: docs/design.md, "The last hop".)"""
        step = VISIBILITY_SECONDS[RECORDER] + 1
        left = seconds
        self._recorder_polls()
        while left > 0:
            moving = min(left, step) if self._count(self.mail.events_queue_url) else left
            self.clock.advance(moving)
            left -= moving
            self._recorder_polls()

    def expired(self) -> list[dict[str, dict]]:
        """The keys of ContactsTable's items whose expires_at has passed by the model's clock,
        which DynamoDB's TTL may delete from now on (moto has no TTL sweeper)."""
        pages = self.stack.dynamodb.get_paginator("scan").paginate(
            TableName=self.stack.contacts_table,
            FilterExpression="expires_at < :now",
            ExpressionAttributeValues={":now": {"N": str(int(self.clock.time()))}},
            ProjectionExpression="pk, sk",
        )
        return [item for page in pages for item in page["Items"]]

    def ttl_deletes(self, expired: list[dict[str, dict]]) -> None:
        """DynamoDB's TTL deletes these items, in this order, each one only if it is still
        expired (as TTL checks): a REMOVE on the stream, with the service's identity."""
        self._ttl_deleting = True
        try:
            for key in expired:
                try:
                    self.stack.dynamodb.delete_item(
                        TableName=self.stack.contacts_table,
                        Key=key,
                        ConditionExpression="expires_at < :now",
                        ExpressionAttributeValues={":now": {"N": str(int(self.clock.time()))}},
                    )
                except self.stack.dynamodb.exceptions.ConditionalCheckFailedException:
                    continue
                self.operator["TTL deleted an expired item"] += 1
        finally:
            self._ttl_deleting = False

    def ttl_deletes_every_expired_item(self) -> None:
        """TTL gets to every expired item, and what its deletes change is delivered, until no
        item is expired."""
        while expired := self.expired():
            self.ttl_deletes(expired)
            self.drain()

    def a_day_passes(self, max_rounds: int = 20) -> None:
        """25 hours on, the mappings polling their queues meanwhile: what the queues hold is
        delivered (the faults armed strike; a message failing at every receive ends in its
        dead-letter queue), as time passes each visibility timeout, so that no message waits
        unreceived for days (past its queue's retention, 4 days: the design's horizon)."""
        left = 25 * 3600
        for _ in range(max_rounds):
            self.settle()
            waiting = self.in_flight()
            if not waiting:
                break
            step = min(left, min(waiting) + 1)
            self.time_passes(step)
            left -= step
        self.time_passes(left)

    def _recorder_polls(self) -> None:
        """MailEventsFunction gets every batch its queue shows (the faults armed strike)."""
        while self.deliver_queue(RECORDER, 10, None, twice=False):
            pass

    # -- the operator's commands -----------------------------------------------------------------
    def stack_client(self) -> StackClient:
        """The stack as `python -m ops` sees it (its outputs), on moto. Marked local (no endpoint:
        moto's mock answers), so ops reads its queues without long polls."""
        return StackClient(
            name="model",
            session=boto3.session.Session(region_name=REGION),
            outputs={
                "ContactsBucketName": self.stack.bucket,
                "ContactsTableName": self.stack.contacts_table,
                "IdempotencyTableName": self.stack.idempotency_table,
                "IngestQueueUrl": self.stack.ingest_queue_url,
                "NotificationQueueUrl": self.stack.notification_queue_url,
                f"{ops_records.NOTIFICATION_DLQ}Url": self.dead_letters[
                    self.stack.notification_queue_url
                ],
                "MailQueueUrl": self.mail.queue_url,
                **{f"{name}Url": dead for dead, name in self.redriven_by_ops.items()},
                **{
                    StackClient.consumer_queue(consumer): url
                    for consumer, (url, _) in self.change_queues.items()
                },
                "FanOut": self.mode,
            },
            parameters={"GoodwillWaitSeconds": "600"},
            local=types.SimpleNamespace(endpoint=None, ca_bundle=None),
        )

    @functools.cached_property
    def ops_stack(self) -> StackClient:
        """The test's own reader of the table (never throttled)."""
        return self.stack_client()

    @functools.cached_property
    def operator_stack(self) -> StackClient:
        """The operator's: its clients are the ones a throttle may strike."""
        return self.stack_client()

    def throttle_operator(self, operation: str, times: int) -> None:
        """The operator's next `times` calls of `operation` fail, throttled."""
        stack = self.operator_stack
        clients = types.SimpleNamespace(dynamodb=stack.dynamodb, sqs=stack.sqs, s3=stack.s3)
        self.operator_throttles.append(throttle(clients, operation, times))

    def run_operator(self, command: str, run) -> Any:
        """Run an ops command; its result, or None when ops refused it or a throttled call
        failed it (counted, by what happened)."""
        try:
            result = run()
        except OpsError:
            self.operator[f"{command} refused"] += 1
            return None
        except ClientError:
            self.operator[f"{command} failed (throttled)"] += 1
            return None
        self.operator[command] += 1
        return result

    def file_reprocess(self, upload: Upload) -> bool:
        """`ops file reprocess s3://<bucket>/<key> --version-id <v> --yes` (ops.files) of any file,
        at any step: finished, IN_PROGRESS (its next step queued, failing or held) or not
        processed yet (its S3 event still queued, held or failing: refused); or its refusal (a
        newer version applied to a finished file, a step holding its claim); counted by the
        state of the file's log then."""
        log = self.ops_stack.file_log(upload.file_id)
        state = "no log" if log is None else log["outcome"]["S"]
        url = f"s3://{upload.bucket}/{upload.key}"
        return (
            self.run_operator(
                f"file reprocess ({state})",
                lambda: (
                    ops_files.reprocess(self.operator_stack, url, upload.version_id, confirm=None)
                    or True
                ),
            )
            is not None
        )

    def idempotency_purge(self, target: Upload | str, resend: bool) -> bool:
        """`ops idempotency purge --yes` (ops.records) of a file's step records (IngestFunction,
        whatever their status) or of a notification's record (NotifierFunction, by its id
        KIND#contact_id): a notification published, or claimed too long ago and never recorded,
        is refused unless `--resend`, which the operator may pass; what it lets be sent again is
        allowed once more at the subscriber."""
        args = argparse.Namespace(
            function="NotifierFunction",
            file=None,
            version_id=None,
            notification_id=None,
            kind=None,
            contact_id=None,
            resend=resend,
        )
        if isinstance(target, Upload):
            args.function = "IngestFunction"
            args.file, args.version_id = f"s3://{target.bucket}/{target.key}", target.version_id
        else:
            args.notification_id = target
        flag = " --resend" if resend else ""
        result = self.run_operator(
            f"idempotency purge {args.function}{flag}",
            lambda: ops_records.purge(self.operator_stack, args, None),
        )
        if result is None:
            return False
        return bool(result[0].get("purged"))

    @property
    def mail_dead_letter_queues(self) -> dict[str, str]:
        """The last hop's dead-letter queues: URL -> their name in ops (their stack output's)."""
        return {
            self.mail.dead_letter_queue_url: "MailDeadLetterQueue",
            self.mail.delivery_dead_letter_queue_url: "MailDeliveryDeadLetterQueue",
            self.mail.events_dead_letter_queue_url: "MailEventsDeadLetterQueue",
        }

    @property
    def redriven_by_ops(self) -> dict[str, str]:
        """The dead-letter queues the model redrives through ops' command: the last hop's and
        each consumer's <X>ChangeDeliveryDeadLetterQueue; URL -> their name in ops."""
        return self.mail_dead_letter_queues | {
            url: StackClient.consumer_delivery_dead_letter_queue(consumer).removesuffix("Url")
            for consumer, url in self.change_delivery_dead_letters.items()
        }

    def dlq_redrive(self, resend: bool = False) -> bool:
        """`ops dlq redrive <X>DeadLetterQueue --yes` of every dead-letter queue holding messages:
        NotificationDeadLetterQueue's through ops (ops.records: what was published is listed, what
        was claimed too long ago and never recorded is refused unless `--resend`, which releases
        those claims: each is allowed once more at the subscriber); the last hop's through ops'
        command (ops.cli: no --resend for them): MailDeadLetterQueue's SQS's move back to
        MailQueue, MailEventsDeadLetterQueue's recorded by ops, MailDeliveryDeadLetterQueue's
        ops' own sending on to MailQueue (ops.delivery_redrive); each consumer's
        <X>ChangeDeliveryDeadLetterQueue's through ops' command too, which sends each change to
        the consumer's queue as it would have arrived (ops.delivery_redrive: the bus event's
        detail, the topic's raw message); the change queues' own DLQs are SQS's move, all `ops
        dlq redrive` does for them."""
        moved = False
        for dead, name in self.redriven_by_ops.items():
            if not self._count(dead):
                continue
            args = argparse.Namespace(
                queue=name, rate=None, dry_run=False, resend=False, yes=True, json=True
            )
            result = self.run_operator(
                f"dlq redrive {name}",
                lambda args=args: ops_cli.dlq_redrive(self.operator_stack, args),
            )
            moved |= result is not None
        for url, dead in self.dead_letters.items():
            if dead in self.redriven_by_ops or not self._count(dead):
                continue
            if url != self.stack.notification_queue_url:
                self._move(dead, url)
                self.operator["dlq redrive"] += 1
                moved = True
                continue
            result = self.run_operator(
                "dlq redrive NotificationDeadLetterQueue" + (" --resend" if resend else ""),
                lambda: ops_records.redrive_notifications(
                    self.operator_stack,
                    None,
                    dry_run=False,
                    resend=resend,
                    confirm=None,
                    progress=False,
                ),
            )
            moved |= result is not None
        return moved

    def contact_redrive(self, contact_id: str, resend: bool) -> bool:
        """`ops contact redrive <id> --yes` (ops.contacts): the contact's stored state sent to
        the stream's readers again; a notification claimed and never recorded is refused unless
        `--resend`, which releases its claim (allowed once more at the subscriber)."""
        result = self.run_operator(
            "contact redrive" + (" --resend" if resend else ""),
            lambda: ops_contacts.redrive(
                self.operator_stack, contact_id, dry_run=False, resend=resend, confirm=None
            ),
        )
        return result is not None

    def _release(self, layer, found: list[dict]) -> None:
        """ops.records.release, each notification it releases counted as sent again on purpose
        (ops releases a notifier's record only under --resend), as soon as it is deleted: a
        command throttled part way has released some."""
        for data in found:
            RELEASE(layer, [data])
            if "notification_id" in data:
                self.resent[data["notification_id"]] += 1

    def _deliver_change(self, stack, record: dict) -> list[dict]:
        """ops.contacts.deliver, to the model's stream readers."""
        results = []
        for reader, criteria in self.filters.items():
            if not criteria.matches(record):
                results.append({"reader": reader, "outcome": "not admitted"})
                continue
            outcome = "replayed" if self.run_reader(reader, [record], None) == set() else "failed"
            results.append({"reader": reader, "outcome": outcome})
        return results

    def _count(self, url: str) -> int:
        attributes = self.stack.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(count) for count in attributes.values())

    def _move(self, dead: str, url: str) -> int:
        """SQS's StartMessageMoveTask, done at once: every visible message of `dead` sent back
        to `url` (to a FIFO queue with its group and deduplication ids)."""
        moved = 0
        while messages := self.stack.sqs.receive_message(
            QueueUrl=dead,
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
        ).get("Messages", []):
            for message in messages:
                fifo = {}
                if url.endswith(".fifo"):
                    fifo = {
                        "MessageGroupId": message["Attributes"]["MessageGroupId"],
                        "MessageDeduplicationId": message["Attributes"]["MessageDeduplicationId"],
                    }
                self.stack.sqs.send_message(QueueUrl=url, MessageBody=message["Body"], **fifo)
                self.stack.sqs.delete_message(QueueUrl=dead, ReceiptHandle=message["ReceiptHandle"])
                moved += 1
        return moved

    def _move_back(self, stack, queue: str, rate, *, progress: bool):
        """ops.redrive.redrive, as moto can run it (the local stack's move tasks run on their
        own thread, on the real clock): the dead-letter queue output ``queue`` names, back to
        its source; a delivery dead-letter queue's sent on and MailEventsDeadLetterQueue's
        recorded by ops itself (no move task)."""
        if ops_delivery_redrive.handles(stack, queue):
            return REDRIVE(stack, queue, rate, progress=progress)
        dead = stack.outputs[f"{queue}Url"]
        [url] = [source for source, target in self.dead_letters.items() if target == dead]
        moved = self._move(dead, url)
        return {"queue": queue, "status": "COMPLETED", "moved": moved}, f"{moved} moved", True

    def stream_replay(self, crash_after: int | None = None) -> bool:
        """`ops stream replay`: the oldest batch in StreamFailureQueue, its records invoked again
        (filtered as the mapping filters them: the batch holds only those); a replay that fails
        leaves the batch there for the next one. A batch whose first record is more than 24 h old
        is refused as ops refuses it (`past retention`) and kept (False): the stream no longer
        holds it, the runbook takes over (redrive_past_retention)."""
        if not self.stream_failures:
            return False
        reader, records = self.stream_failures.pop(0)
        if past_retention(records):
            self.stream_failures.append((reader, records))
            self.operator["stream replay refused (past retention)"] += 1
            return False
        outcome = self.run_reader(reader, records, crash_after)
        if outcome is None or outcome:
            self.stream_failures.append((reader, records))
        self.operator["stream replay"] += 1
        return True

    def redrive_past_retention(self, resend: bool) -> bool:
        """docs/operations.md "Stream failures", step 2, for the oldest batch past the stream's
        24 hours: `ops contact redrive` of each contact it holds (with or without --resend), then
        its failure record deleted; kept while a contact still stored was not redriven (refused,
        or throttled): the operator tries again. False when no batch is past retention."""
        for index, (_, records) in enumerate(self.stream_failures):
            if not past_retention(records):
                continue
            left = [
                contact_id
                for contact_id in contacts_of(records)
                if not self.contact_redrive(contact_id, resend) and self.stored(contact_id)
            ]
            if not left:
                del self.stream_failures[index]
                self.operator["stream batch past retention, its contacts redriven"] += 1
            return True
        return False

    def stored(self, contact_id: str) -> bool:
        try:
            ops_contacts.current_item(self.ops_stack, contact_id)
        except OpsError:
            return False
        return True

    def _watch_new_files(self) -> None:
        """Note each file whose processing began after a newer version of its key had: it must
        end STALE (its event came late). Seen between deliveries, so a file another version
        overtook while it was in progress is not held to it. Note too each file seen PROCESSED:
        it was applied, even if a reprocess later finds a newer version and ends it STALE."""
        logs = self.ops_stack.get_items(
            [keys.processing_log_key(file_id) for file_id in {u.file_id for u in self.uploads}]
        )
        started = {log["file_id"]["S"] for log in logs}
        self.applied_files |= {
            log["file_id"]["S"] for log in logs if log["outcome"]["S"] == ingest.PROCESSED
        }
        by_id = {upload.file_id: upload for upload in self.uploads}
        for file_id in started - self.started_files:
            upload = by_id[file_id]
            if any(
                by_id[other].key == upload.key and by_id[other].sequencer > upload.sequencer
                for other in self.started_files
            ):
                self.must_be_stale.add(file_id)
        self.started_files |= started

    # -- stream mappings -------------------------------------------------------------------------
    def _read_stream(self) -> None:
        for shard in self._iterators:
            while True:
                page = self._streams.get_records(ShardIterator=self._iterators[shard], Limit=1000)
                self._iterators[shard] = page["NextShardIterator"]
                if not page["Records"]:
                    break
                self._records[shard] += [
                    stream_lambda_record(raw, self._stream_arn, REGION) for raw in page["Records"]
                ]

    def deliver_stream(
        self,
        reader: str,
        max_records: int,
        crash_after: int | None,
        twice: bool,
        give_up: bool = False,
    ) -> bool:
        """One batch of the reader's first shard with records left; False when it is caught up
        on every shard. `give_up`: the mapping's retries of this batch are exhausted: its
        records go to StreamFailureQueue and the position moves past them."""
        self._read_stream()
        positions = self._positions[reader]
        pending = [shard for shard in self._records if positions[shard] < len(self._records[shard])]
        if not pending:
            return False
        shard = pending[0]
        records = self._records[shard]
        position, batch = positions[shard], []
        for record in records[position:]:
            if len(batch) == max_records:
                break
            if self.filters[reader].matches(record):
                batch.append(record)
            elif not batch:
                position += 1  # filtered out before the batch: skipped without an invocation
        positions[shard] = position
        now = self.clock.time()
        aged = list(
            itertools.takewhile(lambda r: now - created_at(r) > self.max_ages[reader], batch)
        )
        if aged:  # given to StreamFailureQueue undelivered (Lambda's RecordAgeExceeded)
            self.stream_failures.append((reader, aged))
            positions[shard] = records.index(aged[-1], position) + 1
            batch = batch[len(aged) :]
            self.operator["stream records past their maximum age"] += 1
        if not batch:
            return True
        if give_up:
            self.stream_failures.append((reader, batch))
            positions[shard] = records.index(batch[-1], position) + 1
            return True
        failed: set[str] | None = set()
        for delivery in range(2 if twice else 1):
            failed = self.run_reader(reader, batch, crash_after if delivery == 0 else None)
        if failed is None:
            return True
        done = next(
            (i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed),
            len(batch),
        )
        if done:
            positions[shard] = records.index(batch[done - 1], position) + 1
        return True

    def run_reader(
        self, reader: str, records: list[dict], crash_after: int | None
    ) -> set[str] | None:
        """A batch of stream records to the reader: a function's invocation, or the pipe: each
        record on the bus, and each rule that matches it sends it to its consumer's queue (the
        local stack's delivery: a queue that refuses, the event to the target's DLQ); or
        (pipe-topic) each record published to ChangeTopic, its subscriptions deliver it; or
        (pipe-sfn) ChangeMachine's execution, which fails after its ``crash_after``-th send."""
        if reader != PIPE:
            return self.invoke(reader, {"Records": records}, crash_after)
        if self.mode == "pipe-sfn":
            return self.execute_machine(records, crash_after)
        if self.topic_arn is not None:
            sns = client("sns")
            for record in records:
                sns.publish(TopicArn=self.topic_arn, Message=json.dumps(record))
            return set()
        for record in records:
            event = bus_event(record)
            for consumer, (rule, target) in self.change_rules.items():
                if selections()[consumer].rule.matches(event):
                    # what InputPath $.detail delivers, or the event to the target's DLQ
                    body = json.dumps(record)
                    delivery_failures.deliver_to_target(rule, target, event, body, None)
        return set()

    def execute_machine(self, records: list[dict], fail_after: int | None) -> set[str] | None:
        """ChangeMachine: its Parallel state's branches each send every record to their
        consumer's queue (the branches' sends interleaved: they run at once); None (the batch
        failed) when the execution fails after its ``fail_after``-th send."""
        sends = [
            (url, json.dumps(record, separators=(",", ":")))
            for record in records
            for url, _ in self.change_queues.values()
        ]
        for count, (url, body) in enumerate(sends, start=1):
            self.stack.sqs.send_message(QueueUrl=url, MessageBody=body)
            if count == fail_after:
                return None
        return set()

    def stream_caught_up(self) -> bool:
        self._read_stream()
        return all(
            position == len(self._records[shard])
            for positions in self._positions.values()
            for shard, position in positions.items()
        )

    def received_by_subscriber(self) -> Counter:
        """(kind, contact_id) of every message a FIFO queue subscribed to the topic received."""
        return self.subscriber.received

    def deliver(
        self,
        function: str,
        max_records: int,
        crash_after: int | None,
        twice: bool,
        reverse: bool = False,
    ) -> bool:
        """One batch of the function's event source; False when there was nothing to deliver."""
        if function in self.filters:
            return self.deliver_stream(function, max_records, crash_after, twice)
        return self.deliver_queue(function, max_records, crash_after, twice, reverse)

    def flow(self, crash_function: str | None = None, crash_after: int | None = None) -> bool:
        """A batch of every function in the pipeline's order, the first of `crash_function`'s
        invocations crashing after its `crash_after`-th call; False when nothing moved."""
        moved = False
        for function in self.order:
            crash = crash_after if function == crash_function else None
            moved |= self.deliver(function, 10, crash, twice=False)
        return moved

    def flow_up_to(self, function: str, max_rounds: int = 50) -> None:
        """The functions before `function` in a round's order flow until nothing moves (armed
        crashes and throttles strike on the way): what is on its way reaches its queue."""
        before = self.order[: self.order.index(function)]
        for _ in range(max_rounds):
            if not any([self.deliver(f, 10, None, twice=False) for f in before]):
                return

    def settle(self, max_rounds: int = 50) -> None:
        """Flow until nothing moves (armed crashes and throttles strike on the way)."""
        for _ in range(max_rounds):
            if not self.flow():
                return

    # -- the end -----------------------------------------------------------------------------------
    def drain(self, max_rounds: int = 400) -> None:
        """Deliver everything left, without faults, until nothing moves: held events come
        back, time passes until every message in flight is visible again, and the operator
        replays what StreamFailureQueue holds (a batch past the stream's 24 hours by the runbook:
        its contacts redriven) and redrives the dead-letter queues, sending again on purpose
        (--resend) what may have been published (the design leaves that to them). A change
        queue's refusals not yet used still strike (each is one delivery, and ops' redrive sends
        to the queue itself: the drain ends), so the changes only the drain delivers meet them."""
        self.release_held()
        self.armed.clear()
        self.subscriber.refused = 0
        for throttled in self.operator_throttles:
            throttled.clear()
        for env in self.envs.values():
            for throttled in env.throttles:
                throttled.clear()
        for _ in range(max_rounds):
            self.last_failures.clear()
            if self.flow():
                continue
            if waiting := self.in_flight():
                self.time_passes(min(waiting) + 1)
                continue
            if not (
                self.stream_replay()
                or self.redrive_past_retention(resend=True)
                or self.dlq_redrive(resend=True)
            ):
                return
        raise AssertionError(
            f"the pipeline did not settle in {max_rounds} rounds; still failing: "
            f"{self.last_failures}"
        )

    def in_flight(self) -> list[float]:
        """The visibility timeout of each queue holding a message in flight (seconds; a
        dead-letter queue's: ops looked at it, ops.records.LOOK_SECONDS, or was sending it on,
        ops.delivery_redrive.VISIBILITY_SECONDS)."""
        readers = [f for f in VISIBILITY_SECONDS if f not in CONSUMERS or self.change_queues]
        timeouts = {self.queue_url(f): VISIBILITY_SECONDS[f] for f in readers}
        timeouts |= dict.fromkeys(self.dead_letters.values(), ops_records.LOOK_SECONDS)
        for by_hand in (
            self.mail.delivery_dead_letter_queue_url,
            self.mail.events_dead_letter_queue_url,
            *self.change_delivery_dead_letters.values(),
        ):
            timeouts[by_hand] = ops_delivery_redrive.VISIBILITY_SECONDS
        waiting = []
        for url, timeout in timeouts.items():
            attributes = self.stack.sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]
            if int(attributes["ApproximateNumberOfMessagesNotVisible"]):
                waiting.append(timeout)
        return waiting

    def quiet(self) -> dict[str, int]:
        """Every queue's and dead-letter queue's messages left (visible or in flight), by URL:
        all 0 once quiet."""
        queues = [*self.dead_letters, *self.failure_queues]
        return {url: self._count(url) for url in queues}


# The flat format's fields, the header of a CSV export.
FLAT_FIELDS = (
    "contact_id",
    "caller",
    "agent_id",
    "started_at",
    "ended_at",
    "updated_at",
    "disposition",
    "wait_seconds",
    "email",
    "survey_opt_in",
)


def csv_export(rows: list[dict | str]) -> str:
    """The rows as a CSV export: a header, then each row's values as text (true/false, digits,
    empty for an absent one); a str row is a line as it stands."""
    lines = [",".join(FLAT_FIELDS)]
    for row in rows:
        if isinstance(row, str):
            lines.append(row)
            continue
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(
            [
                str(value).lower() if isinstance(value, bool) else str(value)
                for value in (row.get(name, "") for name in FLAT_FIELDS)
            ]
        )
        lines.append(out.getvalue())
    return "\n".join(lines) + "\n"


def _arn(sqs, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
