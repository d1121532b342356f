"""Least privilege at run time: every AWS call of a function's worker is decided against that
function's execution role as deployed together with the policy of the resource it reaches (a
bucket, queue, topic or key policy: emulator/iam/resources.py), recorded, and (enforcement on, the
default) refused with the service's own AccessDenied error when they do not allow it.

- The roles: each function's role as moto's IAM holds it after the stack was created (inline
  policies with every Ref / GetAtt resolved, as CloudFormation deploys them), plus the managed
  policies the translated template attaches (SAM adds AWSLambdaBasicExecutionRole, the event
  sources' execution roles, AWSXrayWriteOnlyAccess for Tracing): AWS managed ones from moto's
  copy of their documents, customer managed ones from moto's IAM.
- The calls: the server's middleware knows which function made a request by the worker's own
  access key id (Runtime.caller); emulator.iam.authorizations says what the request asks for, and
  emulator.iam decides. Only function workers' calls are checked: tests, the deployer, the
  event-source-mapping engine (in process, no HTTP) and `invoke` CLI workers are not.
- The record: per function, its policies and each distinct call (action, resource, the
  request's own condition keys (the global ones, the same for every call of a role, left out),
  decision, the grants that allowed it: the role's and the resource policy's) with a count.
  ``dynamodb:LeadingKeys`` values are item data (a caller's number, say): the record keeps only
  their prefix up to the first separator (``CALLER#+4930...`` -> ``CALLER#*``). `up` writes it to
  ``.emulator/iam/<start>-<pid>.json`` beside the template when it stops (read by
  ``python -m emulator iam-report``); ``GET /_emulator/iam`` returns it live.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.iam.models import iam_backends

from emulator.core import calls
from emulator.deploy.deployer import Deployment
from emulator.deploy.function_code import local_code
from emulator.deploy.translate import load_template
from emulator.iam import authorizations, resources
from emulator.iam.policy import (
    RESOURCE_BASED,
    Decision,
    Policy,
    PolicyError,
    Principal,
    Request,
    authorize,
)

log = logging.getLogger("emulator.iam")
RECORD_DIR = Path(".emulator") / "iam"  # beside the template
_REDACT = re.compile(r"^[A-Za-z0-9_\-]*[^A-Za-z0-9_\-]")
_LEADING_KEYS = "dynamodb:leadingkeys"  # item keys: recorded by their prefix alone (redact)


def redact(value: str) -> str:
    """An item key's value as the record keeps it: its prefix up to the first separator."""
    found = _REDACT.match(value)
    return f"{found[0]}*" if found else "*"


def fingerprint(template_path: Path) -> str:
    """What the calls of a run depend on: the template less its Metadata (explanations of unused
    grants change no call) and every function's code and layers (a record of another
    fingerprint says nothing about the current code)."""
    template_path = Path(template_path).resolve()
    template = load_template(template_path)
    template.pop("Metadata", None)
    resources = {
        name: {k: v for k, v in resource.items() if k != "Metadata"}
        for name, resource in template.get("Resources", {}).items()
    }
    digest = hashlib.sha256(
        json.dumps({**template, "Resources": resources}, sort_keys=True).encode()
    )
    code = local_code(load_template(template_path), template_path.parent)
    roots = sorted({d for c in code.values() for d in (c.code_dir, *c.layer_dirs)})
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def deployed_roles(deployment: Deployment) -> dict[str, dict[str, Any]]:
    """{LogicalId: {"role": name, "arn": role ARN, "policies": {policy name: document}}} of the
    stack's functions, read from moto's IAM and the translated template."""
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    roles = {}
    for spec in deployment.functions:
        props = deployment.template["Resources"][spec.logical_id]["Properties"]
        role_ref = props["Role"]
        role_logical_id = role_ref["Fn::GetAtt"][0] if isinstance(role_ref, dict) else None
        role_name = deployment.physical_id(role_logical_id) if role_logical_id else role_ref
        role_name = role_name.rpartition("/")[2]
        role = iam.get_role(role_name)
        policies: dict[str, Any] = {
            name: json.loads(doc) if isinstance(doc, str) else doc
            for name, doc in role.policies.items()
        }
        role_props = deployment.template["Resources"].get(role_logical_id or "", {})
        for arn in deployment.chosen(role_props.get("Properties", {}).get("ManagedPolicyArns", [])):
            policies[arn.rpartition("/")[2]] = resources.managed_policy_document(
                DEFAULT_ACCOUNT_ID, arn
            )
        roles[spec.logical_id] = {"role": role_name, "arn": role.arn, "policies": policies}
    return roles


class Access:
    """Decides, records and (when enforcing) refuses the AWS calls of function workers."""

    def __init__(
        self,
        roles: dict[str, dict[str, Any]],
        *,
        enforce: bool = True,
        region: str = "us-east-1",
        account: str = DEFAULT_ACCOUNT_ID,
        fingerprint: str = "",
        run: dict[str, Any] | None = None,
    ) -> None:
        self.roles = roles
        self.run = run or {}  # which run this is (run_description), for iam-report
        self.policies = {
            logical_id: [Policy.parse(name, doc) for name, doc in role["policies"].items()]
            for logical_id, role in roles.items()
        }
        self.enforce = enforce
        self.region = region
        self.account = account
        self.fingerprint = fingerprint
        self._calls: Counter[tuple[Any, ...]] = Counter()
        self._lock = threading.Lock()
        self._key_schemas: dict[tuple[str, str | None], tuple[str, ...]] = {}

    def _key_schema(self, table: str, index: str | None) -> tuple[str, ...]:
        found = self._key_schemas.get((table, index))
        if found is not None:
            return found
        try:
            model = dynamodb_backends[self.account][self.region].get_table(table)
        except Exception:  # no such table: DynamoDB answers the call itself
            return ()
        schema = model.schema
        if index is not None:
            indexes = [*model.global_indexes, *model.indexes]
            schema = next((i.schema for i in indexes if i.name == index), [])
        found = tuple(
            k["AttributeName"] for k in sorted(schema, key=lambda k: k["KeyType"] != "HASH")
        )
        self._key_schemas[(table, index)] = found
        return found

    def check(
        self, logical_id: str, environ: dict[str, Any], service: str
    ) -> tuple[str, list[tuple[str, str]], bytes] | None:
        """None when the call may go on; else the AccessDenied response to send instead."""
        policies = self.policies.get(logical_id)
        operation = calls.operation(environ, service)
        if policies is None or operation is None:
            return None
        try:
            requests = authorizations.authorizations(
                environ,
                service,
                operation,
                region=self.region,
                account=self.account,
                key_schema=self._key_schema,
                kms_key=resources.kms_key_arn,
            )
        except Exception as exc:  # a request the mapping cannot read: recorded as unchecked
            reason = type(exc).__name__
            log.warning("iam: unchecked fn=%s op=%s (%s)", logical_id, operation, reason)
            self._record(logical_id, Request(operation, None), None)
            return None
        key_uses = (resources.s3_key_use(r, environ, self.account) for r in requests)
        requests = [*requests, *(use for use in key_uses if use is not None)]
        principal = Principal.role_session(self.roles[logical_id]["arn"], logical_id)
        own_keys = resources.role_session_context(principal, resources.transport.get())
        refused = None
        for request in requests:
            decision = self._decide(principal, policies, resources.with_context(request, own_keys))
            self._record(logical_id, request, decision)
            if not decision.allowed and refused is None:
                refused = request, decision
        if refused is None:
            return None
        request, decision = refused
        log.warning(
            "iam: %s fn=%s action=%s resource=%s",
            "denied" if self.enforce else "would deny",
            logical_id,
            request.action,
            request.resource,
        )
        if not self.enforce:
            return None
        message = (
            f"User: {principal.arns[0]} is not authorized to perform: {request.action} on "
            f"resource: {request.resource or '*'} {decision.reason(request.action)}"
        )
        return calls.access_denied_response(environ, service, message)

    @staticmethod
    def _decide(principal: Principal, policies: list[Policy], request: Request) -> Decision:
        """The role's policies with the resource's; a resource policy the evaluator cannot
        decide refuses the call (logged), as a policy it cannot read must never allow."""
        try:
            resource_policy, owner, key_policy = resources.resource_policy(request.resource)
        except PolicyError as error:
            log.error("iam: policy of %s not evaluated (%s): refused", request.resource, error)
            unread = f"policy of {request.resource} (not evaluated)"
            return Decision(False, denied_by=unread, denied_in=RESOURCE_BASED)
        return authorize(
            request,
            principal,
            policies,
            resource_policy,
            resource_account=owner,
            key_policy=key_policy,
        )

    def _record(self, logical_id: str, request: Request, decision: Decision | None) -> None:
        """``decision`` None: the call could not be checked. Counted by a key of tuples (JSON
        only in snapshot(): one per call cost a sorted json.dumps of every call)."""
        context = tuple(
            (key, tuple(sorted({redact(v) if key == _LEADING_KEYS else v for v in values})))
            for key, values in sorted(request.context.items())
        )
        key = (
            logical_id,
            request.action,
            request.resource,
            context,
            None if decision is None else decision.allowed,
            () if decision is None else tuple(decision.grants),
            None if decision is None else decision.denied_by,
        )
        with self._lock:
            self._calls[key] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counted = list(self._calls.items())
        functions: dict[str, Any] = {
            logical_id: {**role, "calls": []} for logical_id, role in self.roles.items()
        }
        entries = []
        for (logical_id, action, resource, context, allowed, grants, denied_by), count in counted:
            entry = {
                "action": action,
                "resource": resource,
                "context": {name: list(values) for name, values in context},
                "allowed": allowed,
                "grants": list(grants),
                "denied_by": denied_by,
            }
            entries.append((logical_id, json.dumps(entry, sort_keys=True), entry, count))
        for logical_id, _, entry, count in sorted(entries, key=lambda e: e[:2]):
            functions[logical_id]["calls"].append({**entry, "count": count})
        return {
            "fingerprint": self.fingerprint,
            "enforce": self.enforce,
            "run": self.run,
            "functions": functions,
        }

    def write(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.snapshot(), indent=1))
        os.replace(temporary, path)
        return path


def run_description(fan_out: str) -> dict[str, Any]:
    """Which run a record comes from: when it started, the fan-out mode it deployed, and what
    started the local stack (the parent's command line: a pytest session, the demo, chaos)."""
    parent = Path(f"/proc/{os.getppid()}/cmdline")  # Linux; elsewhere not known
    started_by = (
        parent.read_bytes().replace(b"\0", b" ").decode(errors="replace") if parent.exists() else ""
    )
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fan_out": fan_out,
        "started_by": started_by.strip(),
    }


def read_records(directory: Path, fingerprint_: str) -> Iterable[dict[str, Any]]:
    """The records in ``directory`` made with this fingerprint."""
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("fingerprint") == fingerprint_:
            yield record
