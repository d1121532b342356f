"""A fast path through moto 5.2.6's request parser and response serializer for the hottest
operations of the JSON protocols and SNS's query protocol.

Gap: moto/core/responses.py ``BaseResponse.serialized`` hands every result to the generic,
shape-driven serializer (moto/core/serialize.py ``JSONSerializer``): for every member of every
value it builds an ``AttributePickerContext``, tries each alias provider, keeps a key path, then
``json.dumps`` the copy. That is about half of the server's CPU for PutItem, GetItem and
GetRecords, where a response is an item or a list of records in the wire's own JSON shape already.

For the operations in FAST_OPERATIONS (DynamoDB PutItem, GetItem, Query, Scan, BatchGetItem,
TransactGetItems, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems; SQS SendMessage,
SendMessageBatch, ReceiveMessage, DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility,
GetQueueAttributes; DynamoDB Streams GetRecords), a successful result of the JSON protocol is
dumped directly: bytes (blob members) as base64, datetimes (timestamp members) as epoch seconds
with milliseconds, enums by value, ``None`` members left out as the serializer leaves them out.
What botocore parses from it is what it parses from the serializer's body (tests compare both
through boto3); the ``Content-Type`` is the protocol's, and handlers' own headers (DynamoDB's
x-amz-crc32, computed over this body) are kept. Errors, other operations, SQS's query (XML)
protocol and any value the dump does not know go through moto's serializer as before.

SNS Publish and PublishBatch (FAST_QUERY_OPERATIONS) answer in the query protocol's XML, which
moto's serializer builds as a dict of the same shape walk and hands to xmltodict (a quarter of
the server's CPU for a PublishBatch of ten). Their results (flat entries of strings, booleans and
numbers, in lists) are written directly, byte for byte what moto writes (a hypothesis test
compares the two on any text); a value of another kind, a key moto would find through an alias,
pretty-printed responses and errors still go through moto's serializer.

Requests of the same operations: moto/core/responses.py ``BaseResponse.parse_parameters`` walks
the whole JSON body against the operation's input shape (moto/core/parse.py ``JSONParser``, a
``getattr`` dispatch per value: every attribute of every item), where it changes something only
for the members it converts (blobs from base64, timestamps, floats) and the nulls it leaves out.
A body that names none of the operation's converted members (for DynamoDB's items: ``B`` and
``BS``), holds no ``null`` and no ``\\u`` escape (an escaped name could spell one) parses to
what ``json.loads`` gives, so it is loaded so; any other body, and any body that is not a JSON
object, goes through moto's parser as before.

Lookups moto repeats on every request, memoised (their answers never change in a process):
``moto.backends.list_of_moto_modules`` lists moto's package directory (a listdir and ~50 stats; the
server's request router calls it twice per request), ``moto.core.utils.method_names_from_class``
(``inspect.getmembers`` of the handler class, from ``BaseResponse.call_action``) and
``camelcase_to_underscores`` (a character loop: the action's name per request, every queue
attribute's name each time SQS builds ``Queue.attributes``, as its SendMessage does for every
message; kept for the last 1,024 names). And ``BackendDict``'s lookup of an account's backends
(``sqs_backends[account]``, several per request) rebuilds the list of its keys and scans moto's
registry of backend dicts (an ``__eq__`` each) on every call; once the account's backends exist it
is a dict lookup (both only ever grow, and ``BackendDict.reset`` empties every dict with the
registry). And moto's random identifiers (``MotoRandom.get_random_string``: the 52-character request
id of every response; ``get_random_hex``) draw one ``choice`` per character: one ``choices`` call
instead, same alphabet and random source (seedable as before).
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import datetime as dt
import functools
import json
import string
from decimal import Decimal
from enum import Enum
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from botocore.model import OperationModel, Shape
from moto import backends as moto_backends
from moto import settings
from moto.core import responses as moto_responses
from moto.core import utils as moto_utils
from moto.core.base_backend import BackendDict
from moto.core.common_types import TYPE_RESPONSE
from moto.core.request import Request
from moto.core.responses import ActionResult, BaseResponse, EmptyResult, PaginatedResult
from moto.core.utils import get_service_model
from moto.moto_api._internal.moto_random import HEX_CHARS, MotoRandom
from moto.sqs import models as sqs_models

from emulator.services.patching import original, replace

FAST_OPERATIONS: dict[str, frozenset[str]] = {
    "dynamodb": frozenset(
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
        }
    ),
    "sqs": frozenset(
        {
            "SendMessage",
            "SendMessageBatch",
            "ReceiveMessage",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "GetQueueAttributes",
        }
    ),
    "dynamodbstreams": frozenset({"GetRecords"}),
}
CONTENT_TYPE = "application/x-amz-json-1.0"  # DynamoDB, DynamoDB Streams and SQS: awsJson1_0
FAST_QUERY_OPERATIONS: dict[str, frozenset[str]] = {"sns": frozenset({"Publish", "PublishBatch"})}
QUERY_CONTENT_TYPE = "text/xml"

stats = {"fast": 0, "generic": 0}  # responses of the fast operations each way (tests look)
_CONVERTED_TYPES = frozenset({"blob", "timestamp", "float", "double"})


class _Unknown(TypeError):
    pass


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise _Unknown(type(value).__name__)


def dumps(result: Any) -> str:
    if result is None:
        return "{}"
    return json.dumps(result, default=_default, separators=(",", ":"))


def _json_protocol(response: BaseResponse) -> bool:
    content_type = response.headers.get("Content-Type", "") or ""
    return content_type.startswith("application/x-amz-json")


def serialized(self: BaseResponse, action_result: ActionResult) -> TYPE_RESPONSE:
    """BaseResponse.serialized with the fast path (see the module docstring)."""
    operations = FAST_OPERATIONS.get(self.service_name or "") or FAST_QUERY_OPERATIONS.get(
        self.service_name or "", frozenset()
    )
    if (
        not operations
        or isinstance(action_result, PaginatedResult)
        or isinstance(action_result.result, Exception)
    ):
        return _original_serialized(self, action_result)
    action = self._get_action()
    if action not in operations:
        return _original_serialized(self, action_result)
    answer = _fast_answer(self, action, action_result)
    if answer is None:
        stats["generic"] += 1
        return _original_serialized(self, action_result)
    stats["fast"] += 1
    content_type, body = answer
    headers = {"Content-Type": content_type}
    headers.update(self.response_headers)
    return 200, headers, body


def _fast_answer(
    response: BaseResponse, action: str, action_result: ActionResult
) -> tuple[str, str] | None:
    """(Content-Type, body) of a successful result, or None: moto's serializer writes it."""
    if action in FAST_QUERY_OPERATIONS.get(response.service_name or "", ()):
        service_model = get_service_model(response.boto3_service_name)
        if (
            response.determine_response_protocol(service_model) == "query"
            and not settings.PRETTIFY_RESPONSES
        ):
            with contextlib.suppress(_Unknown):
                operation = service_model.operation_model(action)
                return QUERY_CONTENT_TYPE, query_response(operation, action_result)
    elif _json_protocol(response):
        with contextlib.suppress(_Unknown, ValueError):
            result = action_result.result
            return CONTENT_TYPE, "{}" if isinstance(action_result, EmptyResult) else dumps(result)
    return None


def query_response(operation: OperationModel, action_result: ActionResult) -> str:
    """What moto's QuerySerializer writes for a successful result of ``operation``: the
    ``<Operation>Response`` element (the service's namespace), its result wrapper, and the
    ``request-id`` placeholder that moto's dispatch replaces. _Unknown for a value of a kind it
    does not cover."""
    namespace = operation.metadata.get("xmlNamespace")
    if namespace is not None and not isinstance(namespace, str):
        raise _Unknown("namespace")
    root = f"{operation.name}Response"
    opening = root if namespace is None else f"{root} xmlns={quoteattr(namespace)}"
    shape = operation.output_shape
    result = ""
    if shape is not None:
        content = (
            "" if isinstance(action_result, EmptyResult) else _xml(action_result.result, shape)
        )
        result = _element(shape.serialization.get("resultWrapper", f"{shape.name}Result"), content)
    metadata = "<ResponseMetadata><RequestId>request-id</RequestId></ResponseMetadata>"
    return f"<{opening}>{result}{metadata}</{root}>"


def _element(name: str, content: str) -> str:
    return f"<{name}>{content}</{name}>" if content else f"<{name}/>"  # short empty elements


def _xml(value: Any, shape: Shape) -> str:  # noqa: PLR0911 - one return per kind of shape
    """The content moto's query serializer (xmltodict underneath) writes for ``value``: members
    in the shape's order, None members left out, a non-flattened list's items as ``member``
    elements (an item of no content left out), booleans as true/false, text escaped."""
    if value is None:
        return ""
    serialization = shape.serialization
    if serialization.get("xmlAttribute") or serialization.get("xmlNamespace"):
        raise _Unknown(shape.name)
    kind = shape.type_name
    if kind == "string":
        return escape(str(value))
    if kind == "boolean":
        return "true" if value is True or str(value).lower() == "true" else "false"
    if kind in {"integer", "long"}:
        return str(int(value))
    if kind == "structure" and isinstance(value, dict) and value.keys() <= shape.members.keys():
        return "".join(
            _element(member.serialization.get("name", name), _xml(value[name], member))
            for name, member in shape.members.items()
            if value.get(name) is not None
        )
    if kind == "list" and not shape.is_flattened and isinstance(value, list):
        member = shape.member
        name = member.serialization.get("name", "member")
        if any(item is None for item in value):
            raise _Unknown("None in a list")  # moto writes "None" or nothing, by the member's kind
        items = (_xml(item, member) for item in value)
        if member.type_name == "structure":
            return "".join(_element(name, item) for item in items if item)
        return "".join(_element(name, item) for item in items)
    raise _Unknown(kind)


_original_serialized: Any = BaseResponse.serialized


@functools.cache
def converted_names(service: str, action: str) -> tuple[bytes, ...]:
    """The JSON names (quoted, as bytes) of the operation's input members whose value moto's
    parser converts: a blob, timestamp or float, or a list or map of them; at any depth."""
    names: set[str] = set()
    seen: set[str] = set()

    def converts(shape: Any) -> bool:
        if shape.type_name == "list":
            shape = shape.member
        elif shape.type_name == "map":
            shape = shape.value
        return shape.type_name in _CONVERTED_TYPES

    def walk(shape: Any) -> None:
        if shape.name in seen:
            return
        seen.add(shape.name)
        if shape.type_name == "structure":
            for name, member in shape.members.items():
                if converts(member):
                    names.add(member.serialization.get("name", name))
                walk(member)
        elif shape.type_name == "list":
            walk(shape.member)
        elif shape.type_name == "map":
            walk(shape.value)

    shape = get_service_model(service).operation_model(action).input_shape
    if shape is not None:
        walk(shape)
    return tuple(f'"{name}"'.encode() for name in sorted(names))


def parse_parameters(self: BaseResponse, request: Request) -> None:
    """BaseResponse.parse_parameters with the fast path (see the module docstring)."""
    operations = FAST_OPERATIONS.get(self.service_name or "")
    if operations is not None and _json_protocol(self):
        action = self._get_action()
        body = request.data
        if (
            action in operations
            and isinstance(body, bytes)
            and body
            and b"null" not in body
            and b"\\u" not in body
            and not any(name in body for name in converted_names(self.service_name, action))
        ):
            try:
                params = json.loads(body)
            except ValueError:
                params = None
            if isinstance(params, dict):
                self.params = params
                return
    _original_parse_parameters(self, request)


_original_parse_parameters: Any = BaseResponse.parse_parameters


@functools.cache
def list_of_moto_modules() -> tuple[str, ...]:
    return tuple(_original_list_of_moto_modules())


@functools.cache
def method_names_from_class(clazz: object) -> list[str]:
    return _original_method_names(clazz)


@functools.lru_cache(maxsize=1024)
def camelcase_to_underscores(argument: str) -> str:
    return _original_camelcase_to_underscores(argument)


def backends_of_account(self: BackendDict, account_id: str) -> Any:
    """BackendDict.__getitem__, a dict lookup once the account's backends exist."""
    try:
        return dict.__getitem__(self, account_id)
    except KeyError:
        return _original_backends_of_account(self, account_id)


def get_random_string(
    self: MotoRandom, length: int = 20, include_digits: bool = True, lower_case: bool = False
) -> str:
    pool = string.ascii_letters + (string.digits if include_digits else "")
    text = "".join(self.choices(pool, k=length))
    return text.lower() if lower_case else text


def get_random_hex(self: MotoRandom, length: int = 8) -> str:
    return "".join(map(str, self.choices(HEX_CHARS, k=length)))


_original_list_of_moto_modules: Any = moto_backends.list_of_moto_modules
_original_method_names: Any = moto_responses.method_names_from_class
_original_camelcase_to_underscores: Any = moto_utils.camelcase_to_underscores
_original_backends_of_account: Any = BackendDict.__getitem__
# the modules that call camelcase_to_underscores per request or per message, by their own name
_CAMELCASE_CALLERS = (moto_utils, moto_responses, sqs_models)


def install() -> None:
    global _original_serialized, _original_parse_parameters  # noqa: PLW0603
    global _original_list_of_moto_modules, _original_method_names  # noqa: PLW0603
    global _original_camelcase_to_underscores, _original_backends_of_account  # noqa: PLW0603
    _original_serialized = original(BaseResponse, "serialized")
    _original_parse_parameters = original(BaseResponse, "parse_parameters")
    _original_list_of_moto_modules = original(moto_backends, "list_of_moto_modules")
    _original_method_names = original(moto_responses, "method_names_from_class")
    _original_camelcase_to_underscores = original(moto_utils, "camelcase_to_underscores")
    _original_backends_of_account = original(BackendDict, "__getitem__")
    replace(BaseResponse, "serialized", serialized)
    replace(BaseResponse, "parse_parameters", parse_parameters)
    replace(moto_backends, "list_of_moto_modules", list_of_moto_modules)
    replace(moto_responses, "method_names_from_class", method_names_from_class)
    replace(MotoRandom, "get_random_string", get_random_string)
    replace(MotoRandom, "get_random_hex", get_random_hex)
    for module in _CAMELCASE_CALLERS:
        replace(module, "camelcase_to_underscores", camelcase_to_underscores)
    replace(BackendDict, "__getitem__", backends_of_account)
