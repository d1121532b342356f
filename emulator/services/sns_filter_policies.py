"""SNS subscription filter policies matched as SNS does, with emulator/core/filters.py.

Gaps in moto 5.2.6's ``moto.sns.utils.FilterPolicyMatcher`` (measured against SNS's documented
semantics; tests/unit/emulator/services/test_sns_filter_policies.py keeps each case):

- ``FilterPolicyScope: MessageBody``: a top-level ``$or`` raises TypeError inside Publish, a
  ``numeric`` rule on a string value raises TypeError, ``null`` never matches a JSON null,
  ``equals-ignore-case`` never matches;
- ``prefix`` / ``suffix`` with ``{"equals-ignore-case": ...}`` never match (either scope);
- SetSubscriptionAttributes ``FilterPolicyScope`` after ``FilterPolicy`` leaves the policy
  matched in its old scope (AWS applies the new scope to the policy in place);
- a ``$or`` multiplies moto's combination count by its nesting depth at every level, so a
  two-branch policy of a few values ("too complex") is refused that SNS accepts. Here a policy
  with ``$or`` is validated as SNS reads it, the OR of its alternatives: each alternative (no
  ``$or`` left) by moto's own checks, and the sum of their value combinations against the 150.

Here the matcher is emulator/core/filters.py (the language EventBridge and Lambda filtering share):

- MessageBody scope: the message parsed as JSON (a body that is not a JSON object never matches)
  against the policy, nested keys and arrays as in EventBridge patterns.
- MessageAttributes scope: the policy's keys are attribute names, matched against the document
  ``filters.sns_attributes_view`` makes of the message's attributes.

moto's own policy validation (at most 5 keys, 150 combinations, operator syntax, SNS's error
messages) runs first; a policy it accepts that our matcher rejects (``wildcard``, ``cidr``) is
``InvalidParameter`` naming the operator. RawMessageDelivery is moto's (kept).
``install()`` is called by moto_patches.install(); patching.restore_all() undoes it.
"""

from __future__ import annotations

import json
from typing import Any

from moto.sns import models as sns_models
from moto.sns.exceptions import SNSInvalidParameter
from moto.sns.models import SNSBackend

from emulator.core.filters import (
    InvalidPatternError,
    Pattern,
    compile_event_pattern,
    sns_attributes_view,
)
from emulator.services import patching

MESSAGE_ATTRIBUTES = "MessageAttributes"
MESSAGE_BODY = "MessageBody"


class FilterPolicy:
    """A subscription's filter policy in its scope (moto's FilterPolicyMatcher's interface)."""

    def __init__(self, filter_policy: dict[str, Any], filter_policy_scope: str | None):
        self.scope = filter_policy_scope or MESSAGE_ATTRIBUTES
        if self.scope not in (MESSAGE_ATTRIBUTES, MESSAGE_BODY):
            raise SNSInvalidParameter(
                f"Invalid parameter: FilterPolicyScope: {filter_policy_scope!r} is not "
                f"{MESSAGE_ATTRIBUTES} or {MESSAGE_BODY}"
            )
        self.pattern: Pattern | None = None
        if filter_policy:
            try:
                self.pattern = compile_event_pattern(filter_policy)
            except InvalidPatternError as error:
                raise SNSInvalidParameter(f"Invalid parameter: FilterPolicy: {error}") from None

    def matches(self, message_attributes: dict[str, Any] | None, message: str) -> bool:
        if self.pattern is None:
            return True
        if self.scope == MESSAGE_ATTRIBUTES:
            return self.pattern.matches(sns_attributes_view(message_attributes))
        try:
            body = json.loads(message)
        except (TypeError, ValueError):
            return False
        return isinstance(body, dict) and self.pattern.matches(body)


MAX_COMBINATIONS = 150


def alternatives(policy: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy as the OR of policies without ``$or`` (each ``$or`` branch combined with the
    keys beside it, at any depth)."""
    expanded: list[dict[str, Any]] = [{}]
    for key, value in policy.items():
        if key == "$or" and isinstance(value, list) and all(isinstance(v, dict) for v in value):
            options = [option for branch in value for option in alternatives(branch)]
        elif isinstance(value, dict):
            options = [{key: option} for option in alternatives(value)]
        else:
            options = [{key: value}]
        expanded = [{**done, **option} for done in expanded for option in options]
    return expanded


def combinations(policy: dict[str, Any]) -> int:
    """The product of the number of values of every key (nested keys included)."""
    total = 1
    for value in policy.values():
        total *= combinations(value) if isinstance(value, dict) else len(value)
    return total


def install() -> None:
    original_set = patching.original(SNSBackend, "set_subscription_attributes")
    original_validate = patching.original(SNSBackend, "_validate_filter_policy")

    def validate_filter_policy(self: SNSBackend, value: Any, scope: str | None) -> None:
        if not isinstance(value, dict) or "$or" not in json.dumps(value):
            original_validate(self, value, scope)
            return
        options = alternatives(value)
        for option in options:
            original_validate(self, option, scope)
        if sum(combinations(option) for option in options) > MAX_COMBINATIONS:
            raise SNSInvalidParameter(
                "Invalid parameter: FilterPolicy: Filter policy is too complex"
            )

    def set_subscription_attributes(self: SNSBackend, arn: str, name: str, value: Any) -> None:
        original_set(self, arn, name, value)
        if name != "FilterPolicyScope":
            return
        subscription = next((s for s in self.subscriptions.values() if s.arn == arn), None)
        policy = getattr(subscription, "_filter_policy", None)
        if subscription is not None and policy:
            subscription._filter_policy_matcher = FilterPolicy(policy, value)

    patching.replace(sns_models, "FilterPolicyMatcher", FilterPolicy)
    patching.replace(SNSBackend, "set_subscription_attributes", set_subscription_attributes)
    patching.replace(SNSBackend, "_validate_filter_policy", validate_filter_policy)
