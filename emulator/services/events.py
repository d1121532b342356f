"""EventBridge rules as AWS runs them: event patterns matched with emulator/core/filters.py, and SQS
targets sent the event as EventBridge sends it.

Gaps in moto 5.2.6 (moto/events/models.py) and what this module does about them:

- ``Rule.send_to_targets`` matches with moto's ``EventPattern``, which flattens the event and
  never descends into arrays of objects (``{"items": {"k": ["a"]}}`` never matches
  ``{"items": [{"k": "a"}]}``), and it delivers for DISABLED rules too. Here a rule delivers only
  when ENABLED and its pattern matches by emulator/core/filters.py (the language EventBridge, Lambda
  filtering and SNS share; ``wildcard`` and ``cidr`` are refused at PutRule as not emulated).
- An SQS target gets moto's template rendering without ``account`` and ignores ``Input`` and
  ``InputPath``. Here the message body is the event as EventBridge builds it (``version``,
  ``id``, ``detail-type``, ``source``, ``account``, ``time`` as ``YYYY-MM-DDTHH:MM:SSZ``,
  ``region``, ``resources``, ``detail``), or the target's ``Input`` text, or the JSON of what its
  ``InputPath`` selects; ``SqsParameters.MessageGroupId`` is kept. The queue's policy decides
  whether EventBridge may send, and a delivery that fails is retried or dead-lettered as the
  target's RetryPolicy and DeadLetterConfig say (delivery_failures.py).
- PutRule / PutTargets (and AWS::Events::Rule in CloudFormation, which calls them) accept
  anything. Here an event pattern our matcher rejects is ``InvalidEventPatternException``, and an
  SQS target with an ``InputTransformer`` (not emulated) or an ``InputPath`` that is not JSONPath
  is ``ValidationException``: the stack fails to deploy instead of delivering something else.

- ``Ref`` of an ``AWS::Events::EventBus`` in CloudFormation gives moto's EventBus object (it
  has no ``physical_resource_id``), so a rule or target naming its bus with ``!Ref`` fails to
  deploy. Here it gives the bus's name, as on AWS.
- An ``AWS::Events::EventBus``'s ``Policy`` is dropped by moto's CloudFormation model: the bus
  would take anyone's PutEvents its policy refuses. Here it becomes the bus's policy, as
  PutPermission with ``Policy`` sets it, which the local IAM reads (emulator/iam/resources.py).

Other targets (CloudWatch Logs, archives, other buses) keep moto's delivery, after the match
above. ``install()`` is called by moto_patches.install(); patching.restore_all() undoes it.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import threading
from typing import Any

from jsonpath_ng import parse as parse_json_path
from moto.core.exceptions import JsonRESTError
from moto.events.exceptions import InvalidEventPatternException
from moto.events.models import EventBus, EventPattern, EventsBackend, Rule, events_backends

from emulator.core.arns import service_of
from emulator.core.filters import InvalidPatternError, Pattern, compile_event_pattern
from emulator.services import delivery_failures, patching

log = logging.getLogger("emulator.events")

# The fields of an event as EventBridge delivers it, in its order.
EVENT_FIELDS = (
    "version",
    "id",
    "detail-type",
    "source",
    "account",
    "time",
    "region",
    "resources",
    "detail",
)

_patterns: dict[str, Pattern] = {}
_patterns_lock = threading.Lock()


def rule_pattern(raw: str) -> Pattern:
    """A rule's EventPattern (JSON text), compiled once per distinct text."""
    with _patterns_lock:
        compiled = _patterns.get(raw)
        if compiled is None:
            compiled = _patterns[raw] = compile_event_pattern(raw)
        return compiled


def _iso_time(value: Any) -> str:
    if isinstance(value, int | float):
        moment = dt.datetime.fromtimestamp(float(value), dt.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def aws_event(moto_event: dict[str, Any]) -> dict[str, Any]:
    """moto's event message (``time`` in epoch seconds, plus ``ingestion-time``) as EventBridge
    delivers it."""
    event = {name: moto_event.get(name) for name in EVENT_FIELDS}
    event["version"] = event["version"] or "0"
    event["time"] = _iso_time(moto_event.get("time"))
    event["resources"] = event["resources"] or []
    return event


def target_body(target: dict[str, Any], event: dict[str, Any]) -> str | None:
    """What an SQS target receives: ``Input``, else the JSON ``InputPath`` selects (None when it
    selects nothing), else the whole event."""
    if "Input" in target:
        return target["Input"]
    path = target.get("InputPath")
    if path:
        found = parse_json_path(path).find(event)
        return json.dumps(found[0].value) if found else None
    return json.dumps(event)


def _send_to_queue(rule: Rule, target: dict[str, Any], event: dict[str, Any]) -> None:
    body = target_body(target, event)
    if body is None:
        log.warning(
            "events: rule %s target %s: InputPath %s selects nothing; not sent",
            rule.name,
            target.get("Id"),
            target.get("InputPath"),
        )
        return
    group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
    delivery_failures.deliver_to_target(rule, target, event, body, group_id)


def _is_queue(target: dict[str, Any]) -> bool:
    return service_of(str(target.get("Arn", ""))) == "sqs"


def _validate_pattern(raw: str | None) -> None:
    if not raw:
        return
    try:
        rule_pattern(raw)
    except InvalidPatternError as error:
        raise InvalidEventPatternException(reason=str(error)) from None


def _validate_targets(targets: list[dict[str, Any]]) -> None:
    for target in targets:
        if not _is_queue(target):
            continue
        where = f"target {target.get('Id')!r} ({target['Arn']})"
        if "InputTransformer" in target:
            raise JsonRESTError(
                "ValidationException",
                f"{where}: InputTransformer is not emulated by the local stack "
                "(use Input or InputPath, or none)",
            )
        path = target.get("InputPath")
        if path:
            try:
                parse_json_path(path)
            except Exception as error:
                raise JsonRESTError(
                    "ValidationException", f"{where}: InputPath {path!r} is not JSONPath: {error}"
                ) from None


def _bus_from_cloudformation(original: Any) -> Any:
    def create(
        cls: type[EventBus],
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> EventBus:
        create_bus = original.__get__(None, cls)  # moto's classmethod, bound to the class
        bus = create_bus(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        policy = cloudformation_json["Properties"].get("Policy")
        if policy:
            text = policy if isinstance(policy, str) else json.dumps(policy)
            backend = events_backends[account_id][region_name]
            backend.put_permission(bus.name, None, None, None, None, text)  # type: ignore[arg-type]
        return bus

    return classmethod(create)


def install() -> None:
    original_send = patching.original(Rule, "send_to_targets")
    original_put_rule = patching.original(EventsBackend, "put_rule")
    original_put_targets = patching.original(EventsBackend, "put_targets")

    def send_to_targets(
        self: Rule, original_event: dict[str, Any], transform_input: bool = True
    ) -> None:
        if self.state != "ENABLED":
            return
        raw = self.event_pattern._raw_pattern
        event = aws_event(original_event)
        if raw and not rule_pattern(raw).matches(event):
            return
        others = []
        for target in self.targets:
            if _is_queue(target):
                _send_to_queue(self, target, event)
            else:
                others.append(target)
        if others:  # moto's own delivery, the match already made
            clone = copy.copy(self)
            clone.targets = others
            clone.event_pattern = EventPattern(None, {})
            original_send(clone, original_event, transform_input)

    def put_rule(self: EventsBackend, name: str, *args: Any, **kwargs: Any) -> Rule:
        _validate_pattern(kwargs.get("event_pattern"))
        return original_put_rule(self, name, *args, **kwargs)

    def put_targets(
        self: EventsBackend, name: str, event_bus_arn: str | None, targets: list[dict[str, Any]]
    ) -> None:
        _validate_targets(targets)
        return original_put_targets(self, name, event_bus_arn, targets)

    patching.replace(EventBus, "physical_resource_id", property(lambda self: self.name))
    patching.replace(
        EventBus,
        "create_from_cloudformation_json",
        _bus_from_cloudformation(patching.original(EventBus, "create_from_cloudformation_json")),
    )
    patching.replace(Rule, "send_to_targets", send_to_targets)
    patching.replace(EventsBackend, "put_rule", put_rule)
    patching.replace(EventsBackend, "put_targets", put_targets)
