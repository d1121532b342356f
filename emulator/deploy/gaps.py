"""What moto's CloudFormation leaves undone, done through the services' APIs (docs/local-stack.md):
a bucket's versioning, public access block and NotificationConfiguration (with its targets
resolved to real ARNs; S3 then sends its s3:TestEvent, as AWS does)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.core.values import parse_bool
from emulator.deploy.errors import DeployError


class Resolver:
    """The few intrinsics a bucket notification or an output needs, against the live stack
    (``client``: a service's client on it, by name)."""

    def __init__(
        self,
        client: Callable[[str], Any],
        region: str,
        resources: dict[str, tuple[str, str]],
        parameters: dict[str, str],
    ) -> None:
        self.client = client
        self.region = region
        self.resources = resources
        self.parameters = parameters

    def __call__(self, value: Any) -> Any:  # noqa: PLR0911 - one return per intrinsic
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            name = value["Ref"]
            if name in self.parameters:
                return self.parameters[name]
            if name in self.resources:
                return self.resources[name][1]
            if name == "AWS::Region":
                return self.region
            raise DeployError(f"cannot resolve Ref {name}")
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            logical_id, attribute = target.split(".", 1) if isinstance(target, str) else target
            return self.get_att(logical_id, attribute)
        return {k: self(v) for k, v in value.items()}

    def get_att(self, logical_id: str, attribute: str) -> str:
        rtype, physical = self.resources[logical_id]
        if rtype == "AWS::SQS::Queue":
            sqs = self.client("sqs")
            if attribute == "Arn":
                attrs = sqs.get_queue_attributes(QueueUrl=physical, AttributeNames=["QueueArn"])
                return attrs["Attributes"]["QueueArn"]
            if attribute == "QueueUrl":
                return physical
            if attribute == "QueueName":
                return physical.rsplit("/", 1)[-1]
        if rtype == "AWS::Lambda::Function" and attribute == "Arn":
            lam = self.client("lambda")
            return lam.get_function_configuration(FunctionName=physical)["FunctionArn"]
        if rtype == "AWS::SNS::Topic" and attribute == "TopicArn":
            return physical
        raise DeployError(f"cannot resolve Fn::GetAtt {logical_id}.{attribute} ({rtype})")


def _s3_filter(cfn_filter: dict[str, Any] | None) -> dict[str, Any] | None:
    rules = (cfn_filter or {}).get("S3Key", {}).get("Rules")
    if not rules:
        return None
    return {"Key": {"FilterRules": [{"Name": r["Name"], "Value": r["Value"]} for r in rules]}}


def bucket_notification(cfn_config: dict[str, Any], resolve: Resolver) -> dict[str, Any]:
    """CloudFormation NotificationConfiguration -> S3 PutBucketNotificationConfiguration shape."""
    config = resolve(cfn_config)
    result: dict[str, Any] = {}
    kinds = (
        ("QueueConfigurations", "Queue", "QueueArn"),
        ("TopicConfigurations", "Topic", "TopicArn"),
        ("LambdaConfigurations", "Function", "LambdaFunctionArn"),
    )
    for section, target, api_target in kinds:
        entries = []
        for entry in config.get(section, []):
            item = {api_target: entry[target], "Events": [entry["Event"]]}
            s3_filter = _s3_filter(entry.get("Filter"))
            if s3_filter:
                item["Filter"] = s3_filter
            entries.append(item)
        if entries:
            result[section] = entries
    if parse_bool(config.get("EventBridgeConfiguration", {}).get("EventBridgeEnabled")):
        result["EventBridgeConfiguration"] = {}
    return result


def close_gaps(
    s3: Any, cfn_template: dict[str, Any], resources: dict[str, tuple[str, str]], resolve: Resolver
) -> None:
    """What moto's CloudFormation leaves undone, done through the services' APIs."""
    # Gap: moto's CloudFormation creates an AWS::S3::Bucket with BucketEncryption and Tags only;
    # VersioningConfiguration, PublicAccessBlockConfiguration and NotificationConfiguration
    # are applied here through the S3 API (notifications last: S3 sends its s3:TestEvent then).
    for logical_id, resource in cfn_template["Resources"].items():
        if resource.get("Type") != "AWS::S3::Bucket":
            continue
        props = resource.get("Properties", {})
        props = {
            k: resolve(props[k])
            for k in ("VersioningConfiguration", "PublicAccessBlockConfiguration")
            if k in props
        }
        bucket = resources[logical_id][1]
        if props.get("VersioningConfiguration", {}).get("Status"):
            s3.put_bucket_versioning(
                Bucket=bucket,
                VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]},
            )
        if props.get("PublicAccessBlockConfiguration"):
            s3.put_public_access_block(
                Bucket=bucket,
                PublicAccessBlockConfiguration={
                    k: parse_bool(v) for k, v in props["PublicAccessBlockConfiguration"].items()
                },
            )
        notification = resource.get("Properties", {}).get("NotificationConfiguration")
        if notification:
            s3.put_bucket_notification_configuration(
                Bucket=resources[logical_id][1],
                NotificationConfiguration=bucket_notification(notification, resolve),
            )
