"""moto 5.2.5's CloudFormation: the resource types it lacks, as ``StackResource`` models the
services give install(), and an ``AWS::NoValue`` list item left out as CloudFormation does."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Self

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
