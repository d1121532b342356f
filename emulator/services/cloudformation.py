"""moto 5.2.6's CloudFormation: the resource types it lacks, as ``StackResource`` models the
services give install(), an ``AWS::NoValue`` list item left out as CloudFormation does, and the
API `sam deploy` / `sam delete` and the AWS CLI drive (change sets, resources, templates) as
CloudFormation answers it."""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, urlparse

from emulator.services import patching


class StackResource(ABC):
    """A resource model as moto's CloudFormation parser uses one (moto/cloudformation/parsing.py).

    Duck-typed, not a moto ``CloudFormationModel`` subclass: those register themselves in moto for
    good, these exist only while installed. A subclass names its ``TYPE``, its name property and
    ``ATTRIBUTES`` (what ``Fn::GetAtt`` may read, from ``attributes()``), and how it is created
    and deleted; an update replaces the resource, as CloudFormation does for them.
    """

    TYPE: ClassVar[str]
    NAME_PROPERTY: ClassVar[str] = ""  # the property that names the resource, if any
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def physical_resource_id(self) -> str:  # what Ref gives
        ...

    def attributes(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def delete(self, account_id: str, region_name: str) -> None: ...

    @classmethod
    @abstractmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> Self:
        """The resource made from its template ``properties`` (``physical_name``: what moto named
        it, from the stack and ``logical_id``)."""

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Self:
        return cls.create(
            cloudformation_json.get("Properties", {}),
            account_id,
            region_name,
            physical_name=resource_name,
            logical_id=kwargs.get("LogicalId", resource_name),
        )

    def is_created(self) -> bool:
        return True

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.ATTRIBUTES

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        if attribute_name not in self.ATTRIBUTES:
            from moto.cloudformation.exceptions import (  # noqa: PLC0415
                UnformattedGetAttTemplateException,
            )

            raise UnformattedGetAttTemplateException()
        return self.attributes()[attribute_name]

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME_PROPERTY

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: StackResource,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Self:
        if original_resource is not None:  # None: its Condition was false until now
            original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        return None  # moto calls the resource's delete()


def install(models: Iterable[type[StackResource]]) -> None:
    _patch_resource_types(models)
    _patch_no_value_in_lists()
    _patch_change_sets()
    _patch_stack_resources()
    _patch_templates()
    _patch_layer_version_ref()


# Gap: moto/cloudformation/parsing.py resource_class_from_type knows no AWS::SNS::Subscription or
# AWS::Pipes::Pipe (it logs "No Moto CloudFormation support" and skips the resource), so a
# stack's subscriptions and pipes would not exist. Fix: the services' models answer for theirs.
def _patch_resource_types(models: Iterable[type[StackResource]]) -> None:
    from moto.cloudformation import parsing  # noqa: PLC0415 - imports every CloudFormation model

    original = parsing.resource_class_from_type
    by_type = {model.TYPE: model for model in models}

    def resource_class_from_type(resource_type: str) -> Any:
        return by_type.get(resource_type) or original(resource_type)

    patching.replace(parsing, "resource_class_from_type", resource_class_from_type)


# Gap: moto/cloudformation/parsing.py clean_json resolves {"Ref": "AWS::NoValue"} to None and
# drops it from an object, but keeps it in a list, where CloudFormation removes the element. A
# list item chosen by Fn::If (`- !If [Cond, item, !Ref AWS::NoValue]`, e.g. a policy a role has
# in one mode only) then reaches the resource as None (IAM's role model fails on it). Fix: an
# item that came from an intrinsic and resolved to nothing is left out of its list.
def _patch_no_value_in_lists() -> None:
    from moto.cloudformation import parsing  # noqa: PLC0415 - imports every CloudFormation model

    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        if not isinstance(resource_json, list):
            return original(resource_json, resources_map)
        cleaned = [(item, original(item, resources_map)) for item in resource_json]
        return [value for item, value in cleaned if value is not None or not isinstance(item, dict)]

    patching.replace(parsing, "clean_json", clean_json)


# --- the API `sam deploy` and `sam delete` drive --------------------------------------------------
SERVERLESS_TRANSFORM = "AWS::Serverless-2016-10-31"
# The IAM resources a stack may create only with CAPABILITY_IAM, or CAPABILITY_NAMED_IAM when it
# names them (the property that does), as CloudFormation's "Acknowledging IAM resources" lists.
IAM_NAME_PROPERTIES: dict[str, str | None] = {
    "AWS::IAM::AccessKey": None,
    "AWS::IAM::Group": "GroupName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::Policy": None,
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::User": "UserName",
    "AWS::IAM::UserToGroupAddition": None,
}
# Names a TemplateURL addresses the local stack's own S3 by (path style: /<bucket>/<key>).
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "host.docker.internal"})
# A change set's action -> the resource operation CloudFormation reports in its events.
OPERATION_OF_ACTION = {"Add": "CREATE", "Modify": "UPDATE", "Remove": "DELETE"}

# (operation: CREATE, UPDATE or DELETE; stack name; region): the deployer's fix-ups and the
# runtime's functions follow each executed change set and each deleted stack.
StackListener = Callable[[str, str, str], None]
_listeners: list[StackListener] = []
# Change set id, then stack id -> the template as submitted (GetTemplate's Original stage).
_submitted: dict[str, str] = {}
# (stack id, logical id) -> (ResourceStatus, when), as the stack's last operation left it.
_resource_states: dict[tuple[str, str], tuple[str, Any]] = {}
_execute_lock = threading.Lock()  # one stack operation at a time, as the listeners assume
log = logging.getLogger("emulator.cloudformation")


def on_stack_change(listener: StackListener) -> Callable[[], None]:
    """Call ``listener(operation, stack_name, region)`` once a change set's resources exist
    (CREATE, UPDATE) or a stack's are gone (DELETE), before the stack reports the operation
    complete: an exception fails the operation with its message. Returns the remover."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def template_from_url(url: str, account_id: str, partition: str) -> str:
    """The template a TemplateURL names in this stack's S3: path style on a local name
    (http://127.0.0.1:4566/<bucket>/<key>, what `sam deploy` builds from its endpoint) or on
    s3[.<region>].amazonaws.com, virtual-hosted style on <bucket>.s3[...].amazonaws.com;
    ?versionId= honoured. (moto reads the bucket of a local URL from its host: '127'.)"""
    from moto.cloudformation.exceptions import ValidationError  # noqa: PLC0415
    from moto.s3.models import s3_backends  # noqa: PLC0415

    parts = urlparse(url)
    host = (parts.hostname or "").lower()
    path = parts.path.lstrip("/")
    if host in LOCAL_HOSTS or (host.startswith("s3") and host.endswith(".amazonaws.com")):
        bucket, _, key = path.partition("/")
    elif ".s3" in host and host.endswith(".amazonaws.com"):
        bucket, key = host.split(".s3", 1)[0], path
    else:
        raise ValidationError(message=f"TemplateURL must be a supported URL: {url}")
    version = parse_qs(parts.query).get("versionId", [None])[0]
    try:
        stored = s3_backends[account_id][partition].get_object(bucket, key, version_id=version)
    except Exception as error:  # moto's NoSuchBucket / NoSuchKey
        stored = None
        reason = getattr(error, "message", None) or str(error)
    else:
        reason = "no such object"
    if stored is None:
        raise ValidationError(message=f"S3 error: {reason} ({url})")
    return stored.value.decode("utf-8")


def parse_template(body: str) -> dict[str, Any]:
    """A template body, YAML (with the short intrinsic tags) or JSON."""
    from emulator.core import templates  # noqa: PLC0415

    template = templates.parse_template(body)
    if not isinstance(template, dict):
        from moto.cloudformation.exceptions import ValidationError  # noqa: PLC0415

        raise ValidationError(message="Template format error: not a JSON or YAML object")
    return template


def transforms(template: dict[str, Any]) -> list[str]:
    declared = template.get("Transform", [])
    return [declared] if isinstance(declared, str) else list(declared)


def required_capability(template: dict[str, Any]) -> str | None:
    """CAPABILITY_NAMED_IAM when a resource names an IAM entity, CAPABILITY_IAM when the
    template has IAM resources, else None."""
    needed = None
    for resource in template.get("Resources", {}).values():
        kind = resource.get("Type")
        if kind not in IAM_NAME_PROPERTIES:
            continue
        name_property = IAM_NAME_PROPERTIES[kind]
        if name_property and name_property in resource.get("Properties", {}):
            return "CAPABILITY_NAMED_IAM"
        needed = "CAPABILITY_IAM"
    return needed


def processed_template(
    template: dict[str, Any],
    parameters: dict[str, str],
    capabilities: list[str],
    region: str,
) -> dict[str, Any]:
    """``template`` as CloudFormation processes it before it creates a change set: ``parameters``
    checked against the declared constraints, its Rules against them (the declared defaults
    under the given values), the SAM transform expanded, its IAM resources acknowledged by
    ``capabilities``. ValidationError (CloudFormation's message for a parameter, the rule's
    AssertDescription, the transform's causes) or InsufficientCapabilitiesException otherwise,
    as CloudFormation refuses."""
    from moto.cloudformation.exceptions import ValidationError  # noqa: PLC0415

    from emulator.deploy.errors import DeployError  # noqa: PLC0415
    from emulator.deploy.parameters import check_parameters, parameter_values  # noqa: PLC0415
    from emulator.deploy.rules import check_rules  # noqa: PLC0415
    from emulator.deploy.translate import translate  # noqa: PLC0415

    declared = template.get("Parameters", {})
    try:
        check_parameters(declared, parameters)
    except DeployError as error:
        raise ValidationError(message=str(error)) from error
    values = parameter_values(declared, parameters)
    try:
        check_rules(template, values)
    except DeployError as error:
        raise ValidationError(message=str(error).split(": ", 1)[-1]) from error
    declared_transforms = transforms(template)
    unsupported = [name for name in declared_transforms if name != SERVERLESS_TRANSFORM]
    if unsupported:
        raise ValidationError(message=f"No transform named {unsupported[0]} found.")
    processed = template
    if declared_transforms:
        try:
            processed = translate(template, parameters, region)
        except DeployError as error:
            raise ValidationError(
                message=f"Transform {SERVERLESS_TRANSFORM} failed with: {error}"
            ) from error
    needed = required_capability(processed)
    acknowledged = (
        needed is None
        or needed in capabilities
        or (needed == "CAPABILITY_IAM" and "CAPABILITY_NAMED_IAM" in capabilities)
    )
    if not acknowledged:
        raise insufficient_capabilities(f"Requires capabilities : [{needed}]")
    return processed


def insufficient_capabilities(message: str) -> Exception:
    """CloudFormation's InsufficientCapabilitiesException, as moto answers its own errors."""
    from moto.cloudformation.exceptions import CloudFormationError  # noqa: PLC0415

    class InsufficientCapabilitiesException(CloudFormationError):
        code = "InsufficientCapabilitiesException"

    return InsufficientCapabilitiesException(message)


# Gap: moto's CreateChangeSet reads a TemplateURL's bucket from its host (so a local endpoint's
# URL names bucket '127'), ignores Rules and Capabilities and stores an AWS::Serverless template
# as it came (its resources never created). Fix: the template read from this S3, checked and
# processed as CloudFormation does (processed_template), then moto's change set of the result.
def _patch_change_sets() -> None:
    from moto.cloudformation.responses import CloudFormationResponse  # noqa: PLC0415

    create = CloudFormationResponse.create_change_set

    def create_change_set(self: Any) -> Any:
        body = self._get_param("TemplateBody")
        url = self._get_param("TemplateURL")
        if url:
            body = template_from_url(url, self.current_account, self.partition)
        if body:
            given = _given_parameters(self)
            self.params["Parameters"] = [
                {"ParameterKey": k, "ParameterValue": v} for k, v in given.items()
            ]
            processed = processed_template(
                parse_template(body), given, self._get_param("Capabilities", []), self.region
            )
            self.params.pop("TemplateURL", None)
            self.params["TemplateBody"] = json.dumps(processed)
        result = create(self)
        if body:
            _submitted[result.result["Id"]] = body  # type: ignore[attr-defined]
        return result

    def execute_change_set(self: Any) -> Any:
        from moto.cloudformation.exceptions import ValidationError  # noqa: PLC0415
        from moto.core.responses import EmptyResult  # noqa: PLC0415

        backend = self.cloudformation_backend
        change_set = backend.describe_change_set(self._get_param("ChangeSetName"))
        if change_set.execution_status != "AVAILABLE":
            raise ValidationError(
                message=f"ChangeSet [{change_set.change_set_id}] cannot be executed in its"
                f" current execution status of [{change_set.execution_status}]"
            )
        with _execute_lock:
            _execute(backend, change_set, self.region)
        return EmptyResult()

    patching.replace(CloudFormationResponse, "create_change_set", create_change_set)
    patching.replace(CloudFormationResponse, "execute_change_set", execute_change_set)


def _given_parameters(response: Any) -> dict[str, str]:
    """A change set's Parameters as values: UsePreviousValue (what `sam deploy` sends for each
    parameter it does not override) is the value the stack was given, or left out when the
    stack took the default (moto's diff would count a default given now as a changed value and
    update every resource that reads it)."""
    previous: dict[str, Any] = {}
    if response._get_param("ChangeSetType", "CREATE") == "UPDATE":
        stack = response.cloudformation_backend.get_stack(response._get_param("StackName"))
        previous = stack.resource_map.input_parameters
    given = {}
    for parameter in response._get_param("Parameters", []):
        key = parameter["ParameterKey"]
        if not parameter.get("UsePreviousValue"):
            given[key] = parameter.get("ParameterValue", "")
        elif key in previous:
            given[key] = str(previous[key])
    return given


def _execute(backend: Any, change_set: Any, region: str) -> None:
    """A change set applied as CloudFormation reports it: the stack IN_PROGRESS, an event per
    resource, the listeners' fix-ups, then COMPLETE (or FAILED with the reason: no rollback)."""
    from moto.cloudformation.models import Event  # noqa: PLC0415
    from moto.core.utils import utcnow  # noqa: PLC0415

    stack = backend.stacks[change_set.stack_id]
    operation = change_set.change_set_type  # CREATE or UPDATE
    change_set.execution_status = "EXECUTE_IN_PROGRESS"
    stack.status = f"{operation}_IN_PROGRESS"
    stack._add_stack_event(stack.status, resource_status_reason="User Initiated")
    try:
        change_set.apply()
        stack.template = change_set.template
        stack._parse_template()
        stack.parameters = change_set.parameters
        stack.description = stack.template_dict.get("Description")
        stack.output_map = stack._create_output_map()  # moto keeps the empty one of CREATE
        _submitted[stack.stack_id] = _submitted.get(change_set.change_set_id, stack.template)
        for change in change_set.changes:
            status = f"{OPERATION_OF_ACTION[change.action]}_COMPLETE"
            parsed = stack.resource_map._parsed_resources.get(change.logical_resource_id)
            stack.events.append(
                Event(
                    stack_id=stack.stack_id,
                    stack_name=stack.name,
                    logical_resource_id=change.logical_resource_id,
                    physical_resource_id=_physical_id(stack, change.logical_resource_id, parsed),
                    resource_type=change.resource_type,
                    resource_status=status,
                    resource_status_reason=None,
                    resource_properties=None,
                )
            )
            _resource_states[(stack.stack_id, change.logical_resource_id)] = (status, utcnow())
        for listener in list(_listeners):
            listener(operation, stack.name, region)
    except Exception as error:
        log.warning("stack %s: %s failed", stack.name, operation, exc_info=True)
        change_set.execution_status = "EXECUTE_FAILED"
        stack.status = f"{operation}_FAILED"
        stack._add_stack_event(stack.status, resource_status_reason=str(error))
        return
    change_set.execution_status = "EXECUTE_COMPLETE"
    stack.status = f"{operation}_COMPLETE"
    stack._add_stack_event(stack.status)


def _physical_id(stack: Any, logical_id: str, parsed: Any) -> str:
    """What CloudFormation names a resource: the model's physical id, else (a type moto only
    records) <stack>-<logical id>-<stable suffix>, as CloudFormation names the unnamed."""
    physical = getattr(parsed, "physical_resource_id", None)
    if physical:
        return str(physical)
    import hashlib  # noqa: PLC0415

    suffix = hashlib.sha256(f"{stack.stack_id}/{logical_id}".encode()).hexdigest()[:12].upper()
    return f"{stack.name}-{logical_id}-{suffix}"


def stack_resources(stack: Any) -> list[dict[str, Any]]:
    """Every resource the stack holds, as DescribeStackResources lists it: the template's, less
    those whose Condition is false."""
    conditions = getattr(stack.resource_map, "lazy_condition_map", {})
    entries = []
    for logical_id, resource in stack.template_dict.get("Resources", {}).items():
        condition = resource.get("Condition")
        if condition is not None and not conditions[condition]:
            continue
        parsed = stack.resource_map._parsed_resources.get(logical_id)
        status, when = _resource_states.get(
            (stack.stack_id, logical_id), ("CREATE_COMPLETE", stack.creation_time)
        )
        entries.append(
            {
                "StackName": stack.name,
                "StackId": stack.stack_id,
                "LogicalResourceId": logical_id,
                "PhysicalResourceId": _physical_id(stack, logical_id, parsed),
                "ResourceType": resource["Type"],
                "Timestamp": when,
                "LastUpdatedTimestamp": when,
                "ResourceStatus": status,
            }
        )
    return entries


# Gap: moto's DescribeStackResources and ListStackResources list the values of its resource map:
# None (no LogicalResourceId, ResourceType or PhysicalResourceId) for each resource whose
# Condition is false or whose type it does not model, and every status as the stack's. Fix: the
# template's resources that exist, each with its ids, type and its own last status.
def _patch_stack_resources() -> None:
    from moto.cloudformation.responses import CloudFormationResponse  # noqa: PLC0415
    from moto.core.responses import ActionResult  # noqa: PLC0415

    def describe_stack_resources(self: Any) -> Any:
        stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
        wanted = self._get_param("LogicalResourceId")
        entries = [e for e in stack_resources(stack) if wanted in (None, e["LogicalResourceId"])]
        for entry in entries:
            del entry["LastUpdatedTimestamp"]
        return ActionResult({"StackResources": entries})

    def list_stack_resources(self: Any) -> Any:
        stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
        keys = (
            "LogicalResourceId",
            "PhysicalResourceId",
            "ResourceType",
            "LastUpdatedTimestamp",
            "ResourceStatus",
        )
        summaries = [{k: e[k] for k in keys} for e in stack_resources(stack)]
        return ActionResult({"StackResourceSummaries": summaries})

    patching.replace(CloudFormationResponse, "describe_stack_resources", describe_stack_resources)
    patching.replace(CloudFormationResponse, "list_stack_resources", list_stack_resources)


# Gap: moto's GetTemplate has one stage (what it parsed), and its DeleteStack of a stack with a
# resource it cannot delete (a bucket with objects) loses the stack and answers an error. Fix:
# TemplateStage Original is the template as submitted (what `sam delete` reads the artifacts
# from), Processed the expanded one; a failed delete leaves the stack DELETE_FAILED with the
# reason, as CloudFormation does; the listeners hear of a deleted stack.
def _patch_templates() -> None:
    from moto.cloudformation.responses import CloudFormationResponse  # noqa: PLC0415
    from moto.core.responses import ActionResult, EmptyResult  # noqa: PLC0415

    def get_template(self: Any) -> Any:
        stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
        if self._get_param("TemplateStage", "Original") == "Original":
            body = _submitted.get(stack.stack_id, stack.template)
        else:
            body = stack.template
        if not isinstance(body, str):
            body = json.dumps(body)
        return ActionResult({"TemplateBody": body, "StagesAvailable": ["Original", "Processed"]})

    def delete_stack(self: Any) -> Any:
        backend = self.cloudformation_backend
        name = self._get_param("StackName")
        stacks = [s for s in backend.stacks.values() if name in (s.name, s.stack_id)]
        with _execute_lock:
            for stack in stacks:
                try:
                    backend.delete_stack(stack.stack_id)
                except Exception as error:
                    backend.stacks[stack.stack_id] = stack
                    backend.deleted_stacks.pop(stack.stack_id, None)
                    stack.status = "DELETE_FAILED"
                    stack._add_stack_event("DELETE_FAILED", resource_status_reason=str(error))
                    continue
                for listener in list(_listeners):
                    listener("DELETE", stack.name, self.region)
        return EmptyResult()

    patching.replace(CloudFormationResponse, "get_template", get_template)
    patching.replace(CloudFormationResponse, "delete_stack", delete_stack)
    _patch_gone_resources()


# What a service says of a resource that no longer exists (moto's error codes and messages).
GONE = ("NotFound", "NoSuch", "does not exist", "ResourceNotFoundException")


# Gap: moto deletes a stack's resources in passes, each a resource's own delete; one whose parent
# went first (a subscription after its topic: "NotFound: Topic does not exist") fails every pass,
# and the stack never deletes. CloudFormation counts a resource that is already gone as deleted.
def _patch_gone_resources() -> None:
    from moto.cloudformation import parsing  # noqa: PLC0415

    original = parsing.ResourceMap._delete_resource

    def _delete_resource(self: Any, parsed_resource: Any, resource_json: dict[str, Any]) -> None:
        try:
            original(self, parsed_resource, resource_json)
        except Exception as error:
            described = f"{type(error).__name__} {getattr(error, 'code', '')} {error}"
            if not any(mark in described for mark in GONE):
                raise

    patching.replace(parsing.ResourceMap, "_delete_resource", _delete_resource)


# Gap: moto's AWS::Lambda::LayerVersion model has no physical id, so a Ref to one resolves to the
# model itself: an update of a function with Layers (any change of its properties) fails in
# moto's UpdateFunctionConfiguration ("'LayerVersion' object has no attribute 'replace'"). Fix:
# its Ref is the layer version's ARN, as CloudFormation documents.
def _patch_layer_version_ref() -> None:
    from moto.awslambda.models import LayerVersion  # noqa: PLC0415

    patching.replace(LayerVersion, "physical_resource_id", property(lambda self: self.arn))
