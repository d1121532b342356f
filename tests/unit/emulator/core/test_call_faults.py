"""Faults inside a function's AWS calls (crash_after_call, throttle) on the local server, with real
worker processes: the caller registry, the middleware, the throttling errors botocore retries."""

import io
import json
import os
import re
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import botocore.retries.standard
import botocore.retryhandler
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from emulator.__main__ import _parser
from emulator.cli.up import fault_switches
from emulator.core import calls
from emulator.core.faults import Faults
from emulator.lambda_.workers import FunctionSpec, Runtime
from emulator.process import ACCOUNT, REGION
from emulator.server import EmulatorServer
from emulator.services import moto_patches
from tests.unit.emulator.support import pk_table

# Runs the AWS calls the event lists, one client per service (standard retries unless the event
# says otherwise) and appends "<n> done" to the marker file after each call returned.
HANDLER = textwrap.dedent(
    """
    import os, uuid
    import boto3
    from botocore.config import Config

    INSTANCE = uuid.uuid4().hex

    def lambda_handler(event, context):
        retries = event.get("retries", {"mode": "standard", "total_max_attempts": 3})
        config = Config(retries=retries, connect_timeout=2, read_timeout=10)
        results = []
        for index, (service, method, kwargs) in enumerate(event.get("calls", [])):
            client = boto3.client(service, config=config)
            try:
                response = getattr(client, method)(**kwargs)
                attempts = response["ResponseMetadata"].get("RetryAttempts", 0)
                results.append({"ok": True, "retries": attempts})
            except Exception as error:
                code = getattr(error, "response", {}).get("Error", {}).get("Code", repr(error))
                results.append({"ok": False, "error": code})
            if event.get("marker"):
                with open(event["marker"], "a") as out:
                    out.write(f"{index} done\\n")
        return {
            "results": results,
            "instance": INSTANCE,
            "key": os.environ["AWS_ACCESS_KEY_ID"],
        }
    """
)


class Local:
    def __init__(self, server: EmulatorServer, runtime: Runtime):
        self.server = server
        self.runtime = runtime
        self.faults = server.faults
        self.endpoint_url = server.endpoint_url

    def client(self, service: str, key: str = "testing", **retries):
        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=key,
            aws_secret_access_key="testing",
            aws_session_token="testing",
            config=Config(
                retries=retries or {"total_max_attempts": 1},
                account_id_endpoint_mode="disabled",
            ),
        )

    def control(self, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.endpoint_url + "/_emulator/faults", data=data, method="POST" if data else "GET"
        )
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def worker_key(self, logical_id: str) -> str:
        """The access key of a live worker of ``logical_id`` (one is started if none is)."""
        result = self.runtime.invoke(logical_id, {})
        assert result.ok, result.error
        return result.payload["key"]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    code = tmp_path_factory.mktemp("fn")
    (code / "app.py").write_text(HANDLER)
    faults = Faults()
    specs = [
        FunctionSpec(name, f"stack-{name}-X", "app.lambda_handler", code, timeout=30.0)
        for name in ("FnA", "FnB")
    ]
    runtime = Runtime(specs, faults=faults, log_dir=code / "logs")
    server = EmulatorServer(0, faults=faults, runtime=runtime)
    server.start()
    runtime.endpoint_url = server.endpoint_url
    try:
        yield Local(server, runtime)
    finally:
        runtime.close()
        server.stop()
        moto_patches.uninstall()


class Resources:
    def __init__(self, local: Local):
        urllib.request.urlopen(
            urllib.request.Request(local.endpoint_url + "/moto-api/reset", method="POST")
        )
        ddb = local.client("dynamodb")
        ddb.create_table(**pk_table("table"))
        sqs = local.client("sqs")
        self.queue_url = sqs.create_queue(QueueName="queue")["QueueUrl"]
        self.topic_arn = local.client("sns").create_topic(Name="topic")["TopicArn"]
        local.client("s3").create_bucket(Bucket="bucket")
        self.local = local

    def call(self, service: str, pk: str = "k") -> list:
        """One call of ``service`` whose effect ``applied(service, pk)`` can see."""
        return {
            "dynamodb": ["dynamodb", "put_item", {"TableName": "table", "Item": {"pk": {"S": pk}}}],
            "sqs": ["sqs", "send_message", {"QueueUrl": self.queue_url, "MessageBody": pk}],
            "sns": ["sns", "publish", {"TopicArn": self.topic_arn, "Message": pk}],
            "s3": ["s3", "put_object", {"Bucket": "bucket", "Key": pk, "Body": "x"}],
        }[service]

    def applied(self, service: str, pk: str = "k") -> int:
        """How many times the call of ``call(service, pk)`` took effect."""
        local = self.local
        if service == "dynamodb":
            got = local.client("dynamodb").get_item(TableName="table", Key={"pk": {"S": pk}})
            return int("Item" in got)
        if service == "sqs":  # moto's queue, in this process: reading it changes nothing
            queue = sqs_backends[ACCOUNT][REGION].queues["queue"]
            return sum(1 for m in queue._messages if m.body == pk)
        if service == "sns":
            topic = sns_backends[ACCOUNT][REGION].topics[self.topic_arn]
            return sum(1 for n in topic.sent_notifications if n[1] == pk)
        listed = local.client("s3").list_objects_v2(Bucket="bucket").get("Contents", [])
        return sum(1 for o in listed if o["Key"] == pk)


NO_CALL_FAULTS = {"crash_after_call": [], "throttle": [], "crash_invocations": None}


@pytest.fixture
def aws(local):
    local.faults.update(NO_CALL_FAULTS)
    yield Resources(local)
    local.faults.update(NO_CALL_FAULTS)


@pytest.fixture
def no_backoff(monkeypatch):
    """botocore retries in this process without sleeping (both retry modes)."""
    monkeypatch.setattr(
        botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0
    )
    monkeypatch.setattr(
        botocore.retryhandler, "delay_exponential", lambda base, growth_factor, attempts: 0
    )


# --- the caller registry -------------------------------------------------------------------------


def test_each_worker_has_its_own_key_of_the_default_account(local, aws):
    key_a = local.worker_key("FnA")
    key_b = local.worker_key("FnB")
    assert re.fullmatch(r"AKIA[A-Z0-9]{16}", key_a)
    assert key_a != key_b
    logical_id, worker = local.runtime.caller(key_a)
    assert logical_id == "FnA"
    assert worker.alive()
    assert local.runtime.caller("testing") is None
    # moto answers an unknown key as its default account
    identity = local.client("sts", key=key_a).get_caller_identity()
    assert identity["Account"] == ACCOUNT
    queue_arn = local.client("sqs", key=key_a).get_queue_attributes(
        QueueUrl=aws.queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert queue_arn.split(":")[4] == ACCOUNT

    assert local.runtime.kill(key_a) is True
    assert worker.proc.poll() is not None  # killed and waited for
    assert local.runtime.caller(key_a) is None
    assert local.runtime.kill(key_a) is False
    assert local.worker_key("FnA") not in (key_a, key_b)  # a fresh environment, a fresh key


# --- crash_after_call ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("service", "operation"),
    [
        ("dynamodb", "dynamodb:PutItem"),
        ("sqs", "sqs:SendMessage"),
        ("sns", "sns:Publish"),
        ("s3", "s3:PutObject"),
    ],
)
def test_crash_after_call_applies_the_call_then_kills_the_worker(
    local, aws, tmp_path, service, operation
):
    before = local.worker_key("FnA")
    local.faults.update(
        {"crash_after_call": [{"function": "FnA", "operation": operation, "times": 1}]}
    )
    marker = tmp_path / "marker"
    event = {"calls": [aws.call(service)], "marker": str(marker)}
    result = local.runtime.invoke("FnA", event)

    assert not result.ok
    assert result.error["errorType"] == "Runtime.ExitError"
    assert "signal: killed" in result.error["errorMessage"]
    assert aws.applied(service) == 1  # moto applied it
    assert not marker.exists()  # the function never saw the response
    assert local.runtime.caller(before) is None
    assert local.faults.snapshot()["crash_after_call"] == []  # used up

    again = local.runtime.invoke("FnA", event)
    assert again.ok, again.error
    assert again.payload["key"] != before  # a fresh worker
    assert again.payload["results"] == [{"ok": True, "retries": 0}]
    assert marker.read_text() == "0 done\n"


def test_crash_after_call_times_counts_down_over_invocations(local, aws, caplog):
    local.faults.update(
        {"crash_after_call": [{"function": "FnA", "operation": "sqs:SendMessage", "times": 2}]}
    )
    event = {"calls": [aws.call("sqs")]}
    with caplog.at_level("WARNING", logger="emulator.faults"):
        results = [local.runtime.invoke("FnA", event) for _ in range(3)]
    assert [r.ok for r in results] == [False, False, True]
    assert aws.applied("sqs") == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "emulator.faults"]
    assert lines == ["faults: injected crash fn=FnA op=sqs:SendMessage"] * 2


def test_other_functions_and_operations_are_not_crashed(local, aws):
    local.faults.update(
        {"crash_after_call": [{"function": "FnA", "operation": "dynamodb:PutItem", "times": 1}]}
    )
    assert local.runtime.invoke("FnB", {"calls": [aws.call("dynamodb")]}).ok
    assert local.runtime.invoke("FnA", {"calls": [aws.call("sqs")]}).ok
    assert len(local.faults.snapshot()["crash_after_call"]) == 1


# --- crash_invocations ---------------------------------------------------------------------------


def test_crash_invocations_crash_a_share_of_invocations_after_a_random_call(local, aws, tmp_path):
    local.faults.update(
        {"seed": 4, "crash_invocations": {"function": "FnA", "probability": 0.5, "within_calls": 3}}
    )
    outcomes = []
    for n in range(16):
        marker = tmp_path / f"marker-{n}"
        calls = [aws.call("dynamodb", pk=f"{n}-{i}") for i in range(3)]
        result = local.runtime.invoke("FnA", {"calls": calls, "marker": str(marker)})
        done = marker.read_text().count("done") if marker.exists() else 0
        applied = sum(aws.applied("dynamodb", f"{n}-{i}") for i in range(3))
        outcomes.append((result.ok, done, applied))
    crashed = [(done, applied) for ok, done, applied in outcomes if not ok]
    assert 3 <= len(crashed) <= 13  # about half, by the seed's draws
    # A crashed invocation saw the answers of the calls before the one it crashed after, which
    # took effect; nothing after it ran.
    assert all(applied == done + 1 for done, applied in crashed)
    assert {applied for _, applied in crashed} <= {1, 2, 3}
    assert all(done == applied == 3 for ok, done, applied in outcomes if ok)
    # The same seed draws the same crashes.
    local.faults.update({"seed": 4})
    again = [
        local.runtime.invoke(
            "FnA", {"calls": [aws.call("dynamodb", pk=f"b{n}-{i}") for i in range(3)]}
        ).ok
        for n in range(16)
    ]
    assert again == [ok for ok, _, _ in outcomes]
    assert local.runtime.invoke("FnB", {"calls": [aws.call("sqs")]}).ok  # other functions: never


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"probability": 0}, "crash_invocations.probability: must be a number with 0 < p <= 1"),
        ({"probability": 0.1, "within_calls": 0}, "crash_invocations.within_calls: must be"),
        ({"probability": 0.1, "calls": 3}, "crash_invocations.calls: unknown field"),
    ],
)
def test_malformed_crash_invocations_get_a_400_naming_the_field(local, value, message):
    status, answer = local.control({"crash_invocations": value})
    assert status == 400
    assert answer["message"].startswith(message), answer["message"]


# --- throttle ------------------------------------------------------------------------------------

THROTTLES = [
    ("dynamodb", "dynamodb:PutItem", 400, "ProvisionedThroughputExceededException"),
    ("sqs", "sqs:SendMessage", 403, "RequestThrottled"),
    ("sns", "sns:Publish", 400, "ThrottlingException"),
    ("s3", "s3:PutObject", 503, "SlowDown"),
]


@pytest.mark.parametrize("mode", ["legacy", "standard"])
@pytest.mark.parametrize(("service", "operation", "status", "code"), THROTTLES)
def test_a_throttled_call_is_retried_by_botocore_as_throttling(
    local, aws, no_backoff, mode, service, operation, status, code
):
    key = local.worker_key("FnA")
    entry = {"function": "FnA", "operation": operation, "times": 2}
    local.faults.update({"throttle": [entry]})
    service_name, method, kwargs = aws.call(service, "once")
    client = local.client(service_name, key=key, mode=mode, total_max_attempts=3)
    response = getattr(client, method)(**kwargs)
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert aws.applied(service, "once") == 1  # the throttled attempts were not applied
    # standard mode counts it as throttling (1 s backoff base, no retry quota spent)
    assert code in botocore.retries.standard.ThrottledRetryableChecker._THROTTLED_ERROR_CODES

    local.faults.update({"throttle": [{**entry, "times": 3}]})
    service_name, method, kwargs = aws.call(service, "never")
    with pytest.raises(ClientError) as failed:
        getattr(client, method)(**kwargs)
    error = failed.value.response
    assert error["Error"]["Code"] == code
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert error["ResponseMetadata"]["RetryAttempts"] == 2
    assert aws.applied(service, "never") == 0


def test_a_function_retries_a_throttle_and_succeeds(local, aws):
    local.faults.update(
        {"throttle": [{"function": "FnA", "operation": "dynamodb:PutItem", "times": 1}]}
    )
    result = local.runtime.invoke("FnA", {"calls": [aws.call("dynamodb")]})
    assert result.ok, result.error
    assert result.payload["results"] == [{"ok": True, "retries": 1}]
    assert aws.applied("dynamodb") == 1


def test_throttle_then_crash_on_the_same_call(local, aws):
    """Throttle entries come first: the retry of the throttled call is the one that crashes."""
    local.faults.update(
        {
            "throttle": [{"function": "FnA", "operation": "sqs:SendMessage", "times": 1}],
            "crash_after_call": [{"function": "FnA", "operation": "sqs:SendMessage", "times": 1}],
        }
    )
    result = local.runtime.invoke("FnA", {"calls": [aws.call("sqs")]})
    assert result.error["errorType"] == "Runtime.ExitError"
    assert aws.applied("sqs") == 1


def test_probability_with_a_seed_is_reproducible(local, aws):
    key = local.worker_key("FnA")
    client = local.client("sqs", key=key)  # one attempt: a throttle is an error

    def run(seed: int) -> list[bool]:
        local.faults.update(
            {
                "seed": seed,
                "throttle": [
                    {"function": "FnA", "operation": "sqs:SendMessage", "probability": 0.5}
                ],
            }
        )
        outcome = []
        for _ in range(24):
            try:
                client.send_message(QueueUrl=aws.queue_url, MessageBody="p")
                outcome.append(True)
            except ClientError:
                outcome.append(False)
        return outcome

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert first != other
    assert 0 < first.count(False) < len(first)
    assert local.faults.snapshot()["throttle"] == [
        {"function": "FnA", "operation": "sqs:SendMessage", "probability": 0.5}
    ]  # no times: never used up
    assert local.faults.snapshot()["seed"] == 8


def test_wildcards(local, aws):
    key_a, key_b = local.worker_key("FnA"), local.worker_key("FnB")
    local.faults.update(
        {
            "throttle": [
                {"function": "*", "operation": "sqs:*", "times": 2},
                {"function": "FnA", "operation": "*", "times": 1},
            ]
        }
    )
    sqs_b = local.client("sqs", key=key_b)
    for _ in range(2):
        with pytest.raises(ClientError, match="RequestThrottled"):
            sqs_b.send_message(QueueUrl=aws.queue_url, MessageBody="b")
    sqs_b.get_queue_url(QueueName="queue")  # the sqs:* entry is used up
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        local.client("dynamodb", key=key_a).get_item(TableName="table", Key={"pk": {"S": "x"}})
    local.client("dynamodb", key=key_a).get_item(TableName="table", Key={"pk": {"S": "x"}})
    assert local.faults.snapshot()["throttle"] == []


def test_calls_of_anything_but_a_worker_are_never_faulted(local, aws):
    everything = [{"function": "*", "operation": "*"}]
    local.faults.update({"throttle": everything, "crash_after_call": everything})
    for service in ("dynamodb", "sqs", "sns", "s3"):
        service_name, method, kwargs = aws.call(service, "free")
        getattr(local.client(service_name), method)(**kwargs)  # the test's own key
        assert aws.applied(service, "free") == 1
    gone = local.worker_key("FnA")
    local.runtime.kill(gone)
    local.client("sqs", key=gone).get_queue_url(QueueName="queue")  # a dead worker's key
    assert len(local.faults.snapshot()["throttle"]) == 1


# --- the control endpoint ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"crash_after_call": [{"function": "FnA", "operation": "PutItem"}]},
            'crash_after_call[0].operation: must be "<service>:<Operation>"',
        ),
        (
            {"throttle": [{"function": "FnA", "operation": "dynamodb:Putitem"}]},
            "throttle[0].operation: dynamodb has no operation 'Putitem'",
        ),
        (
            {"throttle": [{"function": "FnA", "operation": "nosuch:Thing"}]},
            "throttle[0].operation: unknown service 'nosuch'",
        ),
        (
            {"throttle": [{"function": "FnA", "operation": "lambda:Invoke"}]},
            "throttle[0].operation: the local stack cannot tell lambda operations apart",
        ),
        (
            {"throttle": [{"function": "A", "operation": "*"}, {"operation": "*"}]},
            "throttle[1].function: must be",
        ),
        (
            {"crash_after_call": [{"function": "A", "operation": "*", "times": 0}]},
            "crash_after_call[0].times: must be an integer >= 1",
        ),
        (
            {"throttle": [{"function": "A", "operation": "*", "probability": 1.5}]},
            "throttle[0].probability: must be a number with 0 < p <= 1",
        ),
        (
            {"throttle": [{"function": "A", "operation": "*", "time": 1}]},
            "throttle[0].time: unknown field",
        ),
        ({"throttle": {"function": "A"}}, "throttle: must be a list"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_malformed_call_faults_get_a_400_naming_the_field(local, body, message):
    local.faults.update({"throttle": [{"function": "FnA", "operation": "s3:GetObject"}]})
    before = local.control()[1]
    status, answer = local.control(body)
    assert status == 400
    assert answer["message"].startswith(message), answer["message"]
    assert local.control()[1] == before  # untouched
    local.faults.update({"throttle": []})


def test_call_fault_lists_are_replaced_and_shown(local):
    status, body = local.control(
        {
            "crash_after_call": [
                {"function": "FnA", "operation": "dynamodb:TransactWriteItems", "times": 2},
                {"function": "*", "operation": "s3:*", "probability": 0.05},
            ],
            "throttle": [{"function": "FnB", "operation": "sns:Publish", "times": 1}],
            "seed": 42,
        }
    )
    assert status == 200
    assert body["crash_after_call"] == [
        {"function": "FnA", "operation": "dynamodb:TransactWriteItems", "times": 2},
        {"function": "*", "operation": "s3:*", "probability": 0.05},
    ]
    assert body["seed"] == 42
    _, body = local.control({"crash_after_call": [{"function": "X", "operation": "*"}]})
    assert body["crash_after_call"] == [{"function": "X", "operation": "*"}]
    assert body["throttle"] == [{"function": "FnB", "operation": "sns:Publish", "times": 1}]
    _, body = local.control({"crash_after_call": [], "throttle": []})
    assert body["crash_after_call"] == body["throttle"] == []
    assert body["duplicate_deliveries"] == 1


# --- recognising operations ---------------------------------------------------------------------


def environ(method="GET", path="/", query="", host="127.0.0.1:4566", **headers):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "HTTP_HOST": host}
    env.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    return env


@pytest.mark.parametrize(
    ("env", "operation"),
    [
        (environ("GET", "/b/k"), "GetObject"),
        (environ("GET", "/b/dir/k.csv", "versionId=3"), "GetObject"),
        (environ("HEAD", "/b/k"), "HeadObject"),
        (environ("PUT", "/b/k"), "PutObject"),
        (environ("PUT", "/b/k", x_amz_copy_source="/a/b"), "CopyObject"),
        (environ("POST", "/b/k", "uploads"), "CreateMultipartUpload"),
        (environ("PUT", "/b/k", "partNumber=1&uploadId=u"), "UploadPart"),
        (environ("POST", "/b/k", "uploadId=u"), "CompleteMultipartUpload"),
        (environ("DELETE", "/b/k"), "DeleteObject"),
        (environ("DELETE", "/b/k", "uploadId=u"), "AbortMultipartUpload"),
        (environ("GET", "/b", "versions&prefix=a"), "ListObjectVersions"),
        (environ("GET", "/b/", "list-type=2&prefix=a"), "ListObjectsV2"),
        (environ("GET", "/b"), "ListObjects"),
        (environ("POST", "/b", "delete"), "DeleteObjects"),
        (environ("PUT", "/b"), "CreateBucket"),
        (environ("GET", "/"), "ListBuckets"),
        (environ("GET", "/k", host="b.s3.amazonaws.com"), "GetObject"),
        (environ("GET", "/", "versions", host="b.localhost:4566"), "ListObjectVersions"),
        (environ("GET", "/b", "tagging"), None),
    ],
)
def test_s3_operations(env, operation):
    assert calls.s3_operation(env) == operation


def test_operations_of_json_and_query_requests():
    signed = "AWS4-HMAC-SHA256 Credential=AKIAXXXXXXXX00000001/20260101/us-east-1/sns/aws4_request"
    body = b"Action=Publish&TopicArn=arn&Message=Action%3DDeleteTopic"
    env = {
        "HTTP_AUTHORIZATION": signed + ", SignedHeaders=host, Signature=abc",
        "CONTENT_TYPE": "application/x-www-form-urlencoded; charset=utf-8",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    assert calls.credential(env) == ("AKIAXXXXXXXX00000001", "sns")
    assert calls.operation(env, "sns") == "sns:Publish"
    assert env["wsgi.input"].read() == body  # still there for moto
    target = {"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactWriteItems"}
    assert calls.operation(target, "dynamodb") == "dynamodb:TransactWriteItems"
    assert calls.operation({"QUERY_STRING": "Action=ListTopics"}, "sns") == "sns:ListTopics"
    assert calls.credential({"HTTP_AUTHORIZATION": "Bearer x"}) is None


def test_workers_of_a_runtime_without_a_local_endpoint_keep_the_callers_keys(tmp_path):
    (tmp_path / "app.py").write_text(HANDLER)
    spec = FunctionSpec("Fn", "fn", "app.lambda_handler", Path(tmp_path))
    aws_env = {"AWS_ACCESS_KEY_ID": "AKIAREALKEY", "AWS_SECRET_ACCESS_KEY": "s"}
    with Runtime([spec], log_dir=None, aws_env=aws_env) as runtime:
        result = runtime.invoke("Fn", {})
        assert result.payload["key"] == "AKIAREALKEY"
        assert runtime.caller("AKIAREALKEY") is None
    assert os.environ.get("AWS_ACCESS_KEY_ID") != "AKIAREALKEY"


# --- `up` flags ----------------------------------------------------------------------------------


def test_up_flags_take_call_faults(capsys):
    args = _parser().parse_args(
        [
            "up",
            "--crash-after-call",
            "NotifierFunction:sns:Publish:2",
            "--crash-after-call",
            "*:*",
            "--throttle",
            "IngestFunction:dynamodb:*",
            "--throttle",
            '{"function": "*", "operation": "s3:GetObject", "probability": 0.25}',
            "--fault-seed",
            "5",
        ]
    )
    snapshot = fault_switches(args).snapshot()
    assert snapshot["crash_after_call"] == [
        {"function": "NotifierFunction", "operation": "sns:Publish", "times": 2},
        {"function": "*", "operation": "*"},
    ]
    assert snapshot["throttle"] == [
        {"function": "IngestFunction", "operation": "dynamodb:*"},
        {"function": "*", "operation": "s3:GetObject", "probability": 0.25},
    ]
    assert snapshot["seed"] == 5

    with pytest.raises(SystemExit):
        _parser().parse_args(["up", "--throttle", "Fn:sns"])
    assert "FUNCTION:OPERATION[:TIMES]" in capsys.readouterr().err
    bad = _parser().parse_args(["up", "--throttle", "Fn:sns:Pubish"])
    with pytest.raises(ValueError, match=r"throttle\[0\].operation: sns has no operation"):
        fault_switches(bad)
