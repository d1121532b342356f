"""The server's front door (emulator/front_door.py): the hot services' calls go straight to moto's
handlers, answered as moto's own server answers them; everything else goes to moto's dispatcher.

Each call here is made by a boto3 client whose requests are answered in process by a WSGI app
(botocore's ``before-send``): the front door, or moto's dispatcher alone, side by side."""

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from moto.core.botocore_stubber import MockRawResponse
from moto.moto_server import werkzeug_app
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client, EnvironBuilder

from emulator.front_door import FrontDoor
from harness.in_process import create_stream_table

pytestmark = pytest.mark.usefixtures("moto_patched", "module_credentials")

ENDPOINT = "http://localhost:4566"
# what differs between two answers of one call: request ids, dates, ids moto makes up
_VARYING_HEADERS = {"date", "x-amzn-requestid", "x-amz-crc32", "x-amz-id-2", "x-amz-request-id"}
_IDS = re.compile(
    rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|<RequestId>[^<]*</RequestId>"
)


class Recording:
    """moto's dispatcher, counting the requests it was handed."""

    def __init__(self) -> None:
        self.app = DomainDispatcherApplication(create_backend_app)
        self.paths: list[str] = []

    def __call__(self, environ, start_response):
        self.paths.append(environ["PATH_INFO"])
        return self.app(environ, start_response)


@pytest.fixture
def dispatcher(monkeypatch) -> Recording:
    monkeypatch.setattr(werkzeug_app, "DISABLE_GLOBAL_CORS", True)  # as the server runs it
    return Recording()


def answered_by(app: Callable) -> Callable[..., AWSResponse]:
    """A before-send handler: the prepared request answered by ``app`` in process."""
    test_client = Client(app)

    def answer(request, **_) -> AWSResponse:
        path = "/" + request.url.split("://", 1)[1].partition("/")[2]
        body = request.body.read() if hasattr(request.body, "read") else request.body
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        response = test_client.open(
            path, method=request.method, headers=headers, data=body or b"", base_url=ENDPOINT
        )
        return AWSResponse(
            request.url,
            response.status_code,
            dict(response.headers),
            MockRawResponse(response.get_data()),
        )

    return answer


def client_of(app: Callable, service: str):
    made = boto3.client(
        service,
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
    )
    made.meta.events.register("before-send", answered_by(app))
    return made


@pytest.fixture
def clients(dispatcher) -> Iterator[Callable[[str], object]]:
    door = FrontDoor(dispatcher)
    yield lambda service: client_of(door, service)


def test_the_pipelines_calls_are_answered_without_moto_s_dispatcher(clients, dispatcher):
    name = f"door-{uuid.uuid4().hex[:8]}"
    dynamodb, sqs, sns, streams = (
        clients(s) for s in ("dynamodb", "sqs", "sns", "dynamodbstreams")
    )
    stream_arn = create_stream_table(dynamodb, name)
    key = {"pk": {"S": "c-1"}, "sk": {"S": "s"}}
    item = key | {"n": {"N": "1"}}
    dynamodb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
        dynamodb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    dynamodb.update_item(
        TableName=name, Key=key, UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )  # fmt: skip
    assert dynamodb.get_item(TableName=name, Key=key)["Item"]["n"] == {"N": "2"}

    events: list[str] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        events += [r["eventName"] for r in streams.get_records(ShardIterator=iterator)["Records"]]
    assert events == ["INSERT", "MODIFY"]  # one key: one shard, in order

    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody="one")
    topic = sns.create_topic(Name=name)["TopicArn"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )  # fmt: skip
    sns.publish(TopicArn=topic, Message="two")
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in received) == ["one", "two"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=f"{name}-missing")

    assert dispatcher.paths == []  # every call above went through the front door


KEY = {"pk": {"S": "a"}, "sk": {"S": "s"}}  # the one item the unchanging calls read


def _query(c, n):
    return c.query(
        TableName=n, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}}
    )


def _put_if_new(c, n):  # the item exists: ConditionalCheckFailedException, nothing written
    return c.put_item(TableName=n, Item=KEY, ConditionExpression="attribute_not_exists(pk)")


def _queue_attributes(c, n):
    return c.get_queue_attributes(
        QueueUrl=c.get_queue_url(QueueName=n)["QueueUrl"], AttributeNames=["All"]
    )


UNCHANGING_CALLS = {
    "DescribeTable": ("dynamodb", lambda c, n: c.describe_table(TableName=n)),
    "GetItem": ("dynamodb", lambda c, n: c.get_item(TableName=n, Key=KEY)),
    "Query": ("dynamodb", _query),
    "PutItem, its condition failing": ("dynamodb", _put_if_new),
    "DescribeTable, no such table": (
        "dynamodb",
        lambda c, n: c.describe_table(TableName=f"{n}-missing"),
    ),
    "GetItem, invalid table name": (
        "dynamodb",
        lambda c, n: c.get_item(TableName="no", Key=KEY),
    ),
    "GetQueueAttributes": ("sqs", _queue_attributes),
    "GetQueueUrl, no such queue": ("sqs", lambda c, n: c.get_queue_url(QueueName=f"{n}-missing")),
    "GetTopicAttributes, no such topic": (
        "sns",
        lambda c, n: c.get_topic_attributes(TopicArn=f"arn:aws:sns:us-east-1:123456789012:{n}-x"),
    ),
}


def last_answer(app: Callable, service: str, call: Callable, name: str) -> AWSResponse:
    seen: list[AWSResponse] = []
    made = client_of(app, service)
    made.meta.events.register("after-call", lambda http_response, **_: seen.append(http_response))
    with contextlib.suppress(made.exceptions.ClientError):  # an error is an answer here
        call(made, name)
    return seen[-1]


@pytest.mark.parametrize("case", UNCHANGING_CALLS)
def test_an_answer_is_moto_s_own(case, dispatcher):
    """Calls that change nothing, made through the front door and through moto's dispatcher
    alone: the same status, headers and body (ids and dates aside), errors included."""
    service, call = UNCHANGING_CALLS[case]
    name = f"same-{uuid.uuid4().hex[:8]}"
    setup_dynamodb, setup_sqs = client_of(dispatcher, "dynamodb"), client_of(dispatcher, "sqs")
    create_stream_table(setup_dynamodb, name)
    setup_dynamodb.put_item(TableName=name, Item=KEY | {"n": {"N": "1"}})
    setup_sqs.create_queue(QueueName=name)
    dispatcher.paths.clear()

    door = last_answer(FrontDoor(dispatcher), service, call, name)
    assert dispatcher.paths == []
    moto = last_answer(dispatcher, service, call, name)
    assert door.status_code == moto.status_code
    assert _IDS.sub(b"<id>", door.content) == _IDS.sub(b"<id>", moto.content)
    assert _headers(door) == _headers(moto)


def _headers(answer: AWSResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in answer.headers.items() if k.lower() not in _VARYING_HEADERS}


def test_every_other_request_goes_to_moto_s_dispatcher(clients, dispatcher):
    s3 = clients("s3")
    bucket = f"door-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    clients("lambda").list_functions()
    unsigned = Client(FrontDoor(dispatcher)).get(f"/{bucket}/k", base_url=ENDPOINT)
    assert unsigned.status_code == 403  # a private object, refused to anyone as S3 refuses it
    paths = [f"/{bucket}", f"/{bucket}/k", "/2015-03-31/functions", f"/{bucket}/k"]
    # unsigned, even a POST / with a hot service's target is moto's dispatcher's to place
    unsigned_dynamodb = EnvironBuilder(
        "/", method="POST", headers={"X-Amz-Target": "DynamoDB_20120810.ListTables"}
    ).get_environ()
    assert FrontDoor.handler(unsigned_dynamodb) is None
    assert dispatcher.paths == paths
