"""The server's front door: the hot services' calls straight to moto's response classes.

moto's server routes each request through its DomainDispatcherApplication (the service from the
signature's credential scope, under a lock) and a Flask app per service (a request context, URL
routing, a Flask Response). For the calls the pipeline makes most (DynamoDB, DynamoDB Streams,
SQS, SNS: every one a POST to ``/``) that is about a third of the server's CPU per call
(docs/performance.md, P9). Here such a call is dispatched as moto's own view would dispatch it:
moto's request class, marked as coming from its server as its Flask app's subclass is, the same
handler (the service's ``{0}/`` URL rule), a ClientError answered as moto's view answers it (400,
its message). Every other request (S3, Lambda's REST paths, CloudFormation, unsigned calls, any
other path) goes to moto's dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.moto_api import recorder
from moto.sns.responses import SNSResponse
from moto.sqs.responses import SQSResponse
from werkzeug.wrappers import Response

from emulator.core import calls

# The credential scope's service -> moto's handler for POST / (each service's `{0}/` URL rule).
# DynamoDB Streams signs as `dynamodb`; its X-Amz-Target tells it apart, as moto's dispatcher does.
_HANDLERS: dict[str, Callable[..., Any]] = {
    "dynamodb": DynamoHandler.dispatch,
    "sqs": SQSResponse.dispatch,
    "sns": SNSResponse.dispatch,
}
_STREAMS_TARGET = "DynamoDBStreams"


class _ServerRequest(Request):
    """moto's request, as its server hands it over (moto then leaves the Date header to us)."""

    from_wsgi_server = True


class FrontDoor:
    """WSGI app: a signed POST / of a hot service to its moto handler, the rest to ``app``."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        handler = self.handler(environ)
        if handler is None:
            return self.app(environ, start_response)
        request = _ServerRequest(environ)
        recorder._record_request(request)  # as moto's view records (off unless asked)
        try:
            result = handler(request, request.raw_url, dict(request.headers))
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        return Response(response=content, status=status, headers=headers)(environ, start_response)

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
