"""What an AWS request asks IAM for: its authorizations (action, resource ARN, condition keys).

One API call can need several authorizations, each decided on its own, as AWS does:
- DynamoDB (Service Authorization Reference; developer guide, "Using IAM policy conditions for
  fine-grained access control"): the table (or index) ARN; ``dynamodb:LeadingKeys`` (the
  partition key values the request touches), ``dynamodb:Attributes`` (the top-level attribute
  names it reads or writes, key attributes excluded), ``dynamodb:Select`` (reads: the request's,
  else SPECIFIC_ATTRIBUTES with a projection, else the API's default ALL_ATTRIBUTES),
  ``dynamodb:ReturnValues``, ``dynamodb:ReturnConsumedCapacity``. TransactWriteItems and
  TransactGetItems are authorized item by item as PutItem / UpdateItem / DeleteItem /
  ConditionCheckItem / GetItem (IAM has no action of their own) with
  ``dynamodb:EnclosingOperation``; BatchWriteItem / BatchGetItem once per table.
- S3: API operation -> IAM action (``GetObject`` with a ``versionId`` is ``s3:GetObjectVersion``,
  ``HeadObject`` is ``s3:GetObject``, multipart steps are ``s3:PutObject``, a listing is
  ``s3:ListBucket``, ...); the bucket or object ARN; ``s3:prefix`` of a listing; a put's
  (PutObject, CopyObject, CreateMultipartUpload) ``s3:x-amz-server-side-encryption`` and
  ``s3:x-amz-server-side-encryption-aws-kms-key-id`` from its headers, when it sends them.
- SQS: ``*Batch`` operations are authorized as their single-message action
  (``SendMessageBatch`` -> ``sqs:SendMessage``); the queue ARN from ``QueueUrl``.
- SNS: ``PublishBatch`` -> ``sns:Publish``; the topic ARN.
- KMS (AWS KMS developer guide, "AWS KMS condition keys"): ``kms:<Operation>`` on the key the
  request names by KeyId (a key id or ARN, an alias name or ARN) or, for Decrypt and ReEncrypt
  without one, by its ciphertext; ``kms:CallerAccount``, ``kms:EncryptionAlgorithm`` and, per
  encryption context pair, ``kms:EncryptionContext:<key>`` and ``kms:EncryptionContextKeys``.
  The key's policy is then part of the decision (emulator/iam/resources.py).
- Firehose: ``firehose:<Operation>`` on the delivery stream the request names
  (``DeliveryStreamName``): ``arn:aws:firehose:<region>:<account>:deliverystream/<name>``.
- SES (API v2) SendEmail (Service Authorization Reference, Amazon SES v2: identity and
  configuration-set resources): ``ses:SendEmail`` on the sending identity
  (``FromEmailAddressIdentityArn``, else the From address's domain) and, when the request names
  one, on the configuration set: two authorizations, both needed.
- Any other service: ``<service>:<Operation>`` with the resource unknown (None): the decision
  then rests on the action and the conditions only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

from emulator.core import calls
from emulator.iam.policy import Request

# (table name, index name or None) -> its key attribute names, the partition key first; () when
# the table is not known (DynamoDB then answers the call with its own error).
KeySchema = Callable[[str, str | None], tuple[str, ...]]
# (KeyId or None, base64 ciphertext or None, region, account) -> the key's ARN, or "*"
KmsKey = Callable[[str | None, str | None, str, str], str]

_NAME_TOKEN = re.compile(r"#?[A-Za-z_][A-Za-z0-9_]*")
_KEY_EQUALS = re.compile(r"(#?[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(:[A-Za-z0-9_]+)")
_UPDATE_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)
_READS = {"GetItem", "Query", "Scan", "BatchGetItem"}
_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
# S3 API operations whose IAM action has another name (the rest: the same name).
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "CopyObject": "PutObject",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "UploadPartCopy": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "ListParts": "ListMultipartUploadParts",
    "ListObjects": "ListBucket",
    "ListObjectsV2": "ListBucket",
    "HeadBucket": "ListBucket",
    "ListObjectVersions": "ListBucketVersions",
    "ListMultipartUploads": "ListBucketMultipartUploads",
    "GetBucketNotificationConfiguration": "GetBucketNotification",
    "PutBucketNotificationConfiguration": "PutBucketNotification",
    "ListBuckets": "ListAllMyBuckets",
    "DeleteObjects": "DeleteObject",
}
# S3 object actions that take a version: with a versionId, IAM's "...Version" action.
_S3_VERSIONED = {
    "GetObject",
    "DeleteObject",
    "GetObjectTagging",
    "PutObjectTagging",
    "GetObjectAcl",
}


def authorizations(
    environ: dict[str, Any],
    service: str,
    operation: str,
    *,
    region: str,
    account: str,
    key_schema: KeySchema,
    kms_key: KmsKey,
) -> list[Request]:
    """The authorizations of one request (``operation``: ``<service>:<Operation>`` as
    emulator.core.calls reads it). May read the body (``wsgi.input`` is then replaced)."""
    name = operation.partition(":")[2]
    if service == "s3":
        return _s3(environ, name)
    params = _params(environ)
    if service == "dynamodb":
        arn = f"arn:aws:dynamodb:{region}:{account}:table/"
        return _dynamodb(name, params, arn, key_schema)
    if service == "sqs":
        return [_sqs(name, params, region, account)]
    if service == "sns":
        action = "Publish" if name == "PublishBatch" else name
        resource = params.get("TopicArn") or params.get("TargetArn") or "*"
        return [Request(f"sns:{action}", resource)]
    if service == "kms":
        return [
            _kms(
                name,
                params,
                kms_key(params.get("KeyId"), params.get("CiphertextBlob"), region, account),
                account,
            )
        ]
    return _named_resources(operation, params, region, account)


def _named_resources(
    operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[Request]:
    """SES's SendEmail and Firehose's calls on the resources they name; any other call on an
    unknown resource."""
    if operation == "ses:SendEmail":
        return _ses_send(params, region, account)
    resource = None
    if operation.startswith("firehose:") and params.get("DeliveryStreamName"):
        stream = params["DeliveryStreamName"]
        resource = f"arn:aws:firehose:{region}:{account}:deliverystream/{stream}"
    return [Request(operation, resource)]


def _ses_send(params: Mapping[str, Any], region: str, account: str) -> list[Request]:
    prefix = f"arn:aws:ses:{region}:{account}"
    identity = params.get("FromEmailAddressIdentityArn") or (
        f"{prefix}:identity/{str(params.get('FromEmailAddress', '')).rpartition('@')[2]}"
    )
    requests = [Request("ses:SendEmail", identity)]
    if params.get("ConfigurationSetName"):
        config_set = f"{prefix}:configuration-set/{params['ConfigurationSetName']}"
        requests.append(Request("ses:SendEmail", config_set))
    return requests


def _kms(operation: str, params: Mapping[str, Any], key_arn: str, account: str) -> Request:
    context: dict[str, list[str]] = {"kms:calleraccount": [account]}
    if algorithm := params.get("EncryptionAlgorithm"):
        context["kms:encryptionalgorithm"] = [algorithm]
    encryption_context = params.get("EncryptionContext") or {}
    for key, value in encryption_context.items():
        context[f"kms:encryptioncontext:{key.lower()}"] = [value]
    if encryption_context:
        context["kms:encryptioncontextkeys"] = sorted(encryption_context)
    return Request(f"kms:{operation}", key_arn, context)


def _params(environ: dict[str, Any]) -> dict[str, Any]:
    """A JSON protocol's body (REST JSON's too), or a query protocol's parameters (query string
    and form)."""
    body = calls.read_body(environ)
    if "HTTP_X_AMZ_TARGET" in environ or "json" in environ.get("CONTENT_TYPE", ""):
        return json.loads(body or b"{}")
    pairs = parse_qs(environ.get("QUERY_STRING", "")) | parse_qs(body.decode())
    return {k: v[0] for k, v in pairs.items()}


# --- DynamoDB ------------------------------------------------------------------------------------
def _value(attribute: Mapping[str, Any]) -> str:
    """A key attribute's value as IAM compares it (S, N and B are the key types)."""
    return str(next(iter(attribute.values())))


def _names(expression: str, aliases: Mapping[str, str]) -> list[str]:
    """The top-level attribute names of a projection: ``a.b, #c[0]`` -> a, c."""
    names = []
    for path in expression.split(","):
        token = _NAME_TOKEN.match(path.strip())
        if token:
            names.append(aliases.get(token[0], token[0]))
    return names


def _update_names(expression: str, aliases: Mapping[str, str]) -> list[str]:
    """The attribute names an UpdateExpression writes (the paths its clauses start with)."""
    names = []
    for clause in _UPDATE_CLAUSE.split(expression)[2::2]:
        for action in clause.split(","):
            token = _NAME_TOKEN.match(action.strip())
            if token:
                names.append(aliases.get(token[0], token[0]))
    return names


def _item_context(
    operation: str, body: Mapping[str, Any], key_names: tuple[str, ...]
) -> dict[str, list[str]]:
    aliases = body.get("ExpressionAttributeNames") or {}
    item = body.get("Item") or body.get("Key") or {}
    context: dict[str, list[str]] = {}
    if key_names and key_names[0] in item:
        context["dynamodb:leadingkeys"] = [_value(item[key_names[0]])]
    attributes: list[str] = []
    if operation == "PutItem":
        attributes = [n for n in item if n not in key_names]
    elif operation == "UpdateItem":
        attributes = _update_names(body.get("UpdateExpression", ""), aliases)
        attributes += list(body.get("AttributeUpdates") or ())
    elif operation in _READS:
        if body.get("ProjectionExpression"):
            attributes = _names(body["ProjectionExpression"], aliases)
        else:
            attributes = list(body.get("AttributesToGet") or ())
        projected = bool(attributes)
        context["dynamodb:select"] = [
            body.get("Select") or ("SPECIFIC_ATTRIBUTES" if projected else "ALL_ATTRIBUTES")
        ]
    if attributes:
        context["dynamodb:attributes"] = sorted(set(attributes) - set(key_names))
    for parameter in ("ReturnValues", "ReturnConsumedCapacity"):
        if body.get(parameter):
            context[f"dynamodb:{parameter.lower()}"] = [body[parameter]]
    return context


def _query_leading_keys(body: Mapping[str, Any], key_names: tuple[str, ...]) -> list[str]:
    if not key_names:
        return []
    hash_key = key_names[0]
    aliases = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    for name, placeholder in _KEY_EQUALS.findall(body.get("KeyConditionExpression", "")):
        if aliases.get(name, name) == hash_key and placeholder in values:
            return [_value(values[placeholder])]
    legacy = (body.get("KeyConditions") or {}).get(hash_key)
    return [_value(legacy["AttributeValueList"][0])] if legacy else []


def _table_arn(prefix: str, table: str, index: str | None = None) -> str:
    arn = table if table.startswith("arn:") else prefix + table
    return f"{arn}/index/{index}" if index else arn


def _table_name(table: str) -> str:
    return table.rpartition("/")[2] if table.startswith("arn:") else table


def _dynamodb(
    operation: str, body: Mapping[str, Any], prefix: str, key_schema: KeySchema
) -> list[Request]:
    if operation in ("TransactWriteItems", "TransactGetItems"):
        requests = []
        for entry in body.get("TransactItems", []):
            kind, item_body = next(iter(entry.items()))
            action = "GetItem" if kind == "Get" else _TRANSACT_WRITE[kind]
            table = item_body["TableName"]
            context = _item_context(action, item_body, key_schema(_table_name(table), None))
            context["dynamodb:enclosingoperation"] = [operation]
            requests.append(Request(f"dynamodb:{action}", _table_arn(prefix, table), context))
        return requests
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [
            _batch(operation, table, entries, prefix, key_schema)
            for table, entries in (body.get("RequestItems") or {}).items()
        ]
    table = body.get("TableName")
    if table is None:
        return [Request(f"dynamodb:{operation}", "*")]
    index = body.get("IndexName")
    key_names = key_schema(_table_name(table), index)
    context = _item_context(operation, body, key_names)
    if operation == "Query":
        leading = _query_leading_keys(body, key_names)
        if leading:
            context["dynamodb:leadingkeys"] = leading
    return [Request(f"dynamodb:{operation}", _table_arn(prefix, table, index), context)]


def _batch(operation: str, table: str, entries: Any, prefix: str, key_schema: KeySchema) -> Request:
    key_names = key_schema(_table_name(table), None)
    hash_key = key_names[0] if key_names else None
    context: dict[str, list[str]] = {}
    if operation == "BatchWriteItem":
        items = [
            (e.get("PutRequest") or {}).get("Item") or (e.get("DeleteRequest") or {}).get("Key")
            for e in entries
        ]
        puts = [e["PutRequest"]["Item"] for e in entries if "PutRequest" in e]
        attributes = {n for item in puts for n in item if n not in key_names}
        if attributes:
            context["dynamodb:attributes"] = sorted(attributes)
    else:
        items = entries.get("Keys", [])
        context = _item_context("GetItem", {**entries, "Key": {}}, key_names)
    if hash_key is not None:
        context["dynamodb:leadingkeys"] = sorted(
            {_value(item[hash_key]) for item in items if item and hash_key in item}
        )
    return Request(f"dynamodb:{operation}", _table_arn(prefix, table), context)


# --- SQS -----------------------------------------------------------------------------------------
def _sqs(operation: str, params: Mapping[str, Any], region: str, account: str) -> Request:
    action = operation.removesuffix("Batch") if operation.endswith("MessageBatch") else operation
    action = "ChangeMessageVisibility" if action.startswith("ChangeMessageVisibility") else action
    url = params.get("QueueUrl")
    if url:  # https://sqs.<region>.amazonaws.com/<account>/<name>
        owner, name = url.rstrip("/").split("/")[-2:]
        resource = f"arn:aws:sqs:{region}:{owner}:{name}"
    elif params.get("QueueName"):
        resource = f"arn:aws:sqs:{region}:{account}:{params['QueueName']}"
    else:
        resource = "*"
    return Request(f"sqs:{action}", resource)


# --- S3 ------------------------------------------------------------------------------------------
def _s3(environ: dict[str, Any], operation: str) -> list[Request]:
    bucket, key = calls.s3_bucket_key(environ)
    key = key.encode("latin-1").decode("utf-8", "replace")  # WSGI: bytes as latin-1
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    action = _S3_ACTIONS.get(operation, operation)
    if action in _S3_VERSIONED and query.get("versionId"):
        action += "Version"
    if not bucket:
        return [Request(f"s3:{action}", "*")]
    if operation == "DeleteObjects":
        return [Request("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{k}") for k in _keys(environ)]
    resource = f"arn:aws:s3:::{bucket}/{key}" if key else f"arn:aws:s3:::{bucket}"
    context = {}
    if action == "ListBucket" and query.get("prefix"):
        context["s3:prefix"] = query["prefix"]
    if operation in _S3_ENCRYPTING:
        context.update(s3_encryption_keys(environ))
    requests = [Request(f"s3:{action}", resource, context)]
    source = environ.get("HTTP_X_AMZ_COPY_SOURCE")
    if source:  # a copy also reads its source: "<bucket>/<key>[?versionId=...]"
        path, _, version = source.lstrip("/").partition("?versionId=")
        read = "s3:GetObjectVersion" if version else "s3:GetObject"
        requests.append(Request(read, f"arn:aws:s3:::{path}"))
    return requests


# The S3 operations whose request says how the object is encrypted (S3 user guide, "Requiring
# server-side encryption"; Service Authorization Reference, s3:PutObject's condition keys).
_S3_ENCRYPTING = {"PutObject", "CopyObject", "CreateMultipartUpload"}
_S3_ENCRYPTION_HEADERS = {
    "HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION": "s3:x-amz-server-side-encryption",
    "HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_AWS_KMS_KEY_ID": (
        "s3:x-amz-server-side-encryption-aws-kms-key-id"
    ),
}


def s3_encryption_keys(environ: Mapping[str, Any]) -> dict[str, list[str]]:
    """``s3:x-amz-server-side-encryption`` and ``s3:x-amz-server-side-encryption-aws-kms-key-id``
    of a request, each only when its header is there (a put without them gets the bucket's
    default encryption, and its request has neither key), its value as sent."""
    return {
        key: [environ[header]]
        for header, key in _S3_ENCRYPTION_HEADERS.items()
        if header in environ
    }


def _keys(environ: dict[str, Any]) -> Iterable[str]:
    root = ElementTree.fromstring(calls.read_body(environ))  # noqa: S314 - the caller's own XML
    return [e.text or "" for e in root.iter() if e.tag.rpartition("}")[2] == "Key"]
