"""The server's front door: the hot services' calls straight to moto's response classes.

moto's server routes each request through its DomainDispatcherApplication (the service from the
signature's credential scope, under a lock) and a Flask app per service (a request context, URL
routing, a Flask Response). For the calls the pipeline makes most (DynamoDB, DynamoDB Streams,
SQS, SNS: every one a POST to ``/``) that is about a third of the server's CPU per call
(docs/performance.md, P9). Here such a call is dispatched as moto's own view would dispatch it:
moto's request class, marked as coming from its server as its Flask app's subclass is, the same
handler (the service's ``{0}/`` URL rule), a ClientError answered as moto's view answers it (400,
its message). Every other request (S3, Lambda's REST paths, CloudFormation, unsigned calls, any
other path) goes to moto's dispatcher. The handler gets the URL werkzeug would rebuild and the
request's own headers, a body that is no form as werkzeug's form parsing would leave it, and its
answer goes out as werkzeug's Response would send it, without building any of them (together
~40% of a GetItem's time in the app).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from botocore.exceptions import ClientError
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.moto_api import recorder
from moto.sns.responses import SNSResponse
from moto.sqs.responses import SQSResponse
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.sansio.utils import get_host

from emulator.core import calls

# The credential scope's service -> moto's handler for POST / (each service's `{0}/` URL rule).
# DynamoDB Streams signs as `dynamodb`; its X-Amz-Target tells it apart, as moto's dispatcher does.
_HANDLERS: dict[str, Callable[..., Any]] = {
    "dynamodb": DynamoHandler.dispatch,
    "sqs": SQSResponse.dispatch,
    "sns": SNSResponse.dispatch,
}
_STREAMS_TARGET = "DynamoDBStreams"
_FORMS = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})  # werkzeug's
_NO_FIELDS: ImmutableMultiDict[str, Any] = ImmutableMultiDict()


class _ServerRequest(Request):
    """moto's request, as its server hands it over (moto then leaves the Date header to us)."""

    from_wsgi_server = True


def _url(environ: dict[str, Any], request: Request) -> str:
    """``request.raw_url`` of a POST / without a query string, without werkzeug's URL rebuilding
    (~0.2 ms a call): the scheme and the host as werkzeug reads them, and /."""
    if environ.get("QUERY_STRING") or environ.get("RAW_URI", "/") != "/":
        return request.raw_url
    scheme = environ["wsgi.url_scheme"]
    server = (environ["SERVER_NAME"], int(environ["SERVER_PORT"]))
    return f"{scheme}://{get_host(scheme, environ.get('HTTP_HOST'), server)}/"


def _answer(
    status: int, headers: Mapping[str, Any], content: str | bytes | None, start_response: Callable
) -> list[bytes]:
    """What werkzeug's Response makes of a handler's answer, without building one: the body in
    UTF-8, werkzeug's default Content-Type when the handler set none, the body's length."""
    body = content.encode() if isinstance(content, str) else content or b""
    pairs = [(name, str(value)) for name, value in headers.items()]
    names = {name.lower() for name, _ in pairs}
    if "content-type" not in names:
        pairs.append(("Content-Type", "text/plain; charset=utf-8"))
    if "content-length" not in names:
        pairs.append(("Content-Length", str(len(body))))
    start_response(f"{status} {HTTP_STATUS_CODES.get(status, 'UNKNOWN')}", pairs)
    return [body]


class FrontDoor:
    """WSGI app: a signed POST / of a hot service to its moto handler, the rest to ``app``."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        handler = self.handler(environ)
        if handler is None:
            return self.app(environ, start_response)
        request = _ServerRequest(environ)
        if request.mimetype not in _FORMS and "HTTP_CONTENT_ENCODING" not in environ:
            # what werkzeug's form parsing leaves for a body that is no form, without its parser
            body = calls.read_body(environ)
            request.__dict__.update(
                stream=io.BytesIO(body), form=_NO_FIELDS, files=_NO_FIELDS, data=body
            )
        recorder._record_request(request)  # as moto's view records (off unless asked)
        try:
            # the headers are the request's own (moto reads them from it when given none)
            result = handler(request, _url(environ, request), None)
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        return _answer(status, headers, content, start_response)

    @staticmethod
    def handler(environ: dict[str, Any]) -> Callable[..., Any] | None:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != "/":
            return None
        signed = calls.credential(environ)
        if signed is None:
            return None
        service = signed[1].lower()
        if service == "dynamodb" and environ.get("HTTP_X_AMZ_TARGET", "").startswith(
            _STREAMS_TARGET
        ):
            return DynamoDBStreamsHandler.dispatch
        return _HANDLERS.get(service)
