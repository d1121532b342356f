"""The real SAM CLI on the built application: every function with each of its sample events, by
`sam local invoke` and by `sam local start-lambda` answering a boto3 invoke, in containers of the
python3.13 arm64 base image, against the local stack (the functions' environment as deployed
there, the SDK pointed at it from the invoke image).
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest

from harness.polling import eventually
from harness.stack import StackClient
from samlocal import sam

EVENTS = sam.ROOT / "events"
SAMPLE = EVENTS / "data" / "contacts-sample.jsonl"
SAMPLE_CALLER = "+14155550101"  # c-1001 and c-1003, last agent agent-ben (README)
SAMPLE_LAST_AGENT = {
    "found": "true",
    "agent_id": "agent-ben",
    "contact_id": "c-1003",
    "ended_at": "2026-11-29T08:52:10.000Z",
}
NO_FAILURES = {"batchItemFailures": []}
POISON_ID = json.loads((EVENTS / "sqs-change-poison.json").read_text())["Records"][1]["messageId"]
# Containers at once: each cold start is one emulated CPU-bound process (2 cores here).
PARALLEL_INVOKES = 2

# Every function with each of its sample events, and its answer. The S3 events are rewritten to
# name the sample file this module uploaded (already ingested: a duplicate, acknowledged); the
# stream records are the ones each consumer's filter admits (tests/unit/fanout/test_events.py).
ROUTE_CASES = {
    ("RouteFunction", "connect-contact-flow.json"): SAMPLE_LAST_AGENT,
    ("RouteFunction", "connect-contact-flow-unknown-caller.json"): {"found": "false"},
}
CASES = {
    ("IngestFunction", "sqs-s3-test-event.json"): NO_FAILURES,
    ("IngestFunction", "sqs-s3-put.json"): NO_FAILURES,
    ("IngestFunction", "sqs-s3-duplicate.json"): NO_FAILURES,
    ("IngestFunction", "sqs-poison.json"): NO_FAILURES,  # reported and acknowledged
    ("LastAgentFunction", "dynamodb-insert-contact-resolved-optin.json"): NO_FAILURES,
    ("LastAgentFunction", "dynamodb-insert-contact-long-wait.json"): NO_FAILURES,
    ("LastAgentFunction", "dynamodb-modify-contact.json"): NO_FAILURES,
    ("LastAgentFunction", "dynamodb-remove-contact.json"): NO_FAILURES,
    ("SurveyFunction", "dynamodb-insert-contact-resolved-optin.json"): NO_FAILURES,
    ("GoodwillFunction", "dynamodb-insert-contact-abandoned.json"): NO_FAILURES,
    ("GoodwillFunction", "dynamodb-insert-contact-long-wait.json"): NO_FAILURES,
    # the same change from the consumer's queue (FanOut pipe or router): the same answer
    ("LastAgentFunction", "sqs-change-contact-resolved-optin.json"): NO_FAILURES,
    ("SurveyFunction", "sqs-change-contact-resolved-optin.json"): NO_FAILURES,
    # a good change and a body that is not one: that message alone is reported
    ("SurveyFunction", "sqs-change-poison.json"): {
        "batchItemFailures": [{"itemIdentifier": POISON_ID}]
    },
    ("GoodwillFunction", "sqs-change-poison.json"): {
        "batchItemFailures": [{"itemIdentifier": POISON_ID}]
    },
    ("NotifierFunction", "sqs-notification.json"): NO_FAILURES,
    # not a notification, and the batch's only record: Powertools fails the whole invocation
    # when every record failed (the batch is retried until the DLQ takes it)
    ("NotifierFunction", "sqs-notification-poison.json"): {"errorType": "BatchProcessingError"},
}


def s3_event_for(sample: Path, stack: StackClient, key: str, version: str, size: int) -> dict:
    """``sample`` (an S3-in-SQS sample event) naming the uploaded object instead."""
    event = json.loads(sample.read_text())
    for record in event["Records"]:
        body = json.loads(record["body"])
        for notification in body["Records"]:
            notification["s3"]["bucket"].update(
                name=stack.bucket, arn=f"arn:aws:s3:::{stack.bucket}"
            )
            notification["s3"]["object"].update(
                key=key, versionId=version, size=size, sequencer=f"{time.time_ns():020X}"
            )
        record["body"] = json.dumps(body)
    return event


@pytest.fixture(scope="module")
def events(stack: StackClient, tmp_path_factory) -> dict[str, Path]:
    """The sample events as invoked: the S3 ones naming the sample file, uploaded here while the
    local stack's own ingest is paused (so the file is `sam local invoke`'s to ingest)."""
    stack.pause_ingest()
    key = f"incoming/sam-local-{uuid.uuid4().hex[:8]}/sample.jsonl"
    body = SAMPLE.read_bytes()
    version = stack.s3.put_object(Bucket=stack.bucket, Key=key, Body=body)["VersionId"]
    folder = tmp_path_factory.mktemp("events")
    paths = {path.name: path for path in EVENTS.glob("*.json")}
    for name in ("sqs-s3-put.json", "sqs-s3-duplicate.json"):
        paths[name] = folder / name
        paths[name].write_text(
            json.dumps(s3_event_for(EVENTS / name, stack, key, version, len(body)))
        )
    paths["uploaded"] = Path(key)
    return paths


def test_sam_local_invoke_ingests_an_uploaded_file(
    stack, events, template, env_vars_file, invoke_image, credentials
):
    response = sam.invoke(
        "IngestFunction",
        events["sqs-s3-put.json"],
        template=template,
        env_vars_file=env_vars_file,
        invoke_image=invoke_image,
        credentials=credentials,
    )
    assert response == NO_FAILURES
    key = str(events["uploaded"])
    version = json.loads(json.loads(events["sqs-s3-put.json"].read_text())["Records"][0]["body"])
    version = version["Records"][0]["s3"]["object"]["versionId"]
    log = stack.file_outcome(key, version)
    assert log is not None, "the container's ingest left no final processing log"
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert (log["rows_ok"], log["rows_rejected"]) == ({"N": "3"}, {"N": "3"}), log
    assert {c["contact_id"]["S"] for c in stack.contacts_of(SAMPLE_CALLER)} >= {"c-1001", "c-1003"}
    # the local stack's stream consumer, from the rows the container wrote
    assert eventually(lambda: stack.route(SAMPLE_CALLER) == SAMPLE_LAST_AGENT, timeout=60)


def test_sam_local_invoke_runs_the_router_of_fan_out_router(
    stack, template, env_vars_file, invoke_image, credentials, tmp_path
):
    """RouterFunction exists only with FanOut=router (its Condition), and this suite's stack runs
    FanOut=lambda. SAM CLI builds and invokes a function whatever its Condition, so the router
    runs here with a topic of its own on the local stack (a queue subscribed with raw delivery,
    as the consumers' queues are): the container publishes the stream record itself."""
    sns, sqs = stack.client("sns"), stack.client("sqs")
    suffix = uuid.uuid4().hex[:8]
    topic_arn = sns.create_topic(Name=f"sam-local-changes-{suffix}")["TopicArn"]
    queue_url = sqs.create_queue(QueueName=f"sam-local-changes-{suffix}")["QueueUrl"]
    try:
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn["Attributes"]["QueueArn"],
            Attributes={"RawMessageDelivery": "true"},
        )
        variables = json.loads(env_vars_file.read_text())
        variables["RouterFunction"] = {
            "POWERTOOLS_SERVICE_NAME": "router",
            "POWERTOOLS_METRICS_NAMESPACE": "ContactCenter",
            "CHANGE_TOPIC_ARN": topic_arn,
        }
        router_env = tmp_path / "env-vars.json"
        router_env.write_text(json.dumps(variables))
        event = EVENTS / "dynamodb-insert-contact-resolved-optin.json"

        response = sam.invoke(
            "RouterFunction",
            event,
            template=template,
            env_vars_file=router_env,
            invoke_image=invoke_image,
            credentials=credentials,
        )

        assert response == NO_FAILURES
        (record,) = json.loads(event.read_text())["Records"]
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=10)["Messages"]
        assert [json.loads(m["Body"]) for m in messages] == [record]
    finally:
        sqs.delete_queue(QueueUrl=queue_url)
        sns.delete_topic(TopicArn=topic_arn)


def by_function(cases) -> dict[str, list[tuple[str, str]]]:
    functions: dict[str, list[tuple[str, str]]] = {}
    for case in cases:
        functions.setdefault(case[0], []).append(case)
    return functions


# Each function's first case is `sam local invoke` (the documented command: a container per
# invocation); its other cases go to `sam local start-lambda`'s warm container of the function
# (a boto3 invoke), a cold start fewer each (~20 s apiece under emulation).
INVOKED = {cases[0] for cases in by_function([*ROUTE_CASES, *CASES]).values()}


@pytest.fixture(scope="module")
def answers(
    stack, events, template, env_vars_file, invoke_image, credentials, tmp_path_factory
) -> dict:
    """Every case answered, a few containers at a time. Route first: the stream records of the
    other cases change the sample caller's last agent."""
    log_path = tmp_path_factory.mktemp("start-lambda") / "start-lambda.log"
    with sam.start_lambda(
        sam.free_port(),
        template=template,
        env_vars_file=env_vars_file,
        invoke_image=invoke_image,
        credentials=credentials,
        log_path=log_path,
    ) as endpoint:
        client = boto3.client(
            "lambda",
            endpoint_url=endpoint,
            region_name=credentials["AWS_DEFAULT_REGION"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=boto3.session.Config(read_timeout=300, retries={"max_attempts": 0}),
        )

        def answer(case):
            function, event = case
            try:
                if case in INVOKED:
                    return sam.invoke(
                        function,
                        events[event],
                        template=template,
                        env_vars_file=env_vars_file,
                        invoke_image=invoke_image,
                        credentials=credentials,
                    )
                response = client.invoke(FunctionName=function, Payload=events[event].read_bytes())
                payload = response["Payload"].read()
                if not payload:  # SAM's answer when the container timed out or never answered
                    said = [line for line in log_path.read_text().splitlines() if function in line]
                    raise sam.SamError(f"start-lambda answered nothing; its log: {said[-5:]}")
                return json.loads(payload)
            except Exception as error:  # reported by the case's test, the others still run
                return error

        def answer_in_turn(cases):  # one warm container per function: its cases one at a time
            return [(case, answer(case)) for case in cases]

        results = {}
        with ThreadPoolExecutor(PARALLEL_INVOKES) as pool:
            for group in (ROUTE_CASES, CASES):
                for answered in pool.map(answer_in_turn, by_function(group).values()):
                    results.update(answered)
    return results


@pytest.mark.parametrize(
    ("case", "expected"),
    [*ROUTE_CASES.items(), *CASES.items()],
    ids=[
        f"{function}-{event}-{'invoke' if (function, event) in INVOKED else 'start-lambda'}"
        for function, event in [*ROUTE_CASES, *CASES]
    ],
)
def test_every_function_answers_each_sample_event(answers, case, expected):
    answer = answers[case]
    if isinstance(answer, Exception):
        pytest.fail(str(answer), pytrace=False)
    if "errorType" in expected:  # a function error: its type (the message carries a traceback)
        answer = {"errorType": answer.get("errorType")}
    assert answer == expected
