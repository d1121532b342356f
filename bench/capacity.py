"""Capacity model (issue 28): for a contact rate and a fan-out mode, what AWS must provide, what
breaks first, what it costs per million contacts, and which settings to change.

    uv run python -m bench.capacity --contacts-per-second 500 [--fan-out <FanOut mode>]
    uv run python -m bench.capacity --markdown     # the table in docs/performance.md

Arithmetic only, no AWS calls. Its inputs:
- calls per contact as `make bench` measured them (bench/results.json: P2 for the ingest, P3 for
  Survey, Goodwill and the notifier); LastAgentFunction's, which results.json does not carry, are
  measured here the way P3 measures the others (its handler in process under moto, one stream
  batch of contacts, every DynamoDB call counted);
- the share of contacts each consumer acts on, from the bench's own generated workload (Amazon
  Connect's contact records, bench.inprocess.contact_records, one contact per record, as the
  ingest stores them) and the consumers' rules (shared.rules);
- the settings in template.yaml (batch sizes, MaximumConcurrency, ParallelizationFactor, the FIFO
  topic's FifoThroughputScope);
- AWS's documented quotas and us-east-1 list prices, each with the page it comes from (QUOTAS,
  PRICES), and two assumed latencies (CALL_SECONDS, TRANSACTION_SECONDS): AWS publishes none per
  call, and the local stack's timings are moto's, not AWS's.

Concurrency is Little's law: work arriving per second times the seconds each unit keeps a function
busy (its calls, one after another, at the assumed latencies); CPU time and cold starts are left
out, so the concurrency figures are a floor.
"""

import argparse
import copy
import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import boto3

from bench.common import ROOT
from bench.exactly_once_cost import _stream_event
from bench.inprocess import (
    RequestCounter,
    aws_in_process,
    contact_records,
    import_shared,
    lambda_environment,
    load_handler,
    quiet,
    stored_contacts,
)
from emulator.deploy.translate import load_template
from emulator.process import REGION
from harness.in_process import FakeLambdaContext, create_resources
from ops import fan_out

RESULTS = ROOT / "bench" / "results.json"
TEMPLATE = ROOT / "template.yaml"
MODES = fan_out.NAMES
PIPE_MODES = tuple(m.name for m in fan_out.MODES.values() if m.change_pipe)
DOC_RATES = (50, 500, 5_000)
WORKLOAD_CONTACTS = 20_000  # P5's load: the bench's generated contact records
LAST_AGENT_CONTACTS = 20
MILLION = 1_000_000


# ---- AWS's documented quotas and prices ----


@dataclass(frozen=True)
class Source:
    title: str
    url: str

    def cite(self) -> str:
        """How a figure names its source; `sources` lists every title with its address."""
        return f"[{self.title}]"

    def link(self) -> str:
        return f"[{self.title}]({self.url})"


S3_PERFORMANCE = Source(
    "S3: best practices design patterns, optimizing performance",
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html",
)
S3_EVENTS = Source(
    "S3: Amazon S3 event notifications",
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventNotifications.html",
)
SQS_QUOTAS = Source(
    "SQS: Amazon SQS message quotas",
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html",
)
LAMBDA_SQS_SCALING = Source(
    "Lambda: configuring scaling behavior for SQS event source mappings",
    "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html",
)
LAMBDA_QUOTAS = Source(
    "Lambda quotas", "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
)
LAMBDA_STREAMS = Source(
    "Lambda: using Lambda with DynamoDB (polling and batching streams, ParallelizationFactor)",
    "https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-eventsourcemapping.html",
)
DDB_QUOTAS = Source(
    "DynamoDB: quotas (throughput default quotas, DynamoDB Streams)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html",
)
DDB_ON_DEMAND = Source(
    "DynamoDB on-demand capacity mode (initial throughput and scaling properties)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html",
)
DDB_PARTITIONS = Source(
    "DynamoDB: my on-demand table has throttling (per-partition maximum)",
    "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb",
)
DDB_TRANSACTIONS = Source(
    "DynamoDB: capacity management for transactions",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html",
)
DDB_STREAMS = Source(
    "DynamoDB Streams and AWS Lambda triggers (no more than two readers per shard)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.Lambda.html",
)
EVENTBRIDGE_QUOTAS = Source(
    "Amazon EventBridge quotas",
    "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html",
)
SNS_QUOTAS = Source(
    "Amazon SNS endpoints and quotas", "https://docs.aws.amazon.com/general/latest/gr/sns.html"
)
SNS_FIFO_HIGH_THROUGHPUT = Source(
    "SNS: high throughput FIFO topics (30,000 messages/s per account in us-east-1, 2025-01)",
    "https://docs.aws.amazon.com/sns/latest/dg/fifo-high-throughput.html",
)
SNS_FIFO_SCOPE = Source(
    "SNS FifoThroughputScope (Topic: 3,000 messages/s and 20 MB/s; MessageGroup: regional limits)",
    "https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_sns.FifoThroughputScope.html",
)
# named in the lines' texts, not by a quota or a price
ALSO_CITED = (S3_EVENTS, SQS_QUOTAS, LAMBDA_STREAMS, DDB_TRANSACTIONS)
LAMBDA_PRICING = Source("AWS Lambda pricing", "https://aws.amazon.com/lambda/pricing/")
DDB_PRICING = Source(
    "Amazon DynamoDB pricing for on-demand capacity",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
)
SQS_PRICING = Source("Amazon SQS pricing", "https://aws.amazon.com/sqs/pricing/")
SNS_PRICING = Source("Amazon SNS pricing", "https://aws.amazon.com/sns/pricing/")
EVENTBRIDGE_PRICING = Source(
    "Amazon EventBridge pricing", "https://aws.amazon.com/eventbridge/pricing/"
)
S3_PRICING = Source("Amazon S3 pricing", "https://aws.amazon.com/s3/pricing/")
SFN_PRICING = Source(
    "AWS Step Functions pricing (Express Workflows)",
    "https://aws.amazon.com/step-functions/pricing/",
)


@dataclass(frozen=True)
class Quota:
    limit: float
    unit: str
    source: Source
    adjustable: bool


QUOTAS = {
    "s3_put_per_prefix": Quota(3_500, "PUT/s per prefix", S3_PERFORMANCE, False),
    "s3_get_per_prefix": Quota(5_500, "GET/s per prefix", S3_PERFORMANCE, False),
    "sqs_mapping_initial": Quota(5, "concurrent batches", LAMBDA_SQS_SCALING, False),
    "sqs_mapping_ramp_per_minute": Quota(300, "more instances a minute", LAMBDA_SQS_SCALING, False),
    "sqs_mapping_max": Quota(1_000, "concurrent batches per mapping", LAMBDA_SQS_SCALING, False),
    "account_concurrency": Quota(1_000, "concurrent executions", LAMBDA_QUOTAS, True),
    "partition_wcu": Quota(1_000, "WCU/s per partition", DDB_PARTITIONS, False),
    "partition_rcu": Quota(3_000, "RCU/s per partition", DDB_PARTITIONS, False),
    "table_wru": Quota(40_000, "WRU/s per on-demand table", DDB_QUOTAS, True),
    "new_table_wru": Quota(4_000, "WRU/s a new on-demand table sustains", DDB_ON_DEMAND, False),
    "transaction_wcu_per_item": Quota(
        2, "WCU per item (1 KB) in a transaction", DDB_TRANSACTIONS, False
    ),
    "readers_per_shard": Quota(2, "concurrent readers per stream shard", DDB_STREAMS, False),
    "parallelization_max": Quota(10, "concurrent batches per shard", LAMBDA_STREAMS, False),
    "put_events": Quota(10_000, "PutEvents requests/s (us-east-1)", EVENTBRIDGE_QUOTAS, True),
    "rule_invocations": Quota(18_750, "target invocations/s (us-east-1)", EVENTBRIDGE_QUOTAS, True),
    "rules_per_bus": Quota(300, "rules per event bus", EVENTBRIDGE_QUOTAS, True),
    "sns_publish": Quota(30_000, "Publish/s, standard topics (us-east-1)", SNS_QUOTAS, True),
    "sns_fifo_topic_scope": Quota(
        3_000, "messages/s per FIFO topic, Topic scope", SNS_FIFO_SCOPE, False
    ),
    "sns_fifo_regional": Quota(
        30_000,
        "messages/s per account, FIFO with FifoThroughputScope=MessageGroup (us-east-1)",
        SNS_FIFO_HIGH_THROUGHPUT,
        True,
    ),
    "sns_fifo_per_group": Quota(300, "messages/s per message group", SNS_QUOTAS, False),
    "sns_filter_policies": Quota(200, "filter policies per topic", SNS_QUOTAS, True),
}


@dataclass(frozen=True)
class Price:
    dollars: float
    per: float  # units the price is for
    unit: str
    source: Source

    def of(self, units: float) -> float:
        return self.dollars * units / self.per


# us-east-1 list prices as of 2026-12, free tiers left out; the ones docs/design.md's cost table
# uses are the same numbers.
PRICES = {
    "lambda_request": Price(0.20, MILLION, "requests", LAMBDA_PRICING),
    "lambda_gb_second_arm": Price(0.0000133334, 1, "GB-s (arm64)", LAMBDA_PRICING),
    "dynamodb_write": Price(0.625, MILLION, "write request units", DDB_PRICING),
    "dynamodb_read": Price(0.125, MILLION, "read request units", DDB_PRICING),
    "sqs_request": Price(0.40, MILLION, "standard queue requests", SQS_PRICING),
    "sns_publish": Price(0.50, MILLION, "standard topic publishes", SNS_PRICING),
    "sns_fifo_publish": Price(0.30, MILLION, "FIFO topic publishes", SNS_PRICING),
    "pipes_event": Price(0.40, MILLION, "Pipes events (64 KB chunks)", EVENTBRIDGE_PRICING),
    "bus_event": Price(1.00, MILLION, "custom bus events", EVENTBRIDGE_PRICING),
    "express_request": Price(1.00, MILLION, "Express executions", SFN_PRICING),
    # $0.06 per GB-hour (the first 1,000 GB-hours a month); 64 MB chunks, 100 ms steps
    "express_gb_second": Price(0.06 / 3600, 1, "Express GB-s", SFN_PRICING),
    "s3_put": Price(0.005, 1_000, "PUT requests", S3_PRICING),
    "s3_get": Price(0.0004, 1_000, "GET requests", S3_PRICING),
}

# Assumed, not measured: the mean latency of one call from a function to DynamoDB, SQS or SNS in
# the same Region ("single-digit milliseconds" is what DynamoDB documents), and of one
# TransactWriteItems (two-phase: slower).
CALL_SECONDS = 0.010
TRANSACTION_SECONDS = 0.025
ASSUMED = (
    f"{CALL_SECONDS * 1000:g} ms per DynamoDB/SQS/SNS call and {TRANSACTION_SECONDS * 1000:g} ms "
    "per TransactWriteItems (AWS publishes no per-call latency); concurrency leaves out CPU time "
    "and cold starts; stream shards = the table's partitions (its write units / 1,000 WCU, at "
    "least the 4 a new on-demand table's 4,000 WRU imply: AWS documents no shard count)"
)
# At load a consumer's queue is read 10 at a time: SendMessage 1, ReceiveMessage and
# DeleteMessageBatch 0.1 each per message (docs/design.md's busy end).
SQS_REQUESTS_PER_MESSAGE = 1.2
# Ingest queue, per file: S3's SendMessage, the poller's ReceiveMessage, the DeleteMessage.
SQS_REQUESTS_PER_FILE = 3
# Utilisation a setting is sized for: the margin is for bursts and retries.
TARGET_UTILISATION = 0.7


# ---- measured calls per contact ----


@dataclass(frozen=True)
class Counts:
    """Calls per contact (or per file, per notification) and the workload's shares."""

    ingest_transactions_per_contact: float
    ingest_items_per_contact: float
    ingest_other_requests_per_file: float  # contacts table: the processing log, the version claim
    file_claim_requests_per_file: float  # idempotency table
    last_agent_transactions_per_contact: float
    last_agent_items_per_transaction: float
    survey_requests_per_notification: float  # DynamoDB
    goodwill_writes_per_notification: float
    notifier_writes_per_notification: float
    share_last_agent: float  # of contacts: LastAgent writes for it
    share_survey: float
    share_goodwill: float
    share_any: float  # passes at least one consumer's filter


def _figure(figures: list[dict], name: str) -> dict:
    for figure in figures:
        if figure["name"] == name:
            return figure
    raise KeyError(f"bench/results.json has no figure {name!r}: run `make bench`")


def _number(pattern: str, text: str, what: str) -> float:
    found = re.search(pattern, text)
    if found is None:
        raise ValueError(f"cannot read {what} from {text!r}")
    return float(found.group(1))


def ingest_counts(figures: list[dict]) -> dict[str, float]:
    """P2's detail: "N requests for R records ... contacts table TransactWriteItems T, PutItem 3,
    GetItem 1 (I items per transaction ...); idempotency table ..."."""
    rows_figure = _figure(figures, "ingest DynamoDB requests per contact record")
    detail = rows_figure["detail"]
    rows = _number(r"for (\d+) records", detail, "records")
    contacts_ops = re.search(r"contacts table ([A-Za-z]+ \d+(?:, [A-Za-z]+ \d+)*)", detail)
    if contacts_ops is None:
        raise ValueError(f"cannot read the contacts table's requests from {detail!r}")
    ops = {
        name: int(count)
        for name, count in (part.rsplit(" ", 1) for part in contacts_ops.group(1).split(", "))
    }
    transactions = ops.pop("TransactWriteItems")
    items_per_transaction = _number(r"\(([\d.]+) items per transaction", detail, "items")
    claim = _figure(figures, "ingest file-claim requests per file")
    return {
        "ingest_transactions_per_contact": transactions / rows,
        "ingest_items_per_contact": items_per_transaction * transactions / rows,
        "ingest_other_requests_per_file": float(sum(ops.values())),
        "file_claim_requests_per_file": float(claim["value"]),
    }


def consumer_counts(figures: list[dict]) -> dict[str, float]:
    """P3's first-delivery figures: DynamoDB requests per notification of each function."""

    def all_requests(function: str) -> float:
        detail = _figure(figures, f"exactly-once writes, first delivery {function}")["detail"]
        return _number(r"all requests ([\d.]+)/notification", detail, f"{function} requests")

    return {
        "survey_requests_per_notification": all_requests("SurveyFunction"),
        "goodwill_writes_per_notification": all_requests("GoodwillFunction"),
        "notifier_writes_per_notification": float(
            _figure(figures, "exactly-once writes, first delivery NotifierFunction")["value"]
        ),
    }


def read_results(path: Path = RESULTS) -> list[dict]:
    return json.loads(path.read_text())["figures"]


def measure_last_agent(contacts: int = LAST_AGENT_CONTACTS) -> dict[str, float]:
    """LastAgentFunction, cold, in process under moto: one stream batch of `contacts` INSERTs of
    voice contacts that reached an agent, each of a caller of its own (P3's batch builder: the
    items the ingest stores of contact records), stored first as the ingest leaves them; every
    DynamoDB call of the handler counted."""
    counter = RequestCounter()
    event = _stream_event("last_agent", contacts)
    with aws_in_process(), counter.installed():
        resources = create_resources("capacity-")
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        for record in event["Records"]:
            dynamodb.put_item(
                TableName=resources.contacts_table,
                Item=copy.deepcopy(record["dynamodb"]["NewImage"]),
            )
        with lambda_environment("LastAgentFunction", resources.function_env()), quiet():
            app = load_handler("LastAgentFunction")
            counter.reset()
            response = app.lambda_handler(event, FakeLambdaContext("LastAgentFunction"))
            calls = counter.reset()
    if response.get("batchItemFailures"):
        raise RuntimeError(f"LastAgentFunction failed records: {response['batchItemFailures']}")
    transactions = [c for c in calls if c.operation == "TransactWriteItems"]
    return {
        "last_agent_transactions_per_contact": len(transactions) / contacts,
        "last_agent_items_per_transaction": sum(c.items for c in transactions)
        / max(1, len(transactions)),
        "last_agent_requests_per_contact": len(calls) / contacts,
    }


def workload_shares(contacts: int = WORKLOAD_CONTACTS) -> dict[str, float]:
    """Of the bench's generated contact records (P5's), as the ingest stores them, the share each
    consumer acts on (shared.rules)."""
    import_shared()
    from shared import rules  # noqa: PLC0415 (the layer is on sys.path now)

    wait = rules.DEFAULT_GOODWILL_WAIT_SECONDS
    generated = stored_contacts(list(contact_records(contacts, seed=23)), wait)
    last_agent = [rules.sets_last_agent(c) for c in generated]
    survey = [rules.survey_due(c) for c in generated]
    goodwill = [rules.gift_card_due(c, wait) for c in generated]
    n = len(generated)
    return {
        "share_last_agent": sum(last_agent) / n,
        "share_survey": sum(survey) / n,
        "share_goodwill": sum(goodwill) / n,
        "share_any": sum(any(flags) for flags in zip(last_agent, survey, goodwill, strict=True))
        / n,
    }


def measured_counts(figures: list[dict] | None = None) -> Counts:
    figures = read_results() if figures is None else figures
    last_agent = measure_last_agent()
    last_agent.pop("last_agent_requests_per_contact")
    return Counts(
        **ingest_counts(figures), **consumer_counts(figures), **last_agent, **workload_shares()
    )


# ---- the template's settings ----


@dataclass(frozen=True)
class Mapping:
    batch_size: int
    parallelization: int  # streams: concurrent batches per shard
    max_concurrency: int | None  # SQS: ScalingConfig.MaximumConcurrency on the deployed stages


@dataclass(frozen=True)
class Settings:
    mappings: dict[str, Mapping]
    fifo_scope: str
    memory_gb: float


def stream_lanes(parallelization_factor: int | None) -> int:
    """Concurrent batches per shard: ParallelizationFactor, 1 by default, at most 10."""
    limit = int(QUOTAS["parallelization_max"].limit)
    return min(limit, max(1, parallelization_factor or 1))


def _deployed(value):
    """A property's value on a deployed stage: !If [IsLocal, local, deployed] -> deployed."""
    if isinstance(value, dict) and "Fn::If" in value and value["Fn::If"][0] == "IsLocal":
        return value["Fn::If"][2]
    return value


def read_settings(path: Path = TEMPLATE) -> Settings:
    resources = load_template(path)["Resources"]
    mappings = {}
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            props = resource["Properties"]
            scaling = _deployed(props.get("ScalingConfig")) or {}
            mappings[logical_id] = Mapping(
                batch_size=int(props["BatchSize"]),
                parallelization=stream_lanes(props.get("ParallelizationFactor")),
                max_concurrency=scaling.get("MaximumConcurrency"),
            )
    pipe = resources["ChangePipe"]["Properties"]["SourceParameters"]["DynamoDBStreamParameters"]
    mappings["ChangePipe"] = Mapping(
        int(pipe["BatchSize"]), stream_lanes(pipe.get("ParallelizationFactor")), None
    )
    memory = load_template(path)["Globals"]["Function"]["MemorySize"]
    return Settings(
        mappings,
        resources["NotificationsTopic"]["Properties"].get("FifoThroughputScope", "Topic"),
        memory / 1024,
    )


# ---- the model ----


@dataclass
class Line:
    service: str
    what: str
    demand: float
    unit: str
    capacity: float
    quota: str  # what the capacity is, cited
    rate_bound: bool = True  # False: a fixed count that does not grow with the rate

    @property
    def utilisation(self) -> float:
        return self.demand / self.capacity if self.capacity else math.inf


@dataclass
class Plan:
    rate: float
    mode: str
    contacts_per_file: int
    lines: list[Line] = field(default_factory=list)
    costs: dict[str, float] = field(default_factory=dict)  # $ per million contacts
    changes: list[str] = field(default_factory=list)
    tuned: dict[str, "Mapping"] = field(default_factory=dict)  # the mappings the changes name
    hot_key: list[str] = field(default_factory=list)

    @property
    def bottleneck(self) -> Line:
        return max((line for line in self.lines if line.rate_bound), key=lambda x: x.utilisation)

    @property
    def over_at_any_rate(self) -> list[Line]:
        return [line for line in self.lines if not line.rate_bound and line.utilisation > 1]


def _q(name: str) -> str:
    quota = QUOTAS[name]
    return f"{quota.limit:,.0f} {quota.unit} ({quota.source.cite()})"


def _concurrency_setting(
    plan: Plan, settings: Settings, mapping: str, required: float, current: int | None
) -> None:
    if current is not None and required > TARGET_UTILISATION * current:
        wanted = min(int(QUOTAS["sqs_mapping_max"].limit), math.ceil(required / TARGET_UTILISATION))
        plan.tuned[mapping] = replace(settings.mappings[mapping], max_concurrency=wanted)
        plan.changes.append(
            f"{mapping}: MaximumConcurrency {current} -> {wanted}: it needs {required:.1f} "
            f"concurrent batches at this rate (sized for {TARGET_UTILISATION:.0%}); Lambda reaches "
            f"it from {QUOTAS['sqs_mapping_initial'].limit:.0f} by "
            f"{QUOTAS['sqs_mapping_ramp_per_minute'].limit:.0f} a minute"
        )


def _stream_consumer(
    plan: Plan,
    settings: Settings,
    mapping: str,
    function: str,
    records: float,
    seconds: float,
    shards: int,
) -> float:
    """A stream mapping: `records`/s reach the function, each keeping it `seconds` busy."""
    lanes = settings.mappings[mapping].parallelization
    required = records * seconds
    plan.lines.append(
        Line(
            "Lambda (stream)",
            f"{function} concurrent batches ({shards} shards x ParallelizationFactor {lanes})",
            required,
            "concurrent",
            shards * lanes,
            f"one batch per shard per ParallelizationFactor, at most {_q('parallelization_max')}; "
            "past it the iterator age grows",
        )
    )
    if required > TARGET_UTILISATION * shards * lanes:
        wanted = math.ceil(required / (TARGET_UTILISATION * shards))
        limit = int(QUOTAS["parallelization_max"].limit)
        if wanted <= limit:
            plan.tuned[mapping] = replace(settings.mappings[mapping], parallelization=wanted)
            plan.changes.append(
                f"{mapping}: ParallelizationFactor {lanes} -> {wanted}: {required:.1f} concurrent "
                f"batches needed over {shards} shards; one key's records stay in order in one lane"
            )
        else:
            plan.changes.append(
                f"{mapping}: even ParallelizationFactor {limit} is short ({required:.1f} batches "
                f"over {shards} shards): fewer calls per record (see the hot-key note) or more "
                "shards (a table's shards follow its partitions, which grow with its throughput)"
            )
    return required


def _queue_consumer(
    plan: Plan, settings: Settings, mapping: str, function: str, messages: float, seconds: float
) -> float:
    current = settings.mappings[mapping].max_concurrency
    required = messages * seconds
    plan.lines.append(
        Line(
            "Lambda (SQS)",
            f"{function} concurrent batches",
            required,
            "concurrent",
            current or QUOTAS["sqs_mapping_max"].limit,
            f"MaximumConcurrency {current} (template.yaml); a mapping reaches at most "
            f"{_q('sqs_mapping_max')}; the standard queue's API calls are nearly unlimited "
            f"({SQS_QUOTAS.cite()})",
        )
    )
    _concurrency_setting(plan, settings, mapping, required, current)
    return required


def plan(
    rate: float,
    mode: str,
    counts: Counts,
    settings: Settings,
    contacts_per_file: int,
) -> Plan:
    if mode not in MODES:
        raise ValueError(f"fan-out mode {mode!r}: one of {', '.join(MODES)}")
    if rate <= 0 or contacts_per_file <= 0:
        raise ValueError("the contact rate and the contacts per file must be positive")
    result = Plan(rate, mode, contacts_per_file)
    c = counts
    files = rate / contacts_per_file
    notifications = rate * (c.share_survey + c.share_goodwill)
    last_agent = rate * c.share_last_agent
    survey, goodwill = rate * c.share_survey, rate * c.share_goodwill
    wcu_tx = QUOTAS["transaction_wcu_per_item"].limit

    def add(service, what, demand, unit, quota, note="", rate_bound=True) -> None:
        """A line against a cited quota (`quota`: a QUOTAS key)."""
        text = _q(quota) + (f"; {note}" if note else "")
        result.lines.append(
            Line(service, what, demand, unit, QUOTAS[quota].limit, text, rate_bound)
        )

    # S3 and the ingest queue: one notification per file
    add("S3", "export PUTs (one prefix)", files, "PUT/s", "s3_put_per_prefix")
    add(
        "S3",
        "ingest GETs (one prefix)",
        files,
        "GET/s",
        "s3_get_per_prefix",
        f"event notifications: no rate quota ({S3_EVENTS.cite()})",
    )
    ingest_seconds = (
        contacts_per_file * c.ingest_transactions_per_contact * TRANSACTION_SECONDS
        + (c.ingest_other_requests_per_file + c.file_claim_requests_per_file + 1) * CALL_SECONDS
    )
    ingest = _queue_consumer(
        result, settings, "IngestQueueMapping", "IngestFunction", files, ingest_seconds
    )

    # the tables: transactional writes cost 2 WCU an item
    table_wcu = (
        rate * c.ingest_items_per_contact * wcu_tx
        + files * c.ingest_other_requests_per_file
        + last_agent
        * c.last_agent_transactions_per_contact
        * c.last_agent_items_per_transaction
        * wcu_tx
        + goodwill * c.goodwill_writes_per_notification
    )
    add(
        "DynamoDB",
        "ContactsTable write units",
        table_wcu,
        "WRU/s",
        "table_wru",
        f"transactions {wcu_tx:.0f} WCU per item ({DDB_TRANSACTIONS.cite()})",
    )
    add(
        "DynamoDB",
        "ContactsTable on a new table (before it has seen this peak)",
        table_wcu,
        "WRU/s",
        "new_table_wru",
        "then up to double the previous peak within 30 minutes",
    )
    idempotency_wcu = (
        notifications * c.notifier_writes_per_notification + files * c.file_claim_requests_per_file
    )
    add("DynamoDB", "IdempotencyTable write units", idempotency_wcu, "WRU/s", "table_wru")
    partitions = max(
        math.ceil(table_wcu / QUOTAS["partition_wcu"].limit),
        int(QUOTAS["new_table_wru"].limit / QUOTAS["partition_wcu"].limit),
    )

    # the fan-out
    stream_consumers = queue_consumers = 0.0
    la_seconds = c.last_agent_transactions_per_contact * TRANSACTION_SECONDS
    survey_seconds = (c.survey_requests_per_notification + 1) * CALL_SECONDS  # + SendMessage
    goodwill_seconds = (c.goodwill_writes_per_notification + 1) * CALL_SECONDS
    consumers = (
        ("LastAgent", last_agent, la_seconds),
        ("Survey", survey, survey_seconds),
        ("Goodwill", goodwill, goodwill_seconds),
    )
    if mode == "lambda":
        add(
            "DynamoDB Streams",
            "readers per shard (one per stream mapping)",
            len(consumers),
            "readers",
            "readers_per_shard",
            "more are throttled (iterator age)",
            rate_bound=False,
        )
        for name, records, seconds in consumers:
            stream_consumers += _stream_consumer(
                result,
                settings,
                f"{name}StreamMapping",
                f"{name}Function",
                records,
                seconds,
                partitions,
            )
        result.changes.append(
            "three stream mappings exceed DynamoDB Streams' two readers per shard at any rate: "
            "past two consumers use FanOut=router or pipe (docs/design.md, Which to pick)"
        )
    else:
        # the pipe passes what some consumer acts on, the router every CONTACT
        changes = rate * c.share_any if mode in PIPE_MODES else rate
        if mode == "pipe":
            per_request = min(settings.mappings["ChangePipe"].batch_size, 10)  # PutEvents: <= 10
            add(
                "EventBridge",
                "PutEvents requests (the pipe to ChangeBus)",
                changes / per_request,
                "requests/s",
                "put_events",
            )
            add(
                "EventBridge",
                "rule target invocations (to the consumer queues)",
                last_agent + survey + goodwill,
                "invocations/s",
                "rule_invocations",
            )
            add(
                "EventBridge",
                "rules on ChangeBus",
                len(consumers),
                "rules",
                "rules_per_bus",
                rate_bound=False,
            )
        if mode in PIPE_MODES:
            per_request = min(settings.mappings["ChangePipe"].batch_size, 10)  # a batch: <= 10
            lanes = settings.mappings["ChangePipe"].parallelization
            result.lines.append(
                Line(
                    "EventBridge Pipes",
                    f"ChangePipe concurrent batches ({partitions} shards)",
                    changes * CALL_SECONDS / per_request,
                    "concurrent",
                    partitions * lanes,
                    f"one batch per shard per ParallelizationFactor ({LAMBDA_STREAMS.cite()})",
                )
            )
        if fan_out.mode(mode).change_topic:
            add("SNS", "ChangeTopic Publish (standard)", changes, "Publish/s", "sns_publish")
            add(
                "SNS",
                "ChangeTopic filter policies",
                len(consumers),
                "policies",
                "sns_filter_policies",
                "5 keys, 150 combinations each (body: weighed by nesting depth)",
                rate_bound=False,
            )
        if mode == "router":
            stream_consumers += _stream_consumer(
                result,
                settings,
                "RouterStreamMapping",
                "RouterFunction",
                changes,
                CALL_SECONDS,
                partitions,
            )
        for name, messages, seconds in consumers:
            queue_consumers += _queue_consumer(
                result, settings, f"{name}QueueMapping", f"{name}Function", messages, seconds
            )

    # the notifier and its FIFO topic
    notifier_seconds = (c.notifier_writes_per_notification + 1) * CALL_SECONDS  # + Publish
    notifier = _queue_consumer(
        result,
        settings,
        "NotificationQueueMapping",
        "NotifierFunction",
        notifications,
        notifier_seconds,
    )
    scope = settings.fifo_scope
    add(
        "SNS",
        f"NotificationsTopic (FIFO, FifoThroughputScope={scope})",
        notifications,
        "messages/s",
        "sns_fifo_regional" if scope == "MessageGroup" else "sns_fifo_topic_scope",
        f"{_q('sns_fifo_per_group')} (the group is the contact_id: 1-2 messages each)",
    )
    total = ingest + stream_consumers + queue_consumers + notifier
    add("Lambda", "account concurrency, all functions", total, "concurrent", "account_concurrency")
    if total > TARGET_UTILISATION * QUOTAS["account_concurrency"].limit:
        result.changes.append(
            f"account concurrency: request more than {QUOTAS['account_concurrency'].limit:,.0f} "
            f"(about {math.ceil(total / TARGET_UTILISATION):,}): RouteFunction shares it"
        )
    if table_wcu > QUOTAS["new_table_wru"].limit:
        doublings = math.ceil(math.log2(table_wcu / QUOTAS["new_table_wru"].limit))
        result.changes.append(
            f"ContactsTable: {table_wcu:,.0f} WRU/s is past what a new on-demand table sustains "
            f"({QUOTAS['new_table_wru'].limit:,.0f}): pre-warm it (warm throughput) or ramp over "
            f"{doublings} doublings of 30 minutes before the peak"
        )
    if table_wcu > TARGET_UTILISATION * QUOTAS["table_wru"].limit:
        result.changes.append(
            f"ContactsTable: request a table-level write throughput quota above "
            f"{QUOTAS['table_wru'].limit:,.0f} WRU/s (needs {table_wcu:,.0f})"
        )

    result.costs = _costs(c, settings, mode, contacts_per_file)
    result.hot_key = _hot_key(c, mode)
    return result


def _costs(c: Counts, settings: Settings, mode: str, contacts_per_file: int) -> dict[str, float]:
    """$ per million contacts at list prices (us-east-1), by service."""
    p = PRICES
    n = MILLION
    files = n / contacts_per_file
    notifications = n * (c.share_survey + c.share_goodwill)
    wcu_tx = QUOTAS["transaction_wcu_per_item"].limit
    writes = (
        n * c.ingest_items_per_contact * wcu_tx
        + files * (c.ingest_other_requests_per_file + c.file_claim_requests_per_file)
        + n
        * c.share_last_agent
        * c.last_agent_transactions_per_contact
        * c.last_agent_items_per_transaction
        * wcu_tx
        + n * c.share_goodwill * c.goodwill_writes_per_notification
        + notifications * c.notifier_writes_per_notification
    )
    sqs = files * SQS_REQUESTS_PER_FILE + notifications * SQS_REQUESTS_PER_MESSAGE
    ingest_seconds = files * (
        contacts_per_file * c.ingest_transactions_per_contact * TRANSACTION_SECONDS
        + (c.ingest_other_requests_per_file + c.file_claim_requests_per_file + 1) * CALL_SECONDS
    )
    consumer_seconds = (
        n * c.share_last_agent * c.last_agent_transactions_per_contact * TRANSACTION_SECONDS
        + n * c.share_survey * (c.survey_requests_per_notification + 1) * CALL_SECONDS
        + n * c.share_goodwill * (c.goodwill_writes_per_notification + 1) * CALL_SECONDS
        + notifications * (c.notifier_writes_per_notification + 1) * CALL_SECONDS
    )
    m = settings.mappings
    invocations = (
        files / m["IngestQueueMapping"].batch_size
        + notifications / m["NotificationQueueMapping"].batch_size
    )
    costs = {"S3 (PUT + GET per file)": p["s3_put"].of(files) + p["s3_get"].of(files)}
    consumed = {
        "LastAgent": n * c.share_last_agent,
        "Survey": n * c.share_survey,
        "Goodwill": n * c.share_goodwill,
    }
    if mode == "lambda":
        invocations += sum(
            consumed[name] / m[f"{name}StreamMapping"].batch_size for name in consumed
        )
    else:
        invocations += sum(
            consumed[name] / m[f"{name}QueueMapping"].batch_size for name in consumed
        )
        sqs += sum(consumed.values()) * SQS_REQUESTS_PER_MESSAGE
    if mode == "pipe":
        changes = n * c.share_any
        costs["EventBridge (Pipes + bus events)"] = p["pipes_event"].of(changes) + p[
            "bus_event"
        ].of(changes)
    if mode == "pipe-topic":  # SNS delivers to SQS at no charge
        changes = n * c.share_any
        costs["EventBridge Pipes (events)"] = p["pipes_event"].of(changes)
        costs["SNS ChangeTopic (Publish)"] = p["sns_publish"].of(changes)
    if mode == "pipe-sfn":
        changes = n * c.share_any
        executions = changes / m["ChangePipe"].batch_size  # one per batch, the sends inside
        # a batch's Map sends one change after another: billed in 100 ms steps, at 64 MB
        billed_seconds = math.ceil(m["ChangePipe"].batch_size * CALL_SECONDS / 0.1) * 0.1
        costs["EventBridge Pipes (events)"] = p["pipes_event"].of(changes)
        costs["Step Functions ChangeMachine (Express)"] = p["express_request"].of(executions) + p[
            "express_gb_second"
        ].of(executions * billed_seconds * 64 / 1024)
        # every piped change goes to every queue; the mappings' filters drop the others
        sqs += (len(consumed) * changes - sum(consumed.values())) * SQS_REQUESTS_PER_MESSAGE
    if mode == "router":
        costs["SNS ChangeTopic (Publish)"] = p["sns_publish"].of(n)
        invocations += n / m["RouterStreamMapping"].batch_size
        consumer_seconds += n * CALL_SECONDS
    costs["DynamoDB (write request units)"] = p["dynamodb_write"].of(writes)
    costs["SQS (requests)"] = p["sqs_request"].of(sqs)
    costs["SNS NotificationsTopic (FIFO publishes)"] = p["sns_fifo_publish"].of(notifications)
    costs["Lambda (requests + GB-s, arm64)"] = p["lambda_request"].of(invocations) + p[
        "lambda_gb_second_arm"
    ].of((ingest_seconds + consumer_seconds) * settings.memory_gb)
    return costs


def _hot_key(c: Counts, mode: str) -> list[str]:
    """One caller, many contacts at once: its CONTACT items and LAST_AGENT share a partition key."""
    import_shared()
    from shared.aws import table  # noqa: PLC0415 (the layer is on sys.path now)

    wcu_tx = QUOTAS["transaction_wcu_per_item"].limit
    ingest_per_contact = wcu_tx  # the CONTACT item; its CONTACT_REF has its own key
    last_agent_per_contact = c.last_agent_items_per_transaction * wcu_tx  # check + put, same key
    per_contact = (
        ingest_per_contact + last_agent_per_contact * c.last_agent_transactions_per_contact
    )
    partition = QUOTAS["partition_wcu"].limit
    lines = [
        f"each contact of one caller costs its partition {per_contact:g} WCU: the ingest's "
        f"transactional put of the CONTACT item ({ingest_per_contact:g}) and LastAgent's "
        f"transaction ({c.last_agent_items_per_transaction:g} items: the ConditionCheck of that "
        f"CONTACT item and the put of LAST_AGENT, {last_agent_per_contact:g} WCU) per contact; "
        f"the partition serves {partition:,.0f} WCU/s ({QUOTAS['partition_wcu'].source.cite()}), "
        f"so one caller throttles past ~{partition / per_contact:,.0f} contacts/s even alone in "
        "its partition; LAST_AGENT is one item, which no split can spread",
        "LastAgent writes for every contact, even when a newer contact of the caller follows "
        "in the same batch: a burst of N contacts is N transactions on one LAST_AGENT item (a "
        "cancelled or failed conditional write still consumes its write units)",
    ]
    if mode == "lambda":
        lines.append(
            f"lambda mode: one caller's changes stay in one shard lane, in order, one transaction "
            f"at a time: ~{1 / (TRANSACTION_SECONDS * c.last_agent_transactions_per_contact):,.0f} "
            "contacts/s per caller at the assumed latency; the callers sharing that lane wait "
            "behind it (iterator age), not the rest of the table"
        )
    else:
        lines.append(
            f"{mode} mode: a standard queue keeps no order, so concurrent LastAgent batches hold "
            "the same caller's contacts and their transactions on LAST_AGENT conflict "
            f"(TransactionConflict); each is retried with jittered backoff up to "
            f"{table.WRITE_ATTEMPTS} attempts, then the record fails and SQS redelivers it; after "
            "5 receives it lands in LastAgentDeadLetterQueue (ops dlq redrive)"
        )
    return lines


# ---- output ----


def render(result: Plan) -> str:
    out = [
        f"Capacity plan: {result.rate:,.0f} contacts/s, FanOut={result.mode}, "
        f"{result.contacts_per_file:,} contacts per file (us-east-1)",
        "",
        f"{'service':<18} {'what':<68} {'demand':>12} {'capacity':>10} {'use':>6}  quota",
    ]
    for line in result.lines:
        use = f"{line.utilisation:.0%}" if line.utilisation < 100 else ">100x"
        out.append(
            f"{line.service:<18} {line.what:<68} {line.demand:>12,.1f} {line.capacity:>10,.0f} "
            f"{use:>6}  {line.unit}; {line.quota}"
        )
    first = result.bottleneck
    out += [
        "",
        f"first bottleneck: {first.service} {first.what} at {first.utilisation:.0%} "
        f"({first.demand:,.1f} of {first.capacity:,.0f} {first.unit})",
    ]
    for line in result.over_at_any_rate:
        out.append(
            f"over at any rate: {line.service} {line.what} ({line.demand:g} of {line.capacity:g})"
        )
    out += ["", "cost per million contacts (list prices, us-east-1):"]
    for service, dollars in result.costs.items():
        out.append(f"  {service:<44} ${dollars:,.2f}")
    out.append(f"  {'total':<44} ${sum(result.costs.values()):,.2f}")
    out += ["", "settings to change:"]
    out += [f"  - {change}" for change in result.changes] or ["  none"]
    out += ["", "a hot caller (many contacts in a short time):"]
    out += [f"  - {line}" for line in result.hot_key]
    out += ["", f"assumed: {ASSUMED}", "", "sources:"]
    out += [f"  [{source.title}] {source.url}" for source in sources()]
    return "\n".join(out)


def sources() -> list[Source]:
    cited = [q.source for q in QUOTAS.values()] + [pr.source for pr in PRICES.values()]
    return list(dict.fromkeys([*cited, *ALSO_CITED]))


def markdown(counts: Counts, settings: Settings, contacts_per_file: int) -> str:
    """The table in docs/performance.md: 50, 500 and 5,000 contacts/s in each mode."""
    rows = [
        "| contacts/s | FanOut | first bottleneck (use) | over at any rate | cost per million "
        "contacts | settings to change |",
        "|---|---|---|---|---|---|",
    ]
    for rate in DOC_RATES:
        for mode in MODES:
            result = plan(rate, mode, counts, settings, contacts_per_file)
            first = result.bottleneck
            over = (
                "; ".join(
                    f"{line.what} ({line.demand:g} of {line.capacity:g})"
                    for line in result.over_at_any_rate
                )
                or "-"
            )
            changes = "<br>".join(result.changes) or "none"
            rows.append(
                f"| {rate:,} | {mode} | {first.service}: {first.what}, {first.utilisation:.0%} "
                f"({first.demand:,.1f} of {first.capacity:,.0f} {first.unit}) | {over} | "
                f"${sum(result.costs.values()):,.2f} | {changes} |"
            )
    counted = (
        f"Calls per contact (from bench/results.json, measured {_measured_at()}, and LastAgent "
        f"in process): ingest {counts.ingest_items_per_contact:g} items per contact in "
        f"transactions ({counts.ingest_transactions_per_contact:g} transactions per contact); "
        f"LastAgent "
        f"{counts.last_agent_transactions_per_contact:g} transaction of "
        f"{counts.last_agent_items_per_transaction:g} items; Goodwill "
        f"{counts.goodwill_writes_per_notification:g} write; notifier "
        f"{counts.notifier_writes_per_notification:g} writes per notification. Shares of "
        f"contacts (the bench's workload): LastAgent {counts.share_last_agent:.3f}, Survey "
        f"{counts.share_survey:.3f}, Goodwill {counts.share_goodwill:.3f}. "
        f"{contacts_per_file:,} contacts per file."
    )
    plans = {
        (rate, mode): plan(rate, mode, counts, settings, contacts_per_file)
        for rate in DOC_RATES
        for mode in MODES
    }
    use = [
        "| what AWS must provide (quota) | "
        + " | ".join(f"{rate:,} {mode}" for rate, mode in plans)
        + " |",
        "|---|" + "---|" * len(plans),
    ]
    keys = list(
        dict.fromkeys(
            (line.service, line.what.split(" (")[0]) for p in plans.values() for line in p.lines
        )
    )
    for service, what in keys:
        cells = []
        for p in plans.values():
            found = [x for x in p.lines if (x.service, x.what.split(" (")[0]) == (service, what)]
            cells.append(f"{found[0].utilisation:.0%}" if found else "-")
        quota = next(
            x.quota
            for p in plans.values()
            for x in p.lines
            if (x.service, x.what.split(" (")[0]) == (service, what)
        )
        use.append(f"| {service}: {what} ({quota}) | " + " | ".join(cells) + " |")
    by_service = {mode: plans[(DOC_RATES[0], mode)].costs for mode in MODES}
    services = list(dict.fromkeys(name for costs in by_service.values() for name in costs))
    cost = [
        "| cost per million contacts | " + " | ".join(MODES) + " |",
        "|---|" + "---|" * len(MODES),
    ]
    for name in [*services, "total"]:
        cells = [
            f"${(sum(c.values()) if name == 'total' else c.get(name, 0)):,.2f}"
            for c in by_service.values()
        ]
        cost.append(f"| {name} | " + " | ".join(cells) + " |")
    quotas = "\n".join(
        f"- {q.limit:,.0f} {q.unit}{' (adjustable)' if q.adjustable else ''}: {q.source.link()}"
        for q in QUOTAS.values()
    )
    prices = "\n".join(
        f"- ${pr.dollars:g} per {pr.per:,.0f} {pr.unit}: {pr.source.link()}"
        for pr in PRICES.values()
    )
    return "\n".join(
        [
            *rows,
            "",
            "Utilisation of each quota (demand / what it allows):",
            "",
            *use,
            "",
            "By service, at list prices (the same at every rate; a month of N million contacts "
            "costs N times this):",
            "",
            *cost,
            "",
            counted,
            f"Assumed: {ASSUMED}.",
            "",
            "Quotas the model uses:",
            "",
            quotas,
            "",
            "Prices (us-east-1, list, 2026-12):",
            "",
            prices,
            "",
            "Also cited:",
            "",
            *(f"- {s.link()}" for s in ALSO_CITED),
            "",
            *(f"[{s.title}]: {s.url}" for s in sources()),  # the tables' [title] links
        ]
    )


def _measured_at() -> str:
    """When P2 and P3 (the calls per contact) were measured: the whole run's date, or a later
    run of their sections alone (results.json's reruns)."""
    results = json.loads(RESULTS.read_text())
    dates = [results["measured_at"]] + [
        rerun["at"]
        for rerun in results.get("reruns", [])
        if {"ingest_cost", "exactly_once_cost"} & set(rerun["sections"])
    ]
    return max(dates)[:10]


def main(argv: list[str] | None = None) -> int:
    from bench.ingest_cost import RECORDS  # noqa: PLC0415 (P2's object size: the default)

    parser = argparse.ArgumentParser(
        prog="python -m bench.capacity", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--contacts-per-second", type=float)
    parser.add_argument("--fan-out", choices=MODES, default="lambda")
    parser.add_argument("--contacts-per-file", type=int, default=RECORDS)
    parser.add_argument("--markdown", action="store_true", help="the table for docs/performance.md")
    args = parser.parse_args(argv)
    if not args.markdown and args.contacts_per_second is None:
        parser.error("--contacts-per-second is required (or --markdown)")
    if args.contacts_per_second is not None and args.contacts_per_second <= 0:
        parser.error("--contacts-per-second must be positive")
    if args.contacts_per_file <= 0:
        parser.error("--contacts-per-file must be positive")
    counts, settings = measured_counts(), read_settings()
    if args.markdown:
        print(markdown(counts, settings, args.contacts_per_file))
    else:
        print(
            render(
                plan(
                    args.contacts_per_second, args.fan_out, counts, settings, args.contacts_per_file
                )
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
