"""Requests as botocore puts them on the wire -> the authorizations IAM decides (action,
resource, condition keys), per service."""

import io
from urllib.parse import unquote, urlencode

import botocore.loaders
import botocore.session
import pytest
from botocore.serialize import create_serializer

from emulator.core import calls
from emulator.iam.authorizations import authorizations
from emulator.iam.policy import known_action
from emulator.process import ACCOUNT, REGION

TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/contacts"
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/notifications"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SCHEMAS = {("contacts", None): ("pk", "sk"), ("contacts", "by-agent"): ("agent_id",)}
_session = botocore.session.get_session()
# Service models of its own: an S3 client strips {Bucket} from the request URIs of the models it
# was built from (botocore's endpoint rules put the bucket back), and the unit tests' sessions
# share one loader (tests/unit/conftest.py).
_session.register_component("data_loader", botocore.loaders.Loader())


def environ(service: str, operation: str, params: dict) -> dict:
    """The WSGI environ of a request botocore serializes (SigV4 credential scope included)."""
    model = _session.get_service_model(service)
    protocol = model.metadata.get("protocols", [model.metadata["protocol"]])[0]
    request = create_serializer(protocol).serialize_to_request(
        params, model.operation_model(operation)
    )
    body = request["body"]
    if isinstance(body, dict):  # query protocol: a form
        body = urlencode(body)
    body = body if isinstance(body, bytes) else body.encode()
    path, _, fixed_query = request["url_path"].partition("?")  # S3: "/{Bucket}?versions"
    query = "&".join(q for q in (fixed_query, urlencode(request["query_string"], doseq=True)) if q)
    env = {
        "REQUEST_METHOD": request["method"],
        "PATH_INFO": unquote(path).encode().decode("latin-1"),
        "QUERY_STRING": query,
        "HTTP_HOST": "127.0.0.1:4566",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential=AKIAX/20260101/{REGION}/"
        f"{model.signing_name}/aws4_request, SignedHeaders=host, Signature=0",
    }
    for name, value in request["headers"].items():
        key = name.upper().replace("-", "_")
        env[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    if isinstance(request["body"], dict):
        env["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
    return env


def authorize(service: str, operation: str, params: dict):
    env = environ(service, operation, params)
    _, scope = calls.credential(env)
    found = calls.operation(env, scope)
    return authorizations(
        env,
        scope,
        found,
        region=REGION,
        account=ACCOUNT,
        key_schema=lambda table, index: SCHEMAS.get((table, index), ()),
        kms_key=lambda key_id, ciphertext, region, account: (
            KEY_ARN if key_id in ("alias/contacts", KEY_ARN) or ciphertext else "*"
        ),
    )


def test_get_item_with_a_projection():
    [request] = authorize(
        "dynamodb",
        "GetItem",
        {
            "TableName": "contacts",
            "Key": {"pk": {"S": "CALLER#+15550100"}, "sk": {"S": "LAST_AGENT"}},
            "ProjectionExpression": "agent_id, #c, ended_at.x",
            "ExpressionAttributeNames": {"#c": "contact_id"},
        },
    )
    assert (request.action, request.resource) == ("dynamodb:GetItem", TABLE_ARN)
    assert request.context == {
        "dynamodb:leadingkeys": ["CALLER#+15550100"],
        "dynamodb:attributes": ["agent_id", "contact_id", "ended_at"],
        "dynamodb:select": ["SPECIFIC_ATTRIBUTES"],
    }


def test_a_read_without_projection_selects_all_attributes():
    [request] = authorize(
        "dynamodb",
        "GetItem",
        {"TableName": "contacts", "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}},
    )
    assert request.context["dynamodb:select"] == ["ALL_ATTRIBUTES"]
    assert "dynamodb:attributes" not in request.context


def test_put_and_update_name_the_attributes_they_write_keys_excluded():
    [put] = authorize(
        "dynamodb",
        "PutItem",
        {
            "TableName": "contacts",
            "Item": {"pk": {"S": "P"}, "sk": {"S": "S"}, "type": {"S": "T"}, "n": {"N": "1"}},
            "ReturnValues": "ALL_OLD",
        },
    )
    assert put.context == {
        "dynamodb:leadingkeys": ["P"],
        "dynamodb:attributes": ["n", "type"],
        "dynamodb:returnvalues": ["ALL_OLD"],
    }
    [update] = authorize(
        "dynamodb",
        "UpdateItem",
        {
            "TableName": f"{TABLE_ARN}",
            "Key": {"pk": {"S": "P"}, "sk": {"S": "S"}},
            "UpdateExpression": "SET #s = :s, expiration = if_not_exists(x, :e) REMOVE old",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":s": {"S": "x"}, ":e": {"N": "1"}},
        },
    )
    assert update.resource == TABLE_ARN
    assert update.context["dynamodb:attributes"] == ["expiration", "old", "status"]


def test_query_leading_keys_come_from_the_key_condition_of_the_index():
    [request] = authorize(
        "dynamodb",
        "Query",
        {
            "TableName": "contacts",
            "IndexName": "by-agent",
            "KeyConditionExpression": "#a = :a AND begins_with(sk, :p)",
            "ExpressionAttributeNames": {"#a": "agent_id"},
            "ExpressionAttributeValues": {":a": {"S": "agent-7"}, ":p": {"S": "C"}},
        },
    )
    assert request.resource == f"{TABLE_ARN}/index/by-agent"
    assert request.context["dynamodb:leadingkeys"] == ["agent-7"]


def test_a_transaction_is_authorized_item_by_item():
    requests = authorize(
        "dynamodb",
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "contacts", "Item": {"pk": {"S": "A"}, "sk": {"S": "1"}}}},
                {"Delete": {"TableName": "contacts", "Key": {"pk": {"S": "B"}, "sk": {"S": "2"}}}},
                {
                    "ConditionCheck": {
                        "TableName": "contacts",
                        "Key": {"pk": {"S": "C"}, "sk": {"S": "3"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        },
    )
    assert [(r.action, r.context["dynamodb:leadingkeys"]) for r in requests] == [
        ("dynamodb:PutItem", ["A"]),
        ("dynamodb:DeleteItem", ["B"]),
        ("dynamodb:ConditionCheckItem", ["C"]),
    ]
    assert all(r.context["dynamodb:enclosingoperation"] == ["TransactWriteItems"] for r in requests)


def test_batch_write_is_one_authorization_per_table_with_every_leading_key():
    [request] = authorize(
        "dynamodb",
        "BatchWriteItem",
        {
            "RequestItems": {
                "contacts": [
                    {"PutRequest": {"Item": {"pk": {"S": "A"}, "sk": {"S": "1"}, "x": {"S": ""}}}},
                    {"DeleteRequest": {"Key": {"pk": {"S": "B"}, "sk": {"S": "2"}}}},
                ]
            }
        },
    )
    assert request.action == "dynamodb:BatchWriteItem"
    assert request.context == {"dynamodb:attributes": ["x"], "dynamodb:leadingkeys": ["A", "B"]}


@pytest.mark.parametrize(
    ("operation", "params", "action", "resource"),
    [
        ("GetObject", {"Key": "incoming/a b.csv"}, "s3:GetObject", "b/incoming/a b.csv"),
        ("GetObject", {"Key": "k", "VersionId": "v1"}, "s3:GetObjectVersion", "b/k"),
        ("HeadObject", {"Key": "k"}, "s3:GetObject", "b/k"),
        ("HeadObject", {"Key": "k", "VersionId": "v1"}, "s3:GetObjectVersion", "b/k"),
        ("PutObject", {"Key": "rejected/k", "Body": b"x"}, "s3:PutObject", "b/rejected/k"),
        ("CreateMultipartUpload", {"Key": "k"}, "s3:PutObject", "b/k"),
        ("DeleteObject", {"Key": "k"}, "s3:DeleteObject", "b/k"),
        ("ListObjectsV2", {"Prefix": "incoming/"}, "s3:ListBucket", "b"),
        ("ListObjectVersions", {}, "s3:ListBucketVersions", "b"),
    ],
)
def test_s3_operations_are_authorized_as_iam_names_them(operation, params, action, resource):
    [request] = authorize("s3", operation, {"Bucket": "b", **params})
    assert (request.action, request.resource) == (action, f"arn:aws:s3:::{resource}")
    assert known_action(request.action)


def test_s3_copy_also_reads_its_source():
    requests = authorize(
        "s3", "CopyObject", {"Bucket": "b", "Key": "to", "CopySource": "src/from?versionId=v"}
    )
    assert [(r.action, r.resource) for r in requests] == [
        ("s3:PutObject", "arn:aws:s3:::b/to"),
        ("s3:GetObjectVersion", "arn:aws:s3:::src/from"),
    ]


@pytest.mark.parametrize("operation", ["PutObject", "CreateMultipartUpload", "CopyObject"])
def test_s3_puts_carry_their_encryption_headers_as_condition_keys(operation):
    params = {"Bucket": "b", "Key": "k"} | (
        {"CopySource": "b/src"} if operation == "CopyObject" else {}
    )
    key = "arn:aws:kms:us-east-1:123456789012:key/k1"
    asked = params | {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": key}
    put = authorize("s3", operation, asked)[0]
    assert put.action == "s3:PutObject"
    assert put.context == {
        "s3:x-amz-server-side-encryption": ["aws:kms"],
        "s3:x-amz-server-side-encryption-aws-kms-key-id": [key],
    }
    sse_s3 = authorize("s3", operation, params | {"ServerSideEncryption": "AES256"})[0]
    assert sse_s3.context == {"s3:x-amz-server-side-encryption": ["AES256"]}
    # without the headers, neither key: the bucket's default encryption applies
    assert authorize("s3", operation, params)[0].context == {}


def test_sqs_batches_are_authorized_as_their_single_message_action():
    entries = [{"Id": "1", "MessageBody": "x"}]
    [send] = authorize("sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": entries})
    assert (send.action, send.resource) == (
        "sqs:SendMessage",
        f"arn:aws:sqs:{REGION}:{ACCOUNT}:notifications",
    )
    [delete] = authorize(
        "sqs",
        "DeleteMessageBatch",
        {"QueueUrl": QUEUE_URL, "Entries": [{"Id": "1", "ReceiptHandle": "r"}]},
    )
    assert delete.action == "sqs:DeleteMessage"


def test_sns_publish_names_the_topic():
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT}:notifications.fifo"
    [request] = authorize("sns", "Publish", {"TopicArn": topic, "Message": "m"})
    assert (request.action, request.resource) == ("sns:Publish", topic)
    [batch] = authorize(
        "sns",
        "PublishBatch",
        {"TopicArn": topic, "PublishBatchRequestEntries": [{"Id": "1", "Message": "m"}]},
    )
    assert batch.action == "sns:Publish"


def test_other_services_are_decided_on_the_action_alone():
    [request] = authorize(
        "kinesis", "PutRecord", {"StreamName": "s", "Data": b"x", "PartitionKey": "k"}
    )
    assert (request.action, request.resource) == ("kinesis:PutRecord", None)


def test_kms_calls_name_the_key_by_id_alias_or_ciphertext_with_their_context():
    [encrypt] = authorize(
        "kms",
        "Encrypt",
        {
            "KeyId": "alias/contacts",
            "Plaintext": b"x",
            "EncryptionContext": {"Purpose": "export"},
            "EncryptionAlgorithm": "SYMMETRIC_DEFAULT",
        },
    )
    assert (encrypt.action, encrypt.resource) == ("kms:Encrypt", KEY_ARN)
    assert encrypt.context == {
        "kms:calleraccount": [ACCOUNT],
        "kms:encryptionalgorithm": ["SYMMETRIC_DEFAULT"],
        "kms:encryptioncontext:purpose": ["export"],
        "kms:encryptioncontextkeys": ["Purpose"],
    }
    [decrypt] = authorize("kms", "Decrypt", {"CiphertextBlob": b"sealed"})
    assert (decrypt.action, decrypt.resource) == ("kms:Decrypt", KEY_ARN)
    [unknown] = authorize("kms", "DescribeKey", {"KeyId": "alias/nothing"})
    assert (unknown.action, unknown.resource) == ("kms:DescribeKey", "*")


def test_ses_send_email_is_authorized_on_its_identity_and_its_configuration_set():
    send = {
        "FromEmailAddress": "surveys@example.com",
        "Destination": {"ToAddresses": ["a@example.org"]},
        "Content": {"Template": {"TemplateName": "t", "TemplateData": "{}"}},
        "ConfigurationSetName": "stack-mail",
    }
    prefix = f"arn:aws:ses:{REGION}:{ACCOUNT}"
    found = authorize("sesv2", "SendEmail", send)
    assert [(r.action, r.resource) for r in found] == [
        ("ses:SendEmail", f"{prefix}:identity/example.com"),
        ("ses:SendEmail", f"{prefix}:configuration-set/stack-mail"),
    ]
    named = {**send, "FromEmailAddressIdentityArn": f"{prefix}:identity/surveys@example.com"}
    del named["ConfigurationSetName"]
    assert [r.resource for r in authorize("sesv2", "SendEmail", named)] == [
        f"{prefix}:identity/surveys@example.com"
    ]
