"""``python -m emulator filter-test``: try Lambda event filters against a record or an event.

    python -m emulator filter-test --pattern '<json>' --event event.json
    python -m emulator filter-test --function SurveyFunction --event event.json [--template t.yaml]
    python -m emulator filter-test --rule ConsumerRule --event eventbridge-event.json
    python -m emulator filter-test --subscription ConsumerSubscription --event sns-message.json

--rule: the ``EventPattern`` of an ``AWS::Events::Rule`` against an EventBridge event (the whole
event: ``source``, ``detail-type``, ``detail``, ...). --subscription: the ``FilterPolicy`` of an
``AWS::SNS::Subscription``, in its ``FilterPolicyScope``, against a message file
``{"Message": <string or JSON>, "MessageAttributes": {...}}`` (attributes as Publish takes them,
``{"DataType", "StringValue"}``, or as the SNS envelope shows them, ``{"Type", "Value"}``).
A file holding a JSON list tests each element.

The event file holds one record, or a whole Lambda event ({"Records": [...]}), in which case
each record is tested and reported. With --function the filters are those of the function's
SQS / DynamoDB / Kinesis event sources in the SAM template (SAM ``Events`` or plain
``AWS::Lambda::EventSourceMapping`` resources); a record passes when one of an event source's
filters matches it (a source without FilterCriteria passes everything).

Exit status: 0 when a record matches, 1 when none does, 2 on a usage error, an invalid pattern,
an unknown function or an unreadable event/template (message on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.core.filters import (
    SOURCES,
    FilterCriteria,
    InvalidPatternError,
    compile_event_pattern,
    compile_pattern,
    detect_source,
    sns_attributes_view,
)

ROOT = Path(__file__).resolve().parents[2]
MATCH, NO_MATCH, ERROR = 0, 1, 2
# SAM event type / EventSourceArn attribute -> the record source the filter sees.
_SAM_SOURCES = {"SQS": "sqs", "DynamoDB": "dynamodb", "Kinesis": "kinesis"}


class UsageError(Exception):
    """Anything that makes the command exit 2."""


@dataclass
class EventSource:
    name: str  # SAM event name or ESM logical id
    source: str  # "sqs", "dynamodb" or "kinesis"
    criteria: FilterCriteria


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m emulator filter-test",
        description="Test Lambda event filters (FilterCriteria) against an event or a record.",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--pattern", help="a filter pattern (JSON)")
    what.add_argument("--function", metavar="LOGICAL_ID", help="use this function's filters")
    what.add_argument("--rule", metavar="LOGICAL_ID", help="use this rule's EventPattern")
    what.add_argument(
        "--subscription", metavar="LOGICAL_ID", help="use this SNS subscription's FilterPolicy"
    )
    parser.add_argument("--event", required=True, type=Path, help="record or event JSON file")
    parser.add_argument(
        "--template",
        type=Path,
        help="SAM template for --function, --rule, --subscription "
        "(default: ./template.yaml, else the repo's)",
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        help="record type when the records carry no eventSource (default: from the records)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse already printed the usage error
        return MATCH if exit_.code == 0 else ERROR
    if args.rule is not None or args.subscription is not None:
        return _test_resource(args)
    try:
        records = _load_records(args.event)
        if args.pattern is not None:
            sources = [_from_pattern(args.pattern, args.source)]
        else:
            sources = function_event_sources(_template_path(args.template), args.function)
    except (UsageError, InvalidPatternError) as error:
        print(f"filter-test: {error}", file=sys.stderr)
        return ERROR

    any_match = False
    for index, record in enumerate(records):
        matched = _matching_sources(record, sources, args.source)
        any_match = any_match or bool(matched)
        label = f"record {index}: " if len(records) > 1 else ""
        via = f" ({', '.join(matched)})" if matched and args.function else ""
        print(f"{label}{'match' if matched else 'no match'}{via}")
    return MATCH if any_match else NO_MATCH


def _test_resource(args: argparse.Namespace) -> int:
    """--rule / --subscription: each event (or message) of the file against the pattern."""
    try:
        documents = _load_documents(args.event)
        if args.rule is not None:
            props = _resource_properties(_template_path(args.template), args.rule, RULE_TYPE)
            pattern = _resource_pattern(props.get("EventPattern"), f"{args.rule}.EventPattern")
            views = documents
        else:
            props = _resource_properties(
                _template_path(args.template), args.subscription, SUBSCRIPTION_TYPE
            )
            where = f"{args.subscription}.FilterPolicy"
            pattern = _resource_pattern(props.get("FilterPolicy"), where)
            scope = props.get("FilterPolicyScope") or "MessageAttributes"
            views = [_message_view(message, scope) for message in documents]
    except UsageError as error:
        print(f"filter-test: {error}", file=sys.stderr)
        return ERROR
    any_match = False
    for index, view in enumerate(views):
        matched = view is not None and (pattern is None or pattern.matches(view))
        any_match = any_match or matched
        label = f"event {index}: " if len(views) > 1 else ""
        print(f"{label}{'match' if matched else 'no match'}")
    return MATCH if any_match else NO_MATCH


RULE_TYPE = "AWS::Events::Rule"
SUBSCRIPTION_TYPE = "AWS::SNS::Subscription"


def _load_documents(path: Path) -> list[dict[str, Any]]:
    document = _read_json(path)
    documents = document if isinstance(document, list) else [document]
    if not documents or not all(isinstance(d, dict) for d in documents):
        raise UsageError(f"event file {path}: expected a JSON object or a list of objects")
    return documents


def _resource_properties(template_path: Path, logical_id: str, kind: str) -> dict[str, Any]:
    resources = load_template(template_path).get("Resources") or {}
    resource = resources.get(logical_id)
    if not isinstance(resource, dict) or resource.get("Type") != kind:
        known = sorted(
            name
            for name, res in resources.items()
            if isinstance(res, dict) and res.get("Type") == kind
        )
        raise UsageError(
            f"unknown {kind} {logical_id!r} in {template_path} ({', '.join(known) or 'none'})"
        )
    return resource.get("Properties") or {}


def _resource_pattern(value: Any, where: str) -> Any:
    """The pattern (JSON text or object) compiled; None when there is none (matches all)."""
    if value is None or value == {}:
        return None
    try:
        return compile_event_pattern(value)
    except InvalidPatternError as error:
        raise UsageError(f"{where}: {error}") from None


def _message_view(message: dict[str, Any], scope: str) -> dict[str, Any] | None:
    """What an SNS filter policy sees of a message (None: a body that is not a JSON object)."""
    if scope == "MessageAttributes":
        return sns_attributes_view(message.get("MessageAttributes"))
    body = message.get("Message")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


def _from_pattern(pattern: str, source: str | None) -> EventSource:
    return EventSource("--pattern", source or "", FilterCriteria([compile_pattern(pattern)]))


def _matching_sources(
    record: dict[str, Any], sources: list[EventSource], source: str | None
) -> list[str]:
    record_source = source or detect_source(record)
    matched = []
    for event_source in sources:
        if event_source.source and record_source and event_source.source != record_source:
            continue  # an SQS mapping never sees a stream record, and the other way round
        as_source = record_source or (
            event_source.source if event_source.source in SOURCES else None
        )
        if event_source.criteria.matches(record, as_source):
            matched.append(event_source.name)
    return matched


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise UsageError(f"cannot read event file {path}: {error.strerror}") from None
    except ValueError as error:
        raise UsageError(f"event file {path} is not JSON: {error}") from None


def _load_records(path: Path) -> list[dict[str, Any]]:
    document = _read_json(path)
    if isinstance(document, dict) and isinstance(document.get("Records"), list):
        records = document["Records"]
    else:
        records = [document]
    if not records or not all(isinstance(r, dict) for r in records):
        raise UsageError(f"event file {path}: expected a record object or {{'Records': [...]}}")
    return records


def _template_path(template: Path | None) -> Path:
    if template is not None:
        return template
    local = Path("template.yaml")
    return local if local.exists() else ROOT / "template.yaml"


def load_template(path: Path) -> dict[str, Any]:
    """The SAM template, CloudFormation tags (!Ref, !GetAtt, ...) decoded as cfn-lint does."""
    from cfnlint.decode import cfn_yaml  # noqa: PLC0415 (dev dependency, only for --function)

    try:
        return cfn_yaml.load(str(path))
    except FileNotFoundError:
        raise UsageError(f"template {path} not found") from None
    except Exception as error:  # cfn-lint raises its own parse errors
        raise UsageError(f"cannot parse template {path}: {error}") from None


def function_event_sources(template_path: Path, function_id: str) -> list[EventSource]:
    """The polled event sources of a function and their filters, from the template."""
    resources = load_template(template_path).get("Resources") or {}
    function = resources.get(function_id)
    if not isinstance(function, dict) or function.get("Type") not in (
        "AWS::Serverless::Function",
        "AWS::Lambda::Function",
    ):
        functions = sorted(
            name
            for name, res in resources.items()
            if isinstance(res, dict) and str(res.get("Type", "")).endswith("Function")
        )
        raise UsageError(
            f"unknown function {function_id!r} in {template_path} "
            f"(functions: {', '.join(functions) or 'none'})"
        )
    sources = []
    events = (function.get("Properties") or {}).get("Events") or {}
    for name, event in events.items():
        source = _SAM_SOURCES.get(event.get("Type"))
        if source:
            criteria = (event.get("Properties") or {}).get("FilterCriteria")
            sources.append(EventSource(name, source, _criteria(criteria, f"Events.{name}")))
    for name, res in resources.items():
        if isinstance(res, dict) and res.get("Type") == "AWS::Lambda::EventSourceMapping":
            props = res.get("Properties") or {}
            if _refers_to(props.get("FunctionName"), function_id):
                source = _arn_source(props.get("EventSourceArn"), resources)
                sources.append(
                    EventSource(name, source, _criteria(props.get("FilterCriteria"), name))
                )
    if not sources:
        raise UsageError(f"function {function_id!r} has no SQS, DynamoDB or Kinesis event source")
    return sources


def _criteria(criteria: Any, where: str) -> FilterCriteria:
    try:
        return FilterCriteria.from_mapping(criteria)
    except InvalidPatternError as error:
        raise UsageError(f"{where}: {error}") from None


def _refers_to(value: Any, logical_id: str) -> bool:
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"] == logical_id
        target = value.get("Fn::GetAtt")
        if isinstance(target, str):
            target = target.split(".", 1)
        return isinstance(target, list) and bool(target) and target[0] == logical_id
    return value == logical_id


def _arn_source(arn: Any, resources: dict[str, Any]) -> str:
    """sqs / dynamodb / kinesis from an EventSourceArn (!GetAtt Queue.Arn, Table.StreamArn)."""
    target = arn.get("Fn::GetAtt") if isinstance(arn, dict) else None
    if isinstance(target, str):
        target = target.split(".", 1)
    if isinstance(target, list) and target:
        kind = str((resources.get(target[0]) or {}).get("Type", ""))
        for marker, source in (("SQS", "sqs"), ("DynamoDB", "dynamodb"), ("Kinesis", "kinesis")):
            if marker in kind:
                return source
    text = json.dumps(arn)
    for marker, source in ((":sqs:", "sqs"), (":dynamodb:", "dynamodb"), (":kinesis:", "kinesis")):
        if marker in text:
            return source
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
