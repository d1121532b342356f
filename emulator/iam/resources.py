"""The policies that are not the caller's: each resource's own policy as the local stack holds it
(an S3 bucket policy, an SQS queue policy, an SNS topic policy, an event bus policy, a KMS key
policy), the global condition keys of a request, and the service principals' deliveries decided
by those policies.

- ``resource_policy(arn)``: the policy moto holds for the resource an ARN names (a bucket's for
  its objects too), its owner account, and whether it is a key policy; None for a resource
  without one (or a service without resource policies here, such as DynamoDB).
- Global keys (IAM user guide, "AWS global condition context keys"): a role session's requests
  carry ``aws:PrincipalArn`` (the role's ARN, not the session's), ``aws:PrincipalAccount`` and
  ``aws:SecureTransport``; a service principal's ``aws:SourceArn`` (the bucket, rule, topic or pipe
  it acts for), ``aws:SourceAccount`` and ``aws:SecureTransport``.
- ``role_may``: a service acting with a role (a pipe with its execution role, delivering to its
  target) decided with the role's policies as moto's IAM holds them and the target's policy.
- ``s3_key_use``: what S3 asks KMS on the caller's behalf for an SSE-KMS object (AWS KMS
  developer guide, "How Amazon S3 uses AWS KMS"): a read needs ``kms:Decrypt``, a write
  ``kms:GenerateDataKey``, on the object's (or the bucket's default) customer managed key, with
  ``kms:ViaService`` ``s3.<region>.amazonaws.com`` and ``kms:CallerAccount``; decided like the
  caller's own requests, against the key policy.
- ``aws:SecureTransport`` of a caller's request is its transport's: on a stack served with TLS
  (`up --tls`) "true" for a request that came over TLS and "false" for one over plain HTTP on the
  same port (``transport``, set by the server for each request); on a stack served over plain
  HTTP alone it is "true", standing for AWS's HTTPS endpoints (docs/local-stack.md, "IAM"). The
  services' own calls to each other are over TLS.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import struct
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qs

from moto.events.models import events_backends
from moto.iam.aws_managed_policies import aws_managed_policies_data
from moto.iam.models import iam_backends
from moto.kms.models import kms_backends
from moto.kms.utils import _deserialize_ciphertext_blob as kms_ciphertext_key_of
from moto.s3.models import s3_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from emulator.core.arns import parse_arn
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
SECURE_TRANSPORT = "true"  # see the module docstring
# The request being decided came over TLS ("true") or not ("false"); the server sets it.
transport: ContextVar[str] = ContextVar("aws:SecureTransport", default=SECURE_TRANSPORT)
# The condition keys of the request's own headers a bucket policy may name for a caller moto
# decides (``s3:x-amz-server-side-encryption...``, authorizations.s3_encryption_keys); the server
# sets them for each request that sends such headers.
request_keys: ContextVar[Mapping[str, Sequence[str]]] = ContextVar("request keys")
_AWS_MANAGED = "arn:aws:iam::aws:policy/"


@functools.lru_cache(maxsize=256)
def parsed(name: str, document: str) -> Policy:
    """A resource policy's document, parsed once per text."""
    return Policy.parse(name, document, resource_based=True)


def _document(policy: Any) -> str | None:
    if not policy:
        return None
    if isinstance(policy, bytes):
        return policy.decode()
    return policy if isinstance(policy, str) else json.dumps(policy)


def _bucket_policy(bucket_name: str) -> tuple[str | None, str | None]:
    owner = s3_backends.bucket_accounts.get(bucket_name)
    if owner is None:
        return None, None
    partition, account = owner
    bucket = s3_backends[account][partition].buckets.get(bucket_name)
    return (_document(bucket.policy) if bucket else None), account


def _policy_document(arn: str) -> tuple[str | None, str | None]:
    """(the policy's text or None, the owner account) of the resource ``arn`` names."""
    parts = parse_arn(arn)
    if parts.service == "s3":
        return _bucket_policy(parts.resource.partition("/")[0])
    if parts.service == "sqs":
        queue = sqs_backends[parts.account][parts.region].queues.get(parts.resource)
        return (_document(queue.policy) if queue else None), parts.account
    if parts.service == "sns":
        topic = sns_backends[parts.account][parts.region].topics.get(arn)
        return (_document(topic._policy_json) if topic else None), parts.account
    if parts.service == "events" and parts.resource.startswith("event-bus/"):
        buses = events_backends[parts.account][parts.region].event_buses
        bus = buses.get(parts.resource.removeprefix("event-bus/"))
        return (bus.policy if bus else None), parts.account
    if parts.service == "kms" and parts.resource.startswith("key/"):
        key = kms_backends[parts.account][parts.region].keys.get(parts.resource[4:])
        return (_document(key.policy) if key else None), parts.account
    return None, parts.account


def resource_policy(arn: str | None) -> tuple[Policy | None, str | None, bool]:
    """(the resource's policy or None, its owner account or None, whether it is a key policy).
    A policy the evaluator cannot decide raises PolicyError."""
    if not arn or arn == "*":
        return None, None, False
    try:
        document, owner = _policy_document(arn)
    except ValueError:  # not an ARN: a resource the local stack cannot tell
        return None, None, False
    if document is None:
        return None, owner, False
    parts = parse_arn(arn)
    holder = f"arn:aws:s3:::{parts.resource.partition('/')[0]}" if parts.service == "s3" else arn
    return parsed(f"policy of {holder}", document), owner, parts.service == "kms"


def kms_key_arn(key_id: str | None, ciphertext: str | None, region: str, account: str) -> str:
    """The ARN of the key a KMS request uses: its KeyId (a key id, key ARN, alias name or alias
    ARN), else the key a ciphertext names (Decrypt without KeyId; moto's ciphertext begins with
    its key's id); ``*`` when neither names a key the local stack holds (KMS then answers
    NotFoundException itself)."""
    backend = kms_backends[account][region]
    try:
        if key_id:
            found = backend.any_id_to_key_id(key_id)
        elif ciphertext:
            found = kms_ciphertext_key_of(base64.b64decode(ciphertext)).key_id
        else:
            return "*"
    except (AttributeError, KeyError, TypeError, ValueError, struct.error):  # no such key
        return "*"
    key = backend.keys.get(found)
    return key.arn if key is not None else "*"


def role_session_context(principal: Principal, secure_transport: str) -> dict[str, Sequence[str]]:
    """The global keys of a role session's request (see the module docstring)."""
    return {
        "aws:principalarn": [principal.arns[-1]],
        "aws:principalaccount": [principal.account],
        "aws:securetransport": [secure_transport],
    }


def with_context(request: Request, keys: Mapping[str, Sequence[str]]) -> Request:
    return Request(request.action, request.resource, {**request.context, **keys})


def service_may(
    service: str, action: str, resource: str, *, source_arn: str, source_account: str
) -> bool:
    """Whether the resource's policy lets ``service`` (``sqs.amazonaws.com``, ...) make
    ``action`` on ``resource`` for ``source_arn``. A resource without a policy lets it in (the
    callers' rule, documented in docs/local-stack.md); a policy that cannot be evaluated refuses
    (logged)."""
    try:
        policy, owner, key_policy = resource_policy(resource)
    except PolicyError as error:
        log.error("policy of %s not evaluated (%s): %s refused", resource, error, service)
        return False
    if policy is None:
        return True
    context = {
        "aws:sourcearn": [source_arn],
        "aws:sourceaccount": [source_account],
        "aws:securetransport": [SECURE_TRANSPORT],  # the services call each other over TLS
    }
    principal = Principal(owner or source_account, service=service)
    decision = authorize(
        Request(action, resource, context),
        principal,
        resource_policy=policy,
        resource_account=owner,
        key_policy=key_policy,
    )
    return decision.allowed


def denies_everyone(action: str, resource: str) -> bool:
    """Whether the resource's policy explicitly denies ``action`` to a caller it knows nothing
    of (its statements naming everyone or the owner's account, their conditions with the
    request's transport and, for a put, its encryption headers' keys: ``request_keys``)."""
    policy, owner, _ = resource_policy(resource)
    if policy is None:
        return False
    keys = {"aws:securetransport": [transport.get()]}
    if action.lower() == "s3:putobject":
        keys |= request_keys.get({})
    request = Request(action, resource, keys)
    anyone = Principal(owner or "")
    decision = authorize(request, anyone, resource_policy=policy, resource_account=owner)
    return decision.denied_by is not None


# --- S3's use of a bucket's key -------------------------------------------------------------------
_S3_KEY_USES = {
    "s3:getobject": "kms:Decrypt",
    "s3:getobjectversion": "kms:Decrypt",
    "s3:putobject": "kms:GenerateDataKey",
}


def _default_key(bucket: Any) -> str | None:
    rule = (bucket.encryption or {}).get("Rule", {}).get("ApplyServerSideEncryptionByDefault", {})
    return rule.get("KMSMasterKeyID") if rule.get("SSEAlgorithm") == "aws:kms" else None


def s3_key_use(request: Request, environ: Mapping[str, Any], account: str) -> Request | None:
    """The KMS request S3 makes for ``request`` of ``account``'s caller (see the module
    docstring); None when the object is not encrypted with a customer managed key's ARN or id
    (an alias or S3's AWS managed key is not decided locally)."""
    use = _S3_KEY_USES.get(request.action.lower())
    if use is None or not (request.resource or "").startswith("arn:aws:s3:::"):
        return None
    bucket_name, _, key_name = request.resource.removeprefix("arn:aws:s3:::").partition("/")
    owner = s3_backends.bucket_accounts.get(bucket_name)
    if owner is None or not key_name:
        return None
    backend = s3_backends[owner[1]][owner[0]]
    bucket = backend.buckets.get(bucket_name)
    if use == "kms:Decrypt":
        version = parse_qs(environ.get("QUERY_STRING", "")).get("versionId", [None])[0]
        try:
            found = backend.get_object(bucket_name, key_name, version_id=version)
        except Exception:  # no such object or version: S3 answers the call itself
            return None
        key_id = found.kms_key_id if found is not None and found.encryption == "aws:kms" else None
    else:
        asked = environ.get("HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION")  # else the bucket's default
        key_id = _default_key(bucket) if not asked else None
        if asked == "aws:kms":
            key_id = environ.get("HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_AWS_KMS_KEY_ID")
    if not key_id or key_id.startswith("alias/") or ":alias/" in key_id:
        return None
    key_arn = key_id
    if not key_id.startswith("arn:"):
        key_arn = f"arn:aws:kms:{bucket.region_name}:{owner[1]}:key/{key_id}"
    context = {
        "kms:viaservice": [f"s3.{parse_arn(key_arn).region}.amazonaws.com"],
        "kms:calleraccount": [account],
    }
    return Request(use, key_arn, context)


# --- a role's policies, as moto's IAM holds them -------------------------------------------------
@functools.cache
def _aws_managed_documents() -> dict[str, Any]:
    return json.loads(aws_managed_policies_data)


def managed_policy_document(account: str, arn: str) -> Any:
    """A managed policy's document: AWS managed ones from moto's copy, the rest from its IAM."""
    if arn.startswith(_AWS_MANAGED):
        return _aws_managed_documents()[arn.rpartition("/")[2]]["Document"]
    return json.loads(iam_backends[account]["global"].get_policy(arn).document)


def role_may(role_arn: str, session: str, request: Request) -> Decision:
    """``request`` made by a session of the role ``role_arn`` (its inline and attached managed
    policies) with the resource's policy; a policy that cannot be evaluated refuses (logged)."""
    account = parse_arn(role_arn).account
    principal = Principal.role_session(role_arn, session)
    try:
        role = iam_backends[account]["global"].get_role_by_arn(role_arn)
        documents = {
            name: json.loads(doc) if isinstance(doc, str) else doc
            for name, doc in role.policies.items()
        }
        for arn in role.managed_policies:
            documents[arn.rpartition("/")[2]] = managed_policy_document(account, arn)
        identity = [Policy.parse(name, document) for name, document in documents.items()]
        resource, owner, key_policy = resource_policy(request.resource)
    except Exception as error:  # no such role, or a policy the evaluator cannot decide
        log.error("iam: %s for %s not evaluated (%s): refused", request.action, role_arn, error)
        return Decision(False, denied_by=f"{role_arn} (not evaluated)", denied_in=RESOURCE_BASED)
    made = with_context(request, role_session_context(principal, SECURE_TRANSPORT))
    return authorize(
        made, principal, identity, resource, resource_account=owner, key_policy=key_policy
    )
