"""emulator/services/responses.py: the JSON fast path gives botocore what moto's serializer gives
it, and moto's handlers what moto's request parser gives them.

Every response of a fast operation is serialized both ways (the fast dump and moto's generic
serializer, from the same result) and both bodies go through botocore's own JSON parser: the
parsed responses must be equal, for DynamoDB items with every attribute type (binary and binary
sets included), SQS messages with string and binary message attributes, and stream records. SNS
Publish and PublishBatch answers (XML) must be moto's bytes."""

import base64
import copy
import datetime as dt

import boto3
import pytest
from botocore import parsers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.base_backend import BackendDict
from moto.core.responses import ActionResult, BaseResponse
from moto.core.serialize import QuerySerializer, XFormedAttributePicker
from moto.core.utils import get_service_model
from moto.sqs import models as sqs_models
from moto.sqs.models import sqs_backends

from emulator.process import REGION
from emulator.services import responses
from harness.in_process import create_stream_table
from tests.unit.emulator.support import fake_credentials

pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture
def compared(monkeypatch):
    """Every fast response, serialized both ways: [(service, operation, fast, generic)]."""
    seen = []

    def both(self, action_result):
        fast = responses.serialized(self, action_result)
        generic = responses._original_serialized(self, action_result)
        seen.append((self.service_name, self._get_action(), fast, generic))
        return fast

    monkeypatch.setattr(BaseResponse, "serialized", both)
    fake_credentials(monkeypatch)
    with mock_aws():
        yield seen


def parse(service: str, operation: str, body: str) -> dict:
    botocore_name = {"dynamodbstreams": "dynamodbstreams"}.get(service, service)
    model = get_service_model(botocore_name).operation_model(operation)
    parser = parsers.create_parser("json")
    return parser.parse(
        {"body": body.encode(), "headers": {}, "status_code": 200}, model.output_shape
    )


def check(seen: list, operations: set[str]) -> None:
    fast_ops = set()
    for service, operation, fast, generic in seen:
        if operation not in responses.FAST_OPERATIONS.get(service, ()):
            continue
        assert fast[0] == generic[0] == 200, operation
        assert fast[1]["Content-Type"] == generic[1]["Content-Type"], operation
        assert parse(service, operation, fast[2]) == parse(service, operation, generic[2]), (
            operation
        )
        assert fast[2] != generic[2] or fast[2] == "{}", operation  # the fast dump made it
        fast_ops.add(operation)
    assert operations <= fast_ops


ITEM = {
    "pk": {"S": "contact#1"},
    "sk": {"N": "7"},
    "s": {"S": "héllo"},
    "n": {"N": "-12.50"},
    "b": {"B": b"\x00\x01binary"},
    "bool": {"BOOL": False},
    "null": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"\x01", b"\x02\x03"]},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"B": b"\xff"}, {"M": {"deep": {"BOOL": True}}}]},
    "m": {"M": {"k": {"S": "v"}, "bin": {"B": b"\x10"}, "list": {"L": []}}},
}


def test_dynamodb_operations_parse_the_same_both_ways(compared):
    ddb = boto3.client("dynamodb", region_name=REGION)
    create_stream_table(ddb, "tbl", sort_key_type="N")
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    ddb.put_item(TableName="tbl", Item=ITEM, ReturnConsumedCapacity="TOTAL")
    ddb.put_item(TableName="tbl", Item=ITEM, ReturnValues="ALL_OLD")
    got = ddb.get_item(TableName="tbl", Key=key, ReturnConsumedCapacity="INDEXES")
    assert got["Item"]["b"] == {"B": b"\x00\x01binary"}
    assert got["Item"]["bs"]["BS"] == [b"\x01", b"\x02\x03"]
    assert got["ConsumedCapacity"]["CapacityUnits"] == 0.5
    assert ddb.get_item(TableName="tbl", Key={"pk": {"S": "none"}, "sk": {"N": "1"}}) is not None
    for i in range(5):
        ddb.put_item(TableName="tbl", Item={**ITEM, "sk": {"N": str(100 + i)}})
    page = ddb.query(
        TableName="tbl",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "contact#1"}},
        Limit=3,
        ReturnConsumedCapacity="TOTAL",
    )
    assert page["Count"] == 3 and "LastEvaluatedKey" in page
    ddb.query(
        TableName="tbl",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "contact#1"}},
        Select="COUNT",
    )
    ddb.update_item(
        TableName="tbl",
        Key=key,
        UpdateExpression="SET s = :s ADD n :one",
        ExpressionAttributeValues={":s": {"S": "new"}, ":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    ddb.update_item(
        TableName="tbl",
        Key=key,
        UpdateExpression="SET s = :s",
        ExpressionAttributeValues={":s": {"S": "newer"}},
        ReturnValues="UPDATED_OLD",
    )
    ddb.batch_write_item(
        RequestItems={
            "tbl": [
                {"PutRequest": {"Item": {**ITEM, "sk": {"N": "200"}}}},
                {"DeleteRequest": {"Key": {"pk": ITEM["pk"], "sk": {"N": "100"}}}},
            ]
        }
    )
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "tbl", "Item": {**ITEM, "sk": {"N": "300"}}}},
            {"Delete": {"TableName": "tbl", "Key": {"pk": ITEM["pk"], "sk": {"N": "101"}}}},
        ]
    )
    scanned = ddb.scan(TableName="tbl", Limit=2, ReturnConsumedCapacity="TOTAL")
    assert scanned["Count"] == 2 and "LastEvaluatedKey" in scanned
    assert ddb.scan(TableName="tbl", Select="COUNT")["Count"] == 6
    ddb.scan(
        TableName="tbl",
        FilterExpression="sk > :n",
        ProjectionExpression="pk, b, l",
        ExpressionAttributeValues={":n": {"N": "101"}},
    )
    got = ddb.batch_get_item(
        RequestItems={"tbl": {"Keys": [key, {"pk": ITEM["pk"], "sk": {"N": "999"}}]}},
        ReturnConsumedCapacity="TOTAL",
    )
    assert got["Responses"]["tbl"][0]["bs"]["BS"] == [b"\x01", b"\x02\x03"]
    got = ddb.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": "tbl", "Key": key}},
            {"Get": {"TableName": "tbl", "Key": {"pk": ITEM["pk"], "sk": {"N": "999"}}}},
        ]
    )
    assert got["Responses"][0]["Item"]["b"] == {"B": b"\x00\x01binary"}
    assert got["Responses"][1] == {}
    ddb.delete_item(TableName="tbl", Key=key, ReturnValues="ALL_OLD")
    ddb.delete_item(TableName="tbl", Key=key)
    check(
        compared,
        {
            "PutItem",
            "GetItem",
            "Query",
            "Scan",
            "BatchGetItem",
            "TransactGetItems",
            "UpdateItem",
            "DeleteItem",
            "BatchWriteItem",
            "TransactWriteItems",
        },
    )

    streams = boto3.client("dynamodbstreams", region_name=REGION)
    arn = ddb.describe_table(TableName="tbl")["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
        streams.get_records(ShardIterator=iterator, Limit=1)
    assert records
    image = records[0]["dynamodb"]["NewImage"]
    assert image["b"] == {"B": b"\x00\x01binary"}  # base64 once on the wire, bytes again here
    assert image["l"]["L"][2] == {"B": b"\xff"}
    check(compared, {"GetRecords"})


def test_sqs_operations_parse_the_same_both_ways(compared):
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    fifo = sqs.create_queue(
        QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    attributes = {
        "text": {"DataType": "String", "StringValue": "héllo"},
        "number": {"DataType": "Number", "StringValue": "12"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffdata"},
    }
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    sqs.send_message(QueueUrl=url, MessageBody='{"json": 1}', MessageAttributes=attributes)
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "one", "MessageAttributes": attributes},
            {"Id": "b", "MessageBody": "two", "DelaySeconds": 1},
        ],
    )
    sqs.send_message(QueueUrl=fifo, MessageBody="f", MessageGroupId="g")
    sqs.send_message_batch(
        QueueUrl=fifo, Entries=[{"Id": "x", "MessageBody": "f2", "MessageGroupId": "g"}]
    )
    received = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
    )["Messages"]
    blob = next(m for m in received if m["Body"] == '{"json": 1}')
    assert blob["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\xffdata"
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages") is None
    sqs.receive_message(QueueUrl=fifo, AttributeNames=["All"], MessageAttributeNames=["text"])
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"], VisibilityTimeout=0
    )
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[1]["ReceiptHandle"])
    result = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "ReceiptHandle": received[2]["ReceiptHandle"]},
            {"Id": "bad", "ReceiptHandle": "not-a-handle"},
        ],
    )
    assert [f["Id"] for f in result["Failed"]] == ["bad"]
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["ApproximateNumberOfMessages"])
    sqs.get_queue_attributes(QueueUrl=url)  # no names: an empty result
    check(
        compared,
        {
            "SendMessage",
            "SendMessageBatch",
            "ReceiveMessage",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "GetQueueAttributes",
        },
    )


def test_errors_and_other_operations_keep_moto_serializer(compared):
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="errors")["QueueUrl"]
    before = dict(responses.stats)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url + "-missing", MessageBody="x")
    with pytest.raises(sqs.exceptions.ClientError) as invalid:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="nope")
    assert invalid.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    sqs.list_queues()
    assert responses.stats == before  # neither path counted: errors and ListQueues are moto's


def test_fast_dump_values():
    assert responses.dumps(None) == "{}"
    encoded = base64.b64encode(b"\x01\x02").decode()
    assert responses.dumps({"b": b"\x01\x02"}) == f'{{"b":"{encoded}"}}'
    moment = dt.datetime(2026, 11, 30, 12, 0, 0, 250_000)
    assert responses.dumps({"t": moment}) == '{"t":1796040000.25}'
    with pytest.raises(TypeError):
        responses.dumps({"x": object()})


# --- requests -------------------------------------------------------------------------------------
@pytest.fixture
def parsed_both_ways(monkeypatch):
    """Every request of a fast operation parsed both ways: [(operation, fast path taken, fast
    params, moto's params)]."""
    seen = []
    moto_parse = responses._original_parse_parameters

    def both(self, request):
        moto_parse(self, request)
        expected = copy.deepcopy(self.params)
        calls = []

        def counted(response, req):
            calls.append(req)
            moto_parse(response, req)

        monkeypatch.setattr(responses, "_original_parse_parameters", counted)
        responses.parse_parameters(self, request)  # the handler then runs on these
        if self._get_action() in responses.FAST_OPERATIONS.get(self.service_name, ()):
            seen.append((self._get_action(), not calls, copy.deepcopy(self.params), expected))

    monkeypatch.setattr(BaseResponse, "parse_parameters", both)
    fake_credentials(monkeypatch)
    with mock_aws():
        yield seen


_TEXT = st.text(alphabet=st.sampled_from('aZ 0:#null\\"é'), max_size=6)
_NAMES = st.text(alphabet=st.sampled_from("abBS_"), min_size=1, max_size=3)
_SCALAR_VALUES = st.one_of(
    _TEXT.map(lambda text: {"S": text or "x"}),
    st.integers(-99, 99).map(lambda n: {"N": str(n)}),
    st.binary(max_size=4).map(lambda data: {"B": data}),
    st.booleans().map(lambda flag: {"BOOL": flag}),
    st.just({"NULL": True}),
    st.lists(_TEXT.filter(bool), min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
)
_ATTRIBUTE_VALUES = st.recursive(
    _SCALAR_VALUES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda values: {"L": values}),
        st.dictionaries(_NAMES, inner, max_size=3).map(lambda values: {"M": values}),
    ),
    max_leaves=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(attributes=st.dictionaries(_NAMES, _ATTRIBUTE_VALUES, max_size=4))
def test_dynamodb_requests_parse_to_what_moto_parses(parsed_both_ways, attributes):
    """Whatever the item (binary or not, nulls, escapes, names that spell a converted member),
    the parameters a handler gets are moto's own; a body without any of those takes the fast
    path."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    if "tbl" not in ddb.list_tables()["TableNames"]:
        create_stream_table(ddb, "tbl", sort_key_type="N")
    parsed_both_ways.clear()
    item = {"pk": {"S": "p"}, "sk": {"N": "1"}, **attributes}
    ddb.put_item(TableName="tbl", Item=item)
    ddb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": "tbl",
                    "Item": {**item, "sk": {"N": "2"}},
                    "ConditionExpression": "attribute_not_exists(pk) OR pk = :p",
                    "ExpressionAttributeValues": {":p": {"S": "p"}},
                }
            }
        ]
    )
    ddb.get_item(TableName="tbl", Key={"pk": {"S": "p"}, "sk": {"N": "1"}})
    assert [operation for operation, *_ in parsed_both_ways] == [
        "PutItem",
        "TransactWriteItems",
        "GetItem",
    ]
    for operation, _, fast_params, moto_params in parsed_both_ways:
        assert fast_params == moto_params, operation
    assert parsed_both_ways[-1][1]  # a key of a string and a number: the fast path


def test_sqs_requests_parse_to_what_moto_parses(parsed_both_ways):
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    binary = {"blob": {"DataType": "Binary", "BinaryValue": b"\x00data"}}
    text = {"text": {"DataType": "String", "StringValue": "plain"}}
    sqs.send_message(QueueUrl=url, MessageBody="one", MessageAttributes=text)
    sqs.send_message(QueueUrl=url, MessageBody="two", MessageAttributes=binary)
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x", "MessageAttributes": binary}]
    )
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    taken = {}
    for operation, fast, fast_params, moto_params in parsed_both_ways:
        assert fast_params == moto_params, operation
        taken.setdefault(operation, []).append(fast)
    assert taken == {
        "SendMessage": [True, False],  # a binary attribute: moto's parser decodes it
        "SendMessageBatch": [False],
        "ReceiveMessage": [True],
    }


# --- SNS: the query protocol's XML -------------------------------------------------------------
def test_sns_publishes_answer_what_moto_serializer_writes(compared):
    sns = boto3.client("sns", region_name=REGION)
    standard = sns.create_topic(Name="answers")["TopicArn"]
    fifo = sns.create_topic(
        Name="answers.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"}
    )["TopicArn"]
    fast_before = responses.stats["fast"]
    sns.publish(TopicArn=standard, Message="<one & only>")
    sns.publish(TopicArn=fifo, Message="x", MessageGroupId="g")
    sns.publish_batch(
        TopicArn=standard,
        PublishBatchRequestEntries=[
            {"Id": "ok", "Message": "fine"},
            {"Id": "too-long-subject", "Message": "m", "Subject": "s" * 101},
        ],
    )
    answered = sns.publish_batch(
        TopicArn=fifo,
        PublishBatchRequestEntries=[{"Id": "a", "Message": "y", "MessageGroupId": "g"}],
    )
    assert answered["Successful"][0]["SequenceNumber"]  # a FIFO topic's, through the fast path
    bodies = [(op, fast, generic) for service, op, fast, generic in compared if service == "sns"]
    assert [op for op, *_ in bodies if op.startswith("Publish")] == [
        "Publish",
        "Publish",
        "PublishBatch",
        "PublishBatch",
    ]
    for operation, fast, generic in bodies:
        if operation.startswith("Publish"):  # (moto's dispatch adds the request id's header later)
            assert fast[0] == generic[0] == 200, operation
            assert fast[1]["Content-Type"] == generic[1]["Content-Type"], operation
            assert fast[2] == generic[2], operation
    assert b"<Failed><member><Id>too-long-subject</Id>" in bodies[-2][1][2].encode()
    assert responses.stats["fast"] == fast_before + 4


_XML_TEXT = st.text(max_size=12)
_ENTRIES = st.fixed_dictionaries(
    {"Id": _XML_TEXT, "MessageId": _XML_TEXT},
    optional={"SequenceNumber": st.none() | st.from_regex(r"\A[0-9]{1,20}\Z")},
)
_FAILURES = st.fixed_dictionaries(
    {"Id": _XML_TEXT, "Code": _XML_TEXT, "SenderFault": st.sampled_from([True, False, "true"])},
    optional={"Message": st.none() | _XML_TEXT},
)


@settings(max_examples=200, deadline=None)
@given(
    successful=st.none() | st.lists(_ENTRIES, max_size=3),
    failed=st.none() | st.lists(_FAILURES, max_size=3),
)
def test_publish_batch_xml_is_moto_serializer_body(successful, failed):
    """Any PublishBatch result (text of any characters, members left out, empty lists) is
    written as moto's query serializer writes it, byte for byte."""
    operation = get_service_model("sns").operation_model("PublishBatch")
    result = {"Successful": successful, "Failed": failed}
    moto_body = QuerySerializer(operation, value_picker=XFormedAttributePicker()).serialize(result)
    assert responses.query_response(operation, ActionResult(result)) == moto_body["body"]


def test_query_xml_leaves_what_it_does_not_know_to_moto():
    operation = get_service_model("sns").operation_model("PublishBatch")
    for result in (
        {"Successful": [{"Id": "a", "MessageId": "m", "message_id": "alias"}]},  # moto's aliases
        {"Successful": [None]},
        {"Failed": "not a list"},
    ):
        with pytest.raises(TypeError):
            responses.query_response(operation, ActionResult(result))


def test_an_accounts_backends_are_looked_up_as_moto_registers_and_resets_them():
    """After moto's reset (every mock's end) a lookup creates the account's backends again and
    registers the dict, so the next reset empties it: no state leaks from one mock to the next."""
    account = "111122223333"
    sqs_backends[account]["us-east-1"].create_queue("kept-until-reset")
    assert any(registered is sqs_backends for registered in BackendDict._instances)
    BackendDict.reset()
    assert account not in sqs_backends
    assert sqs_backends[account]["us-east-1"].queues == {}
    assert any(registered is sqs_backends for registered in BackendDict._instances)


def test_cached_camelcase_names_are_moto_names():
    for name in ("ApproximateNumberOfMessages", "SendMessageBatch", "FifoQueue", "KmsMasterKeyId"):
        assert responses.camelcase_to_underscores(name) == (
            responses._original_camelcase_to_underscores(name)
        )
    assert sqs_models.camelcase_to_underscores is responses.camelcase_to_underscores
