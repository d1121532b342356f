"""What an AWS request is (caller, service, operation) and the services' own throttling errors.

Used by the server's WSGI middleware (emulator/server.py) for the ``crash_after_call`` and
``throttle`` fault switches (emulator/core/faults.py). Everything here works on the WSGI environ and
reads only what it needs: the caller and the service from the SigV4 ``Authorization`` header's
credential (``Credential=<key>/<date>/<region>/<service>/aws4_request``); the operation from
``X-Amz-Target`` (JSON protocols: ``DynamoDB_20120810.PutItem``, ``AmazonSQS.SendMessage``), from
``Action=`` in the query string or the form body (query protocol: SNS, SQS's older protocol), or,
for S3, from the method, the path and the query string; for SES API v2 (REST JSON, signed as
``ses``), from the method and the path (SendEmail only: the one call the stack's functions make).
Operation names are the API's: ``GetObject`` with a ``versionId`` is ``s3:GetObject`` (IAM calls
it ``s3:GetObjectVersion``).

Throttling errors, each in its service's protocol and retried by botocore as throttling (legacy
and standard retry modes: botocore/data/_retry.json, botocore/retries/standard.py):

- DynamoDB (awsJson1_0): HTTP 400 ``ProvisionedThroughputExceededException``.
- SQS (JSON protocol, awsQueryCompatible): HTTP 403 ``RequestThrottled`` with
  ``x-amzn-query-error: RequestThrottled;Sender``, the status SQS sends it with (botocore's
  legacy mode retries RequestThrottled only with 403); query protocol: the same as XML.
- SNS (query, XML): HTTP 400 ``ThrottlingException`` "Rate exceeded", what SNS returns for
  Publish (AWS knowledge center, "sns-throttling-exception-errors"). SNS's modeled
  ``ThrottledException`` (code ``Throttled``, HTTP 429) belongs to the SMS actions only, not to
  Publish / PublishBatch.
- S3 (REST XML): HTTP 503 ``SlowDown`` (no body for HEAD).
- SES API v2 (REST JSON): HTTP 429 ``TooManyRequestsException`` in ``x-amzn-ErrorType``, its
  modeled throttling error (an XML body, the query protocol's, reached botocore as an
  unparsed "400").
- Any other JSON service: HTTP 400 ``ThrottlingException``; any other query service: HTTP 400
  ``Throttling``.
"""

from __future__ import annotations

import io
import json
import re
import uuid
import zlib
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

_ACTION = re.compile(rb"(?:^|&)Action=([A-Za-z0-9]+)")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_QUERY_NAMESPACES = {
    "sns": "http://sns.amazonaws.com/doc/2010-03-31/",
    "sqs": "http://queue.amazonaws.com/doc/2012-11-05/",
}
_S3_BUCKET_GET = {
    "versions": "ListObjectVersions",
    "uploads": "ListMultipartUploads",
    "location": "GetBucketLocation",
    "versioning": "GetBucketVersioning",
    "notification": "GetBucketNotificationConfiguration",
}
_S3_LIST_PARAMETERS = {
    "prefix",
    "delimiter",
    "marker",
    "max-keys",
    "encoding-type",
    "continuation-token",
    "fetch-owner",
    "start-after",
    "list-type",
}


def credential(environ: dict[str, Any]) -> tuple[str, str] | None:
    """(access key id, service) of a SigV4-signed request, from its Authorization header."""
    auth = environ.get("HTTP_AUTHORIZATION")
    if not auth:
        return None
    start = auth.find("Credential=")
    if start < 0:
        return None
    start += len("Credential=")
    end = auth.find(",", start)
    parts = auth[start : end if end >= 0 else len(auth)].strip().split("/")
    if len(parts) != 5:
        return None
    return parts[0], parts[3]


def operation(environ: dict[str, Any], service: str) -> str | None:
    """``<service>:<Operation>`` of a request, or None when it cannot be told. May read the body
    of a query-protocol request: ``wsgi.input`` is then replaced by a buffer holding it."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return f"{service}:{target.rpartition('.')[2]}"
    if service == "s3":
        name = s3_operation(environ)
        return f"s3:{name}" if name else None
    if _is_sesv2(environ, service):
        return "ses:SendEmail" if _is_sesv2_send(environ) else None
    action = _action(environ)
    return f"{service}:{action}" if action else None


def _is_sesv2_send(environ: dict[str, Any]) -> bool:
    path = environ.get("PATH_INFO", "").rstrip("/")
    return environ.get("REQUEST_METHOD") == "POST" and path == "/v2/email/outbound-emails"


def _action(environ: dict[str, Any]) -> str | None:
    query = environ.get("QUERY_STRING", "")
    if "Action=" in query:
        found = _ACTION.search(query.encode())
        if found:
            return found[1].decode()
    if "x-www-form-urlencoded" not in environ.get("CONTENT_TYPE", ""):
        return None
    body = read_body(environ)
    found = _ACTION.search(body)
    return found[1].decode() if found else None


def read_body(environ: dict[str, Any]) -> bytes:
    """The request body, leaving an equivalent ``wsgi.input`` for the application."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        body = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        body = stream.read()
    else:
        body = b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


# S3 object operations: per method, (query parameter, operation) in order, then the default.
# "+copy" marks the variant with an x-amz-copy-source header.
_S3_OBJECT = {
    "GET": (
        (
            ("uploadId", "ListParts"),
            ("tagging", "GetObjectTagging"),
            ("acl", "GetObjectAcl"),
            ("attributes", "GetObjectAttributes"),
        ),
        "GetObject",
    ),
    "HEAD": ((), "HeadObject"),
    "PUT": (
        (
            ("partNumber", "UploadPart"),
            ("tagging", "PutObjectTagging"),
            ("acl", "PutObjectAcl"),
        ),
        "PutObject",
    ),
    "POST": (
        (
            ("uploads", "CreateMultipartUpload"),
            ("uploadId", "CompleteMultipartUpload"),
            ("restore", "RestoreObject"),
        ),
        None,
    ),
    "DELETE": (
        (("uploadId", "AbortMultipartUpload"), ("tagging", "DeleteObjectTagging")),
        "DeleteObject",
    ),
}
_S3_COPY = {"PutObject": "CopyObject", "UploadPart": "UploadPartCopy"}


def s3_operation(environ: dict[str, Any]) -> str | None:
    """The S3 API operation of a REST request (path-style or virtual-hosted), or None."""
    method = environ.get("REQUEST_METHOD", "GET")
    bucket, key = s3_bucket_key(environ)
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    if not bucket:
        return "ListBuckets" if method == "GET" else None
    if not key:
        return _s3_bucket_operation(method, query)
    rules, default = _S3_OBJECT.get(method, ((), None))
    found = next((op for name, op in rules if name in query), default)
    if found in _S3_COPY and "HTTP_X_AMZ_COPY_SOURCE" in environ:
        return _S3_COPY[found]
    return found


def s3_bucket_key(environ: dict[str, Any]) -> tuple[str, str]:
    """(bucket, key) of an S3 REST request, path-style or virtual-hosted ('' when absent)."""
    path = environ.get("PATH_INFO", "/")
    host = environ.get("HTTP_HOST", "").split(":")[0]
    virtual = (
        "." in host and not _IP.match(host) and not host.startswith("s3.") and host != "localhost"
    )
    if virtual:
        return host.split(".", 1)[0], path.lstrip("/")
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


def _s3_bucket_operation(method: str, query: dict[str, list[str]]) -> str | None:
    found = None
    if method == "GET":
        found = next((op for name, op in _S3_BUCKET_GET.items() if name in query), None)
        if found is None and not set(query) - _S3_LIST_PARAMETERS:  # else another subresource
            found = "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
    elif method == "HEAD":
        found = "HeadBucket"
    elif method == "POST" and "delete" in query:
        found = "DeleteObjects"
    elif not query:
        found = {"PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(method)
    return found


# --- the services' own errors ------------------------------------------------------------------
Response = tuple[str, list[tuple[str, str]], bytes]


def _json_error(status: str, code: str, message: str, query_error: str | None) -> Response:
    """A JSON protocol's error; ``query_error``: the ``x-amzn-query-error`` of a service that
    speaks the query protocol too (SQS), whose code botocore then reports."""
    body = json.dumps({"__type": code, "message": message}).encode()
    headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("x-amzn-RequestId", str(uuid.uuid4())),
        ("x-amz-crc32", str(zlib.crc32(body))),
    ]
    if query_error is not None:
        headers.append(("x-amzn-query-error", query_error))
    return status, [*headers, ("Content-Length", str(len(body)))], body


def _query_error(service: str, status: str, code: str, message: str) -> Response:
    request_id = str(uuid.uuid4())
    namespace = _QUERY_NAMESPACES.get(service)
    opening = f'<ErrorResponse xmlns="{namespace}">' if namespace else "<ErrorResponse>"
    body = (
        f'<?xml version="1.0"?>{opening}<Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    ).encode()
    headers = [
        ("Content-Type", "text/xml"),
        ("x-amzn-RequestId", request_id),
        ("Content-Length", str(len(body))),
    ]
    return status, headers, body


def _s3_error(environ: dict[str, Any], status: str, code: str, message: str) -> Response:
    """S3's REST XML error (no body for HEAD)."""
    request_id, host_id = str(uuid.uuid4()), uuid.uuid4().hex
    body = b""
    if environ.get("REQUEST_METHOD") != "HEAD":
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message>"
            f"<RequestId>{request_id}</RequestId><HostId>{host_id}</HostId></Error>"
        ).encode()
    headers = [
        ("Content-Type", "application/xml"),
        ("x-amz-request-id", request_id),
        ("x-amz-id-2", host_id),
        ("Content-Length", str(len(body))),
    ]
    return status, headers, body


# The query protocol's throttling errors that are not the default (HTTP 400 ``Throttling``).
_QUERY_THROTTLES = {
    "sqs": ("403 Forbidden", "RequestThrottled", "Request is throttled."),
    "sns": ("400 Bad Request", "ThrottlingException", "Rate exceeded"),
}


def _rest_json_error(status: str, code: str, message: str) -> Response:
    """A REST JSON service's error (SES API v2): its code in ``x-amzn-ErrorType``."""
    body = json.dumps({"message": message}).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("x-amzn-RequestId", str(uuid.uuid4())),
        ("x-amzn-ErrorType", code),
        ("Content-Length", str(len(body))),
    ]
    return status, headers, body


def _is_sesv2(environ: dict[str, Any], service: str) -> bool:
    return service == "ses" and environ.get("PATH_INFO", "").startswith("/v2/")


def throttle_response(environ: dict[str, Any], service: str) -> Response:
    """(status line, headers, body) of the service's throttling error for this request."""
    if service == "s3":
        return _s3_error(environ, "503 Slow Down", "SlowDown", "Please reduce your request rate.")
    if _is_sesv2(environ, service):
        return _rest_json_error(
            "429 Too Many Requests",
            "TooManyRequestsException",
            "Too many requests have been made to the operation.",
        )
    if "HTTP_X_AMZ_TARGET" in environ:
        if service == "dynamodb":
            return _json_error(
                "400 Bad Request",
                "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                "The level of configured provisioned throughput for the table was exceeded. "
                "Consider increasing your provisioning level with the UpdateTable API.",
                None,
            )
        if service == "sqs":
            return _json_error(
                "403 Forbidden",
                "com.amazonaws.sqs#RequestThrottled",
                "Request is throttled.",
                "RequestThrottled;Sender",
            )
        return _json_error("400 Bad Request", "ThrottlingException", "Rate exceeded", None)
    status, code, message = _QUERY_THROTTLES.get(
        service, ("400 Bad Request", "Throttling", "Rate exceeded")
    )
    return _query_error(service, status, code, message)


def access_denied_response(environ: dict[str, Any], service: str, message: str) -> Response:
    """(status line, headers, body) of the service's own error for a call IAM refused:
    DynamoDB 400 ``AccessDeniedException`` (JSON), SQS 403 ``AccessDenied`` (JSON with
    ``x-amzn-query-error``, or XML), SNS 403 ``AuthorizationError`` (XML), S3 403
    ``AccessDenied`` (XML, no body for HEAD); other JSON services 400 ``AccessDeniedException``,
    other query services 403 ``AccessDenied``."""
    if service == "s3":
        return _s3_error(environ, "403 Forbidden", "AccessDenied", message)
    if _is_sesv2(environ, service):
        return _rest_json_error("403 Forbidden", "AccessDeniedException", message)
    if "HTTP_X_AMZ_TARGET" in environ:
        code = "com.amazon.coral.service#AccessDeniedException"
        if service == "sqs":
            return _json_error("403 Forbidden", code, message, "AccessDenied;Sender")
        return _json_error("400 Bad Request", code, message, None)
    code = "AuthorizationError" if service == "sns" else "AccessDenied"
    return _query_error(service, "403 Forbidden", code, message)
