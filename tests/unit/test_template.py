"""Invariants of template.yaml and samconfig.toml, checked for every queue, mapping and function so
that an edit cannot drop one silently. Offline and fast: the template is only parsed, never
deployed (cfn-lint's decoder understands the short-form intrinsic tags)."""

import json
import shlex
import tomllib

import pytest
from cfnlint.decode.cfn_yaml import load as load_cfn_yaml
from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
from samtranslator.translator.transform import transform
from shared import idempotency, keys, model
from shared.aws import table as contacts_store

from emulator.deploy.errors import DeployError
from emulator.deploy.rules import check_rules, chosen, template_conditions
from ops import fan_out
from tests.contract import CHANGE_BODY_POLICIES, CHANGE_POLICIES, QUEUE_FILTERS, STREAM_FILTERS
from tests.unit.template_yaml import RESOURCES, ROOT, TEMPLATE, alarm_threshold, of_type

TEMPLATE_TEXT = (ROOT / "template.yaml").read_text()
SAMCONFIG = tomllib.loads((ROOT / "samconfig.toml").read_text())
PARAMETERS = TEMPLATE["Parameters"]
GLOBAL_FUNCTION = TEMPLATE.get("Globals", {}).get("Function", {})

SQS_DEFAULT_RETENTION = 345600  # AWS default MessageRetentionPeriod
LAMBDA_DEFAULT_TIMEOUT = 3

# The design: logical id -> code dir, and the environment each function gets (besides the
# POWERTOOLS_* variables every function gets).
FUNCTIONS = {
    "IngestFunction": (
        "functions/ingest",
        {
            "CONTACTS_TABLE_NAME",
            "IDEMPOTENCY_TABLE_NAME",
            "INGEST_QUEUE_URL",
            "GOODWILL_WAIT_SECONDS",
            "SURVEY_OPT_IN_ATTRIBUTE",
            "SURVEY_EMAIL_ATTRIBUTE",
        },
    ),
    "LastAgentFunction": ("functions/last_agent", {"CONTACTS_TABLE_NAME"}),
    "SurveyFunction": ("functions/survey", {"NOTIFICATION_QUEUE_URL"}),
    "GoodwillFunction": (
        "functions/goodwill",
        {"CONTACTS_TABLE_NAME", "NOTIFICATION_QUEUE_URL", "GOODWILL_WAIT_SECONDS"},
    ),
    "NotifierFunction": (
        "functions/notifier",
        {"IDEMPOTENCY_TABLE_NAME", "NOTIFICATIONS_TOPIC_ARN"},
    ),
    "RouteFunction": ("functions/route", {"CONTACTS_TABLE_NAME"}),
    "RouterFunction": ("functions/router", {"CHANGE_TOPIC_ARN"}),
    "MailSenderFunction": (
        "functions/mail_sender",
        {
            "IDEMPOTENCY_TABLE_NAME",
            "CONTACTS_TABLE_NAME",
            "MAIL_FROM_ADDRESS",
            "MAIL_IDENTITY_ARN",
            "MAIL_CONFIGURATION_SET",
            "MAIL_TEMPLATE_PREFIX",
            "MAIL_SEND_EVENT_WAIT_SECONDS",
            "MAIL_EVENTS_DEAD_LETTER_QUEUE_URL",
        },
    ),
    "MailEventsFunction": ("functions/mail_events", {"CONTACTS_TABLE_NAME"}),
}
FAN_OUT_MODES = fan_out.NAMES
CONSUMERS = ("LastAgent", "Survey", "Goodwill")
PIPE_MODES = tuple(m.name for m in fan_out.MODES.values() if m.change_pipe)
POWERTOOLS_ENV = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"}
SES_ARN = "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}"
ENV_SOURCES = {
    "CONTACTS_TABLE_NAME": {"Ref": "ContactsTable"},
    "IDEMPOTENCY_TABLE_NAME": {"Ref": "IdempotencyTable"},
    "INGEST_QUEUE_URL": {"Ref": "IngestQueue"},
    "NOTIFICATION_QUEUE_URL": {"Ref": "NotificationQueue"},
    "NOTIFICATIONS_TOPIC_ARN": {"Ref": "NotificationsTopic"},
    "GOODWILL_WAIT_SECONDS": {"Ref": "GoodwillWaitSeconds"},
    "CHANGE_TOPIC_ARN": {"Ref": "ChangeTopic"},
    # the names of Connect's user-defined contact attributes ingest reads a contact record's by
    "SURVEY_OPT_IN_ATTRIBUTE": {"Ref": "SurveyOptInAttribute"},
    "SURVEY_EMAIL_ATTRIBUTE": {"Ref": "SurveyEmailAttribute"},
    # the stack's SES sender: its identity (MailIdentity), From address, configuration set and
    # templates (named after the stack)
    "MAIL_FROM_ADDRESS": {"Ref": "MailFromAddress"},
    "MAIL_IDENTITY_ARN": {"Fn::Sub": SES_ARN + ":identity/${MailIdentity}"},
    "MAIL_CONFIGURATION_SET": {"Ref": "MailConfigurationSet"},
    "MAIL_TEMPLATE_PREFIX": {"Ref": "AWS::StackName"},
    "MAIL_SEND_EVENT_WAIT_SECONDS": {"Ref": "MailSendEventWaitSeconds"},
    "MAIL_EVENTS_DEAD_LETTER_QUEUE_URL": {"Ref": "MailEventsDeadLetterQueue"},
}


CONTRACT_OUTPUTS = {
    "ContactsBucketName": {"Ref": "ContactsBucket"},
    "ContactsTableName": {"Ref": "ContactsTable"},
    "IdempotencyTableName": {"Ref": "IdempotencyTable"},
    "IngestQueueUrl": {"Ref": "IngestQueue"},
    "IngestDeadLetterQueueUrl": {"Ref": "IngestDeadLetterQueue"},
    "NotificationQueueUrl": {"Ref": "NotificationQueue"},
    "NotificationDeadLetterQueueUrl": {"Ref": "NotificationDeadLetterQueue"},
    "StreamFailureQueueUrl": {"Ref": "StreamFailureQueue"},
    "NotificationsTopicArn": {"Ref": "NotificationsTopic"},
    "RouteFunctionName": {"Ref": "RouteFunction"},
    "ContactRecordsDeliveryStreamName": {"Ref": "ContactRecordsDeliveryStream"},
}

# IAM statements allowed a "*" resource, each because AWS offers no resource-level scoping.
# (X-Ray comes from SAM's managed policy for Tracing: Active; metrics go out as EMF in logs.)
# (dynamodb:ListStreams: a stream reader lists the streams; it returns ARNs, no data.)
STAR_RESOURCE_ALLOWLIST = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "dynamodb:ListStreams",
}
# SAM policy templates that are scoped to one named resource and grant no more than needed.
ALLOWED_POLICY_TEMPLATES = {"SQSSendMessagePolicy", "SNSPublishMessagePolicy", "S3ReadPolicy"}

DYNAMODB_TYPES = {"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"}


# --- helpers ---------------------------------------------------------------------------------


FUNCTION_RESOURCES = of_type("AWS::Serverless::Function")
QUEUES = of_type("AWS::SQS::Queue")


def function_property(name: str, key: str, default=None):
    return FUNCTION_RESOURCES[name]["Properties"].get(key, GLOBAL_FUNCTION.get(key, default))


def ref_target(value) -> str:
    """Logical id behind {"Ref": X} or {"Fn::GetAtt": [X, attr]}."""
    assert isinstance(value, dict), f"expected Ref/GetAtt, got {value!r}"
    if "Ref" in value:
        return value["Ref"]
    if "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0]
    raise AssertionError(f"expected Ref/GetAtt, got {value!r}")


def parse_overrides(raw) -> dict[str, str]:
    items = raw if isinstance(raw, list) else shlex.split(raw or "")
    return dict(item.split("=", 1) for item in items)


def samconfig_envs() -> dict[str, dict[str, str]]:
    return {
        env: parse_overrides(
            body.get("deploy", {}).get("parameters", {}).get("parameter_overrides")
        )
        for env, body in SAMCONFIG.items()
        if isinstance(body, dict)
    }


# Parameter values as each deployment sees them: the template defaults, then every env's.
PARAMETER_SETS = {"template-defaults": {}} | {
    f"samconfig-{env}": overrides for env, overrides in samconfig_envs().items()
}


def conditions(overrides: dict[str, str]) -> dict[str, bool]:
    values = {name: str(spec.get("Default", "")) for name, spec in PARAMETERS.items()}
    return template_conditions(TEMPLATE, values | overrides)


def resolve_number(value, overrides: dict[str, str]) -> int:
    value = chosen(value, conditions(overrides))
    if isinstance(value, dict):
        name = value["Ref"]
        assert name in PARAMETERS, f"{name} is not a template parameter"
        return int(overrides.get(name, PARAMETERS[name]["Default"]))
    return int(value)


def events(function: str, event_type: str) -> dict[str, dict]:
    """A function's triggers of one type (SQS, DynamoDB): its SAM Events, and the explicit
    AWS::Lambda::EventSourceMapping resources on it (conditional ones: a fan-out mode's), as SAM
    event properties (Queue / Stream, plus the mapping's Condition)."""
    all_events = FUNCTION_RESOURCES[function]["Properties"].get("Events", {})
    found = {k: v["Properties"] for k, v in all_events.items() if v["Type"] == event_type}
    for name, resource in of_type("AWS::Lambda::EventSourceMapping").items():
        props = dict(resource["Properties"])
        if props["FunctionName"] != {"Ref": function}:
            continue
        source = props.pop("EventSourceArn")
        kind = "DynamoDB" if source["Fn::GetAtt"][1] == "StreamArn" else "SQS"
        if kind == event_type:
            found[name] = props | {"Queue" if kind == "SQS" else "Stream": source}
            found[name]["Condition"] = resource.get("Condition")
    return found


def created(resource: dict, mode: str) -> bool:
    """Whether a resource exists in a stack of that FanOut mode."""
    condition = resource.get("Condition")
    return condition is None or conditions({"FanOut": mode})[condition]


SQS_MAPPINGS = [(fn, ev) for fn in FUNCTION_RESOURCES for ev in events(fn, "SQS")]
STREAM_MAPPINGS = [(fn, ev) for fn in FUNCTION_RESOURCES for ev in events(fn, "DynamoDB")]
STREAM_CONSUMERS = sorted({fn for fn, _ in STREAM_MAPPINGS})
DLQS = sorted(
    {
        ref_target(q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
        for q in QUEUES.values()
        if "RedrivePolicy" in q["Properties"]
    }
)
FAILURE_DESTINATIONS = sorted(
    {
        ref_target(events(fn, "DynamoDB")[ev]["DestinationConfig"]["OnFailure"]["Destination"])
        for fn, ev in STREAM_MAPPINGS
    }
)
# The queues EventBridge rule targets and SNS subscriptions send what they cannot deliver to.
DELIVERY_DEAD_LETTERS = sorted(
    {
        ref_target(target["DeadLetterConfig"]["Arn"])
        for rule in of_type("AWS::Events::Rule").values()
        for target in rule["Properties"]["Targets"]
        if "DeadLetterConfig" in target
    }
    | {
        ref_target(subscription["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
        for subscription in of_type("AWS::SNS::Subscription").values()
        if "RedrivePolicy" in subscription["Properties"]
    }
)


def retention(queue: str) -> int:
    return int(QUEUES[queue]["Properties"].get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION))


def policies(function: str, mode: str = "lambda") -> list:
    """A function's Policies as deployed in that FanOut mode (Fn::If chosen)."""
    return chosen(
        FUNCTION_RESOURCES[function]["Properties"].get("Policies", []),
        conditions({"FanOut": mode}),
    )


def statements(function: str, mode: str = "lambda") -> list[dict]:
    found = []
    for policy in policies(function, mode):
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def policy_statements(logical_id: str, mode: str | None = "lambda") -> dict[str, dict]:
    """A resource policy's statements (queue, topic, bucket policy; key policy) by Sid, as
    deployed in that FanOut mode (None: as written)."""
    properties = RESOURCES[logical_id]["Properties"]
    document = properties.get("PolicyDocument") or properties["KeyPolicy"]
    written = document["Statement"]
    deployed = written if mode is None else chosen(written, conditions({"FanOut": mode}))
    return {s["Sid"]: s for s in deployed}


def refuses_insecure_transport(statement: dict) -> bool:
    return (
        statement["Effect"] == "Deny"
        and statement["Principal"] == "*"
        and statement["Condition"] == {"Bool": {"aws:SecureTransport": False}}
    )


# --- resources and functions ------------------------------------------------------------------


def test_every_resource_of_the_design_is_there():
    expected = {
        "ContactsBucket": "AWS::S3::Bucket",
        "IngestQueue": "AWS::SQS::Queue",
        "IngestDeadLetterQueue": "AWS::SQS::Queue",
        "ContactsTable": "AWS::DynamoDB::Table",
        "IdempotencyTable": "AWS::DynamoDB::Table",
        "NotificationQueue": "AWS::SQS::Queue",
        "NotificationDeadLetterQueue": "AWS::SQS::Queue",
        "StreamFailureQueue": "AWS::SQS::Queue",
        "NotificationsTopic": "AWS::SNS::Topic",
        "AlarmTopic": "AWS::SNS::Topic",
        "SharedLayer": "AWS::Serverless::LayerVersion",
    } | {name: "AWS::Serverless::Function" for name in FUNCTIONS}
    assert {k: RESOURCES[k]["Type"] for k in expected if k in RESOURCES} == expected
    assert set(FUNCTION_RESOURCES) == set(FUNCTIONS)


def created_in(mode: str) -> set[str]:
    return {name for name, resource in RESOURCES.items() if created(resource, mode)}


def test_each_fan_out_mode_creates_its_own_resources_only():
    assert PARAMETERS["FanOut"]["AllowedValues"] == list(FAN_OUT_MODES)
    assert PARAMETERS["FanOut"]["Default"] == "lambda"
    assert samconfig_envs()["default"]["FanOut"] == "lambda"
    per_consumer = {
        "lambda": {"StreamMapping"},
        "pipe": {"Queue", "DeadLetterQueue", "QueuePolicy", "ChangeRule", "QueueMapping"},
        "router": {"Queue", "DeadLetterQueue", "QueuePolicy", "ChangeSubscription", "QueueMapping"},
        "pipe-topic": {
            "Queue",
            "DeadLetterQueue",
            "QueuePolicy",
            "ChangeSubscription",
            "QueueMapping",
        },
        "pipe-sfn": {"Queue", "DeadLetterQueue", "QueuePolicy", "QueueMapping"},
    }
    own = {
        "lambda": set(),
        "pipe": {"ChangeBus", "ChangePipe", "ChangePipeRole"},
        "router": {
            "ChangeTopic",
            "RouterFunction",
            "RouterFunctionLogGroup",
            "RouterStreamMapping",
        },
        "pipe-topic": {"ChangePipe", "ChangePipeRole", "ChangeTopic"},
        "pipe-sfn": {"ChangePipe", "ChangePipeRole", "ChangeMachine", "ChangeMachineRole"},
    }
    everything = set().union(*own.values()) | {
        f"{c}{part}" for c in CONSUMERS for parts in per_consumer.values() for part in parts
    }
    for mode in FAN_OUT_MODES:
        wanted = own[mode] | {f"{c}{part}" for c in CONSUMERS for part in per_consumer[mode]}
        assert created_in(mode) & everything == wanted, mode


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_each_consumer_has_exactly_one_trigger_in_every_mode(mode):
    for consumer in CONSUMERS:
        function = f"{consumer}Function"
        triggers = [
            (kind, name)
            for kind in ("SQS", "DynamoDB")
            for name, props in events(function, kind).items()
            if props.get("Condition") is None or conditions({"FanOut": mode})[props["Condition"]]
        ]
        expected = ("DynamoDB", f"{consumer}StreamMapping")
        if mode != "lambda":
            expected = ("SQS", f"{consumer}QueueMapping")
        assert triggers == [expected], (mode, function)


def test_the_pipe_reads_the_union_of_the_consumers_filters():
    pipe = RESOURCES["ChangePipe"]["Properties"]
    stream = pipe["SourceParameters"]["DynamoDBStreamParameters"]
    assert ref_target(pipe["Source"]) == "ContactsTable"
    assert stream["StartingPosition"] == "TRIM_HORIZON"
    assert stream["OnPartialBatchItemFailure"] == "AUTOMATIC_BISECT"
    assert 0 <= int(stream["MaximumRetryAttempts"]) <= 10000
    assert 60 <= int(stream["MaximumRecordAgeInSeconds"]) <= 86400
    assert stream["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["StreamFailureQueue", "Arn"]}
    targets = {mode: chosen(pipe["Target"], conditions({"FanOut": mode})) for mode in PIPE_MODES}
    assert targets == {
        "pipe": {"Fn::GetAtt": ["ChangeBus", "Arn"]},
        "pipe-topic": {"Ref": "ChangeTopic"},
        "pipe-sfn": {"Ref": "ChangeMachine"},
    }
    # pipe-sfn: the pipe waits for each execution, whose failure fails the batch
    target_parameters = {
        mode: chosen(pipe, conditions({"FanOut": mode})).get("TargetParameters")
        for mode in PIPE_MODES
    }
    assert target_parameters == {
        "pipe": None,
        "pipe-topic": None,
        "pipe-sfn": {"StepFunctionStateMachineParameters": {"InvocationType": "REQUEST_RESPONSE"}},
    }
    # PutEvents and PublishBatch take at most 10 entries (Pipes refuses a larger batch)
    assert int(stream["BatchSize"]) <= 10
    patterns = [
        json.loads(f["Pattern"]) for f in pipe["SourceParameters"]["FilterCriteria"]["Filters"]
    ]
    assert patterns == [p for c in CONSUMERS for p in STREAM_FILTERS[f"{c}Function"]]


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_each_rule_is_its_consumers_filter_and_delivers_the_change_itself(consumer):
    rule = RESOURCES[f"{consumer}ChangeRule"]["Properties"]
    assert rule["EventBusName"] == {"Ref": "ChangeBus"}
    filters = STREAM_FILTERS[f"{consumer}Function"]
    detail = filters[0] if len(filters) == 1 else {"$or": filters}
    assert rule["EventPattern"] == {"detail": detail}
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [f"{consumer}Queue", "Arn"]}
    assert target["InputPath"] == "$.detail"


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_each_subscription_filters_the_routers_attributes_as_the_contract(consumer):
    subscription = chosen(
        RESOURCES[f"{consumer}ChangeSubscription"]["Properties"], conditions({"FanOut": "router"})
    )
    assert subscription["TopicArn"] == {"Ref": "ChangeTopic"}
    assert subscription["Endpoint"] == {"Fn::GetAtt": [f"{consumer}Queue", "Arn"]}
    assert subscription["RawMessageDelivery"] is True  # the body is the change itself
    assert subscription["FilterPolicyScope"] == "MessageAttributes"
    assert subscription["FilterPolicy"] == CHANGE_POLICIES[f"{consumer}Function"]


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_each_subscription_filters_the_change_itself_in_pipe_topic_mode(consumer):
    pipe_topic = conditions({"FanOut": "pipe-topic"})
    subscription = chosen(RESOURCES[f"{consumer}ChangeSubscription"]["Properties"], pipe_topic)
    assert subscription["RawMessageDelivery"] is True
    assert subscription["FilterPolicyScope"] == "MessageBody"
    assert subscription["FilterPolicy"] == CHANGE_BODY_POLICIES[f"{consumer}Function"]
    mapping = chosen(RESOURCES[f"{consumer}QueueMapping"]["Properties"], pipe_topic)
    written = QUEUE_FILTERS.get(f"{consumer}Function")
    if written is None:
        assert "FilterCriteria" not in mapping
    else:
        assert [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]] == written
    for mode in ("pipe", "router"):  # the other queue modes filter before the queue
        mapping = chosen(
            RESOURCES[f"{consumer}QueueMapping"]["Properties"], conditions({"FanOut": mode})
        )
        assert "FilterCriteria" not in mapping, mode


def test_the_pipe_role_may_deliver_to_its_own_target_only():
    role = RESOURCES["ChangePipeRole"]["Properties"]
    for mode, action, resource in (
        # ChangeBus by its ARN: its policy names this role, GetAtt both ways would be a cycle
        (
            "pipe",
            "events:PutEvents",
            {
                "Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:"
                "event-bus/${AWS::StackName}-changes"
            },
        ),
        ("pipe-topic", "sns:Publish", {"Ref": "ChangeTopic"}),
        ("pipe-sfn", "states:StartSyncExecution", {"Ref": "ChangeMachine"}),
    ):
        (document,) = chosen(role["Policies"], conditions({"FanOut": mode}))
        granted = {
            (a, json.dumps(s["Resource"], sort_keys=True))
            for s in document["PolicyDocument"]["Statement"]
            for a in as_list(s["Action"])
            if not a.startswith(("dynamodb:", "sqs:"))
        }
        assert granted == {(action, json.dumps(resource, sort_keys=True))}, mode


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_only_the_changes_source_may_send_to_a_consumers_queue(consumer):
    for mode, service, source in (
        ("pipe", "events.amazonaws.com", {"Fn::GetAtt": [f"{consumer}ChangeRule", "Arn"]}),
        ("router", "sns.amazonaws.com", {"Ref": "ChangeTopic"}),
        ("pipe-topic", "sns.amazonaws.com", {"Ref": "ChangeTopic"}),
    ):
        deployed = policy_statements(f"{consumer}QueuePolicy", mode)["AllowChanges"]
        assert deployed["Principal"] == {"Service": service}
        assert deployed["Action"] == "sqs:SendMessage"
        assert deployed["Condition"] == {"ArnEquals": {"aws:SourceArn": source}}
    # pipe-sfn: the machine sends with its role, the only principal allowed
    deployed = policy_statements(f"{consumer}QueuePolicy", "pipe-sfn")["AllowChanges"]
    assert deployed["Principal"] == {"AWS": {"Fn::GetAtt": ["ChangeMachineRole", "Arn"]}}
    assert deployed["Action"] == "sqs:SendMessage"
    assert deployed["Resource"] == {"Fn::GetAtt": [f"{consumer}Queue", "Arn"]}


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_each_queue_mapping_filters_the_change_itself_in_pipe_sfn_mode(consumer):
    mapping = chosen(
        RESOURCES[f"{consumer}QueueMapping"]["Properties"], conditions({"FanOut": "pipe-sfn"})
    )
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [{"body": p} for p in STREAM_FILTERS[f"{consumer}Function"]]


def test_the_change_machine_sends_every_change_to_every_consumers_queue():
    machine = RESOURCES["ChangeMachine"]["Properties"]
    assert machine["StateMachineType"] == "EXPRESS"  # StartSyncExecution runs Express only
    assert machine["StateMachineName"] == {"Fn::Sub": "${AWS::StackName}-changes"}
    assert machine["RoleArn"] == {"Fn::GetAtt": ["ChangeMachineRole", "Arn"]}
    definition = json.loads(machine["DefinitionString"]["Fn::Sub"])
    fan_out = definition["States"][definition["StartAt"]]
    assert fan_out["Type"] == "Parallel"
    sends = {}
    for branch in fan_out["Branches"]:
        each = branch["States"][branch["StartAt"]]
        assert each["Type"] == "Map"
        assert each["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}
        processor = each["ItemProcessor"]
        (task,) = processor["States"].values()
        assert task["Resource"] == "arn:${AWS::Partition}:states:::sqs:sendMessage"
        assert task["Parameters"]["MessageBody.$"] == "States.JsonToString($)"
        sends[task["Parameters"]["QueueUrl"]] = "Catch" in task or "Catch" in each
    assert sends == {f"${{{c}Queue}}": False for c in CONSUMERS}  # a failed send fails it all
    role = RESOURCES["ChangeMachineRole"]["Properties"]
    (document,) = role["Policies"]
    (statement,) = document["PolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Action"]) == ("Allow", "sqs:SendMessage")
    assert statement["Resource"] == [{"Fn::GetAtt": [f"{c}Queue", "Arn"]} for c in CONSUMERS]
    principal = role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": "states.amazonaws.com"}


def test_shared_layer():
    layer = RESOURCES["SharedLayer"]
    assert layer["Metadata"]["BuildMethod"] == "python3.13"
    assert layer["Properties"]["ContentUri"] == "layers/shared"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_function_runtime_code_layer_tracing(function):
    assert function_property(function, "Runtime") == "python3.13"
    assert function_property(function, "Architectures") == ["arm64"]
    assert function_property(function, "Handler") == "app.lambda_handler"
    assert function_property(function, "Tracing") == "Active"
    assert function_property(function, "CodeUri") == FUNCTIONS[function][0]
    assert {"Ref": "SharedLayer"} in function_property(function, "Layers", [])


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_function_has_a_log_group_with_retention(function):
    log_group = ref_target(function_property(function, "LoggingConfig", {})["LogGroup"])
    resource = RESOURCES[log_group]
    assert resource["Type"] == "AWS::Logs::LogGroup"
    assert resource["Properties"]["RetentionInDays"]
    assert resource["Properties"]["LogGroupName"]["Fn::Sub"].startswith("/aws/lambda/")


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_function_environment_is_exactly_the_contract(function):
    env = dict(GLOBAL_FUNCTION.get("Environment", {}).get("Variables", {}))
    env |= FUNCTION_RESOURCES[function]["Properties"].get("Environment", {}).get("Variables", {})
    assert set(env) == FUNCTIONS[function][1] | POWERTOOLS_ENV
    for name in FUNCTIONS[function][1]:
        assert env[name] == ENV_SOURCES[name], name
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "ContactCenter"
    assert env["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    service = FUNCTION_RESOURCES[function]["Properties"]["Environment"]["Variables"]
    assert service["POWERTOOLS_SERVICE_NAME"], "a service name per function"


def test_parameters_the_deployers_need():
    assert PARAMETERS["GoodwillWaitSeconds"]["Default"] == 600
    assert {"local", "test", "prod"} <= set(PARAMETERS["Stage"]["AllowedValues"])
    assert "INFO" in PARAMETERS["LogLevel"]["AllowedValues"]


# --- SQS: every queue and every SQS mapping ----------------------------------------------------


def test_there_are_sqs_and_stream_mappings():
    assert {fn for fn, _ in SQS_MAPPINGS} == {
        "IngestFunction",
        "NotifierFunction",
        "LastAgentFunction",
        "SurveyFunction",
        "GoodwillFunction",
        "MailSenderFunction",
        "MailEventsFunction",
    }
    assert STREAM_CONSUMERS == [
        "GoodwillFunction",
        "LastAgentFunction",
        "RouterFunction",
        "SurveyFunction",
    ]


@pytest.mark.parametrize("queue", sorted(QUEUES))
def test_every_queue_is_encrypted(queue):
    props = QUEUES[queue]["Properties"]
    assert props.get("SqsManagedSseEnabled") is True or props.get("KmsMasterKeyId")


@pytest.mark.parametrize("queue", sorted(QUEUES))
def test_every_queue_is_a_source_with_redrive_or_a_failure_destination(queue):
    sources = {ref_target(events(fn, "SQS")[ev]["Queue"]) for fn, ev in SQS_MAPPINGS}
    assert queue in sources | set(DLQS) | set(FAILURE_DESTINATIONS) | set(DELIVERY_DEAD_LETTERS)
    if queue in sources:
        assert "RedrivePolicy" in QUEUES[queue]["Properties"]


@pytest.mark.parametrize(("function", "event"), SQS_MAPPINGS)
def test_sqs_mapping_reports_failures_and_batches(function, event):
    props = events(function, "SQS")[event]
    assert "ReportBatchItemFailures" in props["FunctionResponseTypes"]
    if QUEUES[ref_target(props["Queue"])]["Properties"].get("FifoQueue"):
        # Lambda takes no batching window for a FIFO queue
        assert "MaximumBatchingWindowInSeconds" not in props
        return
    assert "MaximumBatchingWindowInSeconds" in props
    for name, overrides in PARAMETER_SETS.items():
        window = resolve_number(props["MaximumBatchingWindowInSeconds"], overrides)
        assert 0 <= window <= 300, name


@pytest.mark.parametrize(("function", "event"), SQS_MAPPINGS)
@pytest.mark.parametrize("parameter_set", sorted(PARAMETER_SETS))
@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_visibility_timeout_is_at_least_6x_the_function_timeout(
    function, event, parameter_set, mode
):
    overrides = PARAMETER_SETS[parameter_set] | {"FanOut": mode}
    condition = events(function, "SQS")[event].get("Condition")
    if condition and not conditions(overrides)[condition]:
        return  # the mapping is not created in this mode
    queue = ref_target(events(function, "SQS")[event]["Queue"])
    timeout = resolve_number(
        function_property(function, "Timeout", LAMBDA_DEFAULT_TIMEOUT), overrides
    )
    visibility = resolve_number(QUEUES[queue]["Properties"]["VisibilityTimeout"], overrides)
    assert visibility >= 6 * timeout, f"{queue}: {visibility} < 6 x {function} {timeout}"


@pytest.mark.parametrize(("function", "event"), SQS_MAPPINGS)
def test_sqs_source_redrives_to_a_longer_lived_dlq(function, event):
    queue = ref_target(events(function, "SQS")[event]["Queue"])
    redrive = QUEUES[queue]["Properties"]["RedrivePolicy"]
    assert int(redrive["maxReceiveCount"]) >= 5
    dlq = ref_target(redrive["deadLetterTargetArn"])
    assert retention(dlq) > retention(queue)


# --- streams: every stream mapping --------------------------------------------------------------


@pytest.mark.parametrize(("function", "event"), STREAM_MAPPINGS)
def test_stream_mapping_fails_safely(function, event):
    props = events(function, "DynamoDB")[event]
    assert ref_target(props["Stream"]) == "ContactsTable"
    assert props["StartingPosition"] in {"TRIM_HORIZON", "LATEST"}
    assert props["BisectBatchOnFunctionError"] is True
    assert 0 <= int(props["MaximumRetryAttempts"]) <= 10000  # -1 would retry forever
    assert 60 <= int(props["MaximumRecordAgeInSeconds"]) <= 86400  # within stream retention
    assert "ReportBatchItemFailures" in props["FunctionResponseTypes"]
    destination = props["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": ["StreamFailureQueue", "Arn"]}


@pytest.mark.parametrize(("function", "event"), STREAM_MAPPINGS)
def test_stream_consumer_may_send_to_the_failure_queue(function, event):
    mode = "router" if function == "RouterFunction" else "lambda"
    allowed = [
        p["SQSSendMessagePolicy"]["QueueName"]
        for p in policies(function, mode)
        if isinstance(p, dict) and "SQSSendMessagePolicy" in p
    ]
    assert {"Fn::GetAtt": ["StreamFailureQueue", "QueueName"]} in allowed


@pytest.mark.parametrize(("function", "event"), STREAM_MAPPINGS)
def test_stream_filters_are_exactly_the_contract(function, event):
    filters = events(function, "DynamoDB")[event]["FilterCriteria"]["Filters"]
    patterns = [json.loads(f["Pattern"]) for f in filters]
    assert patterns == STREAM_FILTERS[function]


def _check_leaves(node, path):
    """Every leaf of a filter pattern is a list of rules (strings, booleans, rule objects)."""
    assert isinstance(node, dict), f"{path}: expected an object"
    for key, value in node.items():
        if isinstance(value, dict):
            _check_leaves(value, f"{path}.{key}")
        else:
            assert isinstance(value, list) and value, f"{path}.{key}: leaves are non-empty lists"


def _check_typed_image(image: dict, path: str):
    for attribute, typed in image.items():
        where = f"{path}.{attribute}"
        assert isinstance(typed, dict), f"{where}: a bare value never matches a typed attribute"
        assert len(typed) == 1 and set(typed) <= DYNAMODB_TYPES, f"{where}: one DynamoDB type key"
        (rules,) = typed.values()
        assert isinstance(rules, list), f"{where}: rules are a list"
        for rule in rules:
            assert not (isinstance(rule, dict) and "numeric" in rule), (
                f"{where}: numeric never matches a DynamoDB value (numbers are strings)"
            )


@pytest.mark.parametrize(("function", "event"), STREAM_MAPPINGS)
def test_stream_filters_are_valid_and_typed(function, event):
    for f in events(function, "DynamoDB")[event]["FilterCriteria"]["Filters"]:
        pattern = json.loads(f["Pattern"])
        _check_leaves(pattern, function)
        for image in ("NewImage", "OldImage", "Keys"):
            if image in pattern.get("dynamodb", {}):
                _check_typed_image(pattern["dynamodb"][image], f"{function}.{image}")


def test_stream_filter_checker_rejects_untyped_and_numeric_rules():
    with pytest.raises(AssertionError):
        _check_typed_image({"disposition": ["ABANDONED"]}, "x")
    with pytest.raises(AssertionError):
        _check_typed_image({"wait_seconds": {"N": [{"numeric": [">=", 600]}]}}, "x")


# --- stores -----------------------------------------------------------------------------------


def test_tables_are_encrypted_and_shaped_as_the_contract():
    for table in of_type("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True
        assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    contacts = RESOURCES["ContactsTable"]["Properties"]
    assert [k["AttributeName"] for k in contacts["KeySchema"]] == ["pk", "sk"]
    assert contacts["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert contacts["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    idempotency = RESOURCES["IdempotencyTable"]["Properties"]
    assert [k["AttributeName"] for k in idempotency["KeySchema"]] == ["id"]
    assert idempotency["TimeToLiveSpecification"] == {
        "AttributeName": "expiration",
        "Enabled": True,
    }


def test_topics_are_encrypted():
    for topic in of_type("AWS::SNS::Topic").values():
        assert topic["Properties"]["KmsMasterKeyId"]
    # CloudWatch can publish to an encrypted topic only through a customer managed key.
    key = ref_target(RESOURCES["AlarmTopic"]["Properties"]["KmsMasterKeyId"])
    assert RESOURCES[key]["Type"] == "AWS::KMS::Key"
    principals = [s["Principal"] for s in RESOURCES[key]["Properties"]["KeyPolicy"]["Statement"]]
    assert {"Service": "cloudwatch.amazonaws.com"} in principals


def test_bucket_is_encrypted_versioned_private_and_tls_only():
    bucket = RESOURCES["ContactsBucket"]["Properties"]
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert bucket["VersioningConfiguration"]["Status"] == "Enabled"
    block = bucket["PublicAccessBlockConfiguration"]
    assert all(
        block[k] is True
        for k in (
            "BlockPublicAcls",
            "BlockPublicPolicy",
            "IgnorePublicAcls",
            "RestrictPublicBuckets",
        )
    )
    policies = [
        p["Properties"]
        for p in of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": "ContactsBucket"}
    ]
    assert any(
        s["Effect"] == "Deny"
        and s["Condition"].get("Bool", {}).get("aws:SecureTransport") in (False, "false")
        for p in policies
        for s in p["PolicyDocument"]["Statement"]
    )


# The prefixes whose new objects ingest reads: exports, and Connect's contact records as
# ContactRecordsDeliveryStream writes them. Never rejected/ (ingest's own reports would loop back)
# nor contact-records-errors/ (what Firehose could not deliver).
INGESTED_PREFIXES = ["incoming/", "contact-records/"]


def test_bucket_notifies_ingest_queue_only_for_its_inputs_without_a_cycle():
    bucket = RESOURCES["ContactsBucket"]
    configs = bucket["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    prefixes = []
    for config in configs:
        assert config["Event"] == "s3:ObjectCreated:*"
        assert ref_target(config["Queue"]) == "IngestQueue"
        [rule] = config["Filter"]["S3Key"]["Rules"]
        assert rule["Name"] == "prefix"
        prefixes.append(rule["Value"])
    assert prefixes == INGESTED_PREFIXES
    # no notified prefix holds another (S3 refuses overlapping ones) or what ingest writes
    for written in ("rejected/", "contact-records-errors/"):
        assert not any(written.startswith(p) or p.startswith(written) for p in prefixes)
    for prefix in prefixes:
        assert not any(o != prefix and o.startswith(prefix) for o in prefixes)
    # The name is built (Fn::Sub), so the queue policy needs no Ref to the bucket: no cycle.
    assert "Fn::Sub" in bucket["Properties"]["BucketName"]
    assert "IngestQueuePolicy" in as_list(bucket["DependsOn"])
    policy = RESOURCES["IngestQueuePolicy"]["Properties"]
    assert {"Ref": "IngestQueue"} in policy["Queues"]
    statement = policy_statements("IngestQueuePolicy")["AllowContactsBucketNotifications"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    source_arn = statement["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    bucket_name = bucket["Properties"]["BucketName"]["Fn::Sub"]
    assert source_arn[0] == "arn:${AWS::Partition}:s3:::" + bucket_name[0]
    assert source_arn[1] == bucket_name[1]


# --- least privilege --------------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_no_broad_policies(function, mode):
    for policy in policies(function, mode):
        # SAM's event source policies (AWSLambdaSQSQueueExecutionRole, ...) grant every queue or
        # stream of the account: a function's reader is a statement on its own source.
        assert not isinstance(policy, str), f"managed policy {policy!r}: scope a statement"
        if "Statement" not in policy:
            (template,) = policy
            assert template in ALLOWED_POLICY_TEMPLATES, template
    for statement in statements(function, mode):
        actions = set(as_list(statement["Action"]))
        assert not any(a == "*" or a.endswith(":*") for a in actions), actions
        if "*" in as_list(statement["Resource"]):
            assert actions <= STAR_RESOURCE_ALLOWLIST, f"{function}: {actions} on *"
    for resource in of_type("AWS::IAM::Policy").values():
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            assert "*" not in as_list(statement["Resource"])


CONTACTS_ARN = {"Fn::GetAtt": ["ContactsTable", "Arn"]}


def contacts_bucket_arn(path: str) -> dict:
    """ContactsBucket's ARN (+ path) as its BucketName builds it: IngestFunction's policy names
    the bucket so, since ContactsBucketKey names IngestFunction's role (no circular reference)."""
    name, variables = RESOURCES["ContactsBucket"]["Properties"]["BucketName"]["Fn::Sub"]
    return {"Fn::Sub": ["arn:${AWS::Partition}:s3:::" + name + path, variables]}


def table_grants(function: str, table: dict = CONTACTS_ARN) -> dict[str, set[str]]:
    """DynamoDB action -> the partition key patterns it is limited to ({"*"}: any item)."""
    grants: dict[str, set[str]] = {}
    for statement in statements(function):
        if statement["Resource"] != table:
            continue
        condition = statement.get("Condition", {}).get("ForAllValues:StringLike", {})
        leading = set(condition.get("dynamodb:LeadingKeys", ["*"]))
        for action in as_list(statement["Action"]):
            grants.setdefault(action, set()).update(leading)
    return grants


def test_ingest_permissions():
    granted = {
        (action, json.dumps(resource, sort_keys=True))
        for statement in statements("IngestFunction")
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }
    incoming = json.dumps(contacts_bucket_arn("/incoming/*"), sort_keys=True)
    records = json.dumps(contacts_bucket_arn("/contact-records/*"), sort_keys=True)
    rejected = json.dumps(contacts_bucket_arn("/rejected/*"), sort_keys=True)
    idempotency = json.dumps({"Fn::GetAtt": ["IdempotencyTable", "Arn"]})
    # A file is always read at its event's version (the bucket is versioned): make iam-report
    # showed the unversioned read unused.
    assert ("s3:GetObjectVersion", incoming) in granted
    assert ("s3:GetObject", incoming) not in granted
    # Connect's contact records, as ContactRecordsDeliveryStream writes them: read the same way
    assert ("s3:GetObjectVersion", records) in granted
    reads = {resource for action, resource in granted if action.startswith("s3:GetObject")}
    assert reads == {incoming, records, json.dumps(contacts_bucket_arn("/rejected/*"))}
    assert {("s3:PutObject", rejected), ("s3:GetObject", rejected)} <= granted
    # Powertools' documented idempotency grants, its fallback read included (template Metadata)
    for action in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        assert (f"dynamodb:{action}", idempotency) in granted
    # Contacts and their refs (transactions), the processing log, the newest object versions:
    # exactly the calls it makes, each on its own partitions; never a gift card or last agent
    # (LAST_AGENT#: a partition of its own, issue 43).
    assert table_grants("IngestFunction") == {
        "dynamodb:PutItem": {"CALLER#*", "CONTACT#*", "FILE#*", "OBJECT#*"},
        "dynamodb:DeleteItem": {"CALLER#*", "CONTACT#*"},
        "dynamodb:GetItem": {"FILE#*"},
    }


@pytest.mark.parametrize(
    ("function", "grants"),
    [
        ("SurveyFunction", {}),
        ("GoodwillFunction", {"dynamodb:PutItem": {"GIFT_CARD#*"}}),
        (
            # Reads callers' contacts; writes only LAST_AGENT, a partition no other function
            # writes (the ingest, which parses untrusted files, cannot reach it).
            "LastAgentFunction",
            {
                "dynamodb:ConditionCheckItem": {"CALLER#*"},
                "dynamodb:Query": {"CALLER#*"},
                "dynamodb:GetItem": {"CALLER#*", "LAST_AGENT#*"},
                "dynamodb:PutItem": {"LAST_AGENT#*"},
                "dynamodb:DeleteItem": {"LAST_AGENT#*"},
            },
        ),
        ("NotifierFunction", {}),
        # SES's record of what it sent, and the addresses gone for good: read by the sender,
        # written by the recorder, no other item of the table
        ("MailSenderFunction", {"dynamodb:GetItem": {"MAIL_SENT#*", "MAIL_ADDRESS#*"}}),
        ("MailEventsFunction", {"dynamodb:PutItem": {"MAIL_SENT#*", "MAIL_ADDRESS#*"}}),
    ],
)
def test_consumers_touch_only_their_own_items(function, grants):
    assert table_grants(function) == grants
    uses_idempotency = function in ("NotifierFunction", "MailSenderFunction")
    idempotency = {"Fn::GetAtt": ["IdempotencyTable", "Arn"]}
    assert bool(table_grants(function, idempotency)) is uses_idempotency


def test_route_reads_only_the_last_agents_three_attributes():
    [statement] = statements("RouteFunction")
    assert statement["Action"] == "dynamodb:GetItem"
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["LAST_AGENT#*"]},
        "ForAllValues:StringEquals": {
            "dynamodb:Attributes": ["agent_id", "contact_id", "ended_at"]
        },
        "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    }


# --- alarms -----------------------------------------------------------------------------------

ALARMS = list(of_type("AWS::CloudWatch::Alarm").values())


def _alarms_on(namespace: str, metric: str, dimension: str, target: dict) -> list[dict]:
    return [
        a["Properties"]
        for a in ALARMS
        if a["Properties"]["Namespace"] == namespace
        and a["Properties"]["MetricName"] == metric
        and {"Name": dimension, "Value": target} in a["Properties"]["Dimensions"]
        and {"Ref": "AlarmTopic"} in a["Properties"]["AlarmActions"]
    ]


@pytest.mark.parametrize("queue", sorted(set(DLQS) | set(FAILURE_DESTINATIONS)))
def test_every_dead_letter_queue_has_a_depth_alarm(queue):
    (alarm,) = _alarms_on(
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        {"Fn::GetAtt": [queue, "QueueName"]},
    )
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm_threshold(alarm) == 0


@pytest.mark.parametrize("metric", ["MessagesRejected", "FilesRejected", "FilesStale"])
def test_ingest_outcomes_that_need_a_human_page_someone(metric):
    (alarm,) = _alarms_on("ContactCenter", metric, "service", "ingest")
    assert (alarm["ComparisonOperator"], alarm_threshold(alarm)) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_dead_letter_queues_are_the_expected_ones():
    assert (
        sorted(
            ["IngestDeadLetterQueue", "NotificationDeadLetterQueue"]
            + ["MailDeadLetterQueue", "MailEventsDeadLetterQueue"]
            + [f"{c}DeadLetterQueue" for c in CONSUMERS]
        )
        == DLQS
    )
    assert FAILURE_DESTINATIONS == ["StreamFailureQueue"]


@pytest.mark.parametrize("function", STREAM_CONSUMERS)
def test_every_stream_consumer_has_an_iterator_age_alarm(function):
    (alarm,) = _alarms_on("AWS/Lambda", "IteratorAge", "FunctionName", {"Ref": function})
    (mapping,) = events(function, "DynamoDB").values()
    assert alarm_condition(alarm) == mapping.get("Condition")


def alarm_condition(properties: dict) -> str | None:
    (resource,) = [a for a in ALARMS if a["Properties"] is properties]
    return resource.get("Condition")


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_consumers_queue_alarms_only_where_it_exists(consumer):
    (alarm,) = _alarms_on(
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        {"Fn::GetAtt": [f"{consumer}DeadLetterQueue", "QueueName"]},
    )
    assert alarm_condition(alarm) == "FanOutByQueues"


def test_the_pipe_and_its_rules_alarm_on_failures():
    (pipe,) = _alarms_on(
        "AWS/EventBridge/Pipes", "ExecutionFailed", "PipeName", {"Ref": "ChangePipe"}
    )
    assert alarm_condition(pipe) == "HasChangePipe"
    for consumer in CONSUMERS:
        name = RESOURCES[f"{consumer}ChangeRule"]["Properties"]["Name"]
        (rule,) = _alarms_on("AWS/Events", "FailedInvocations", "RuleName", name)
        assert {"Name": "EventBusName", "Value": {"Ref": "ChangeBus"}} in rule["Dimensions"]
        assert alarm_condition(rule) == "FanOutByPipe"


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_function_has_an_errors_alarm(function):
    assert _alarms_on("AWS/Lambda", "Errors", "FunctionName", {"Ref": function})


def test_every_alarm_has_a_runbook():
    """The on-call reads what an alarm means and what to do under its name in operations.md."""
    headings = [
        line.removeprefix("### ")
        for line in (ROOT / "docs" / "operations.md").read_text().splitlines()
        if line.startswith("### ")
    ]
    named = {name for heading in headings for name in heading.replace(",", " ").split()}
    alarms = {n for n, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms - named == set()


# --- outputs and layout -----------------------------------------------------------------------


def test_outputs_include_the_contract_names():
    outputs = TEMPLATE["Outputs"]
    for name, value in CONTRACT_OUTPUTS.items():
        assert outputs[name]["Value"] == value, name


def test_template_reads_as_the_data_flow():
    flows = [
        "Flow 0 - From Connect to S3",
        "Flow 1 - ingest",
        "Flow 2 - fan-out",
        "Flow 3 - notify",
        "Flow 4 - route",
        "Flow 5 - alarms",
    ]
    positions = [TEMPLATE_TEXT.index(flow) for flow in flows]
    assert positions == sorted(positions)


def test_checkov_skips_carry_reasons():
    for name, resource in RESOURCES.items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert skip["id"].startswith("CKV_") and len(skip["comment"]) > 20, name


# --- samconfig --------------------------------------------------------------------------------


def test_samconfig_environments():
    assert SAMCONFIG["version"] == 0.1
    assert SAMCONFIG["default"]["global"]["parameters"]["stack_name"] == "last-agent-routing"
    build = SAMCONFIG["default"]["build"]["parameters"]
    assert build["cached"] is True and build["parallel"] is True
    for env, confirm in (("test", False), ("prod", True)):
        deploy = SAMCONFIG[env]["deploy"]["parameters"]
        assert deploy["capabilities"] == "CAPABILITY_IAM"
        assert deploy["confirm_changeset"] is confirm
        assert deploy["resolve_s3"] is True
        assert deploy["region"]
        assert deploy["fail_on_empty_changeset"] is False
        assert parse_overrides(deploy["parameter_overrides"])["Stage"] == env
    assert samconfig_envs()["default"]["Stage"] == "local"


def rule_refusal(overrides: dict[str, str]) -> str | None:
    """Why CloudFormation's template Rules refuse these parameters (None: they pass)."""
    values = {name: str(spec.get("Default", "")) for name, spec in PARAMETERS.items()}
    try:
        check_rules(TEMPLATE, values | overrides)
    except DeployError as refusal:
        return str(refusal)
    return None


# What prod cannot deploy without, in the order of the template's Rules, each with an example
# value: docs/deploy.md step 3's three, and PermissionsBoundary (committed already).
STEP_3 = {
    "AlarmEmail": "oncall@example.com",
    "ConnectInstanceArn": (
        "arn:aws:connect:us-east-1:111111111111:instance/0c6d5e7a-1b2c-4d3e-8f90-123456789abc"
    ),
    "ContactsKeyUsers": "arn:aws:iam::111111111111:role/contact-exports",
}
PROD_NEEDS = STEP_3 | {"PermissionsBoundary": "last-agent-routing-prod-permissions-boundary"}


@pytest.mark.parametrize("step_3", [False, True], ids=["step-3-not-done", "step-3-done"])
def test_prod_refuses_to_deploy_without_alarm_email_and_connect_instance(step_3):
    """Pinned whatever samconfig.toml holds: prod's overrides as committed, with step 3's values
    taken out (as the repository ships) or set (as deploy.md tells the deployer to)."""
    committed = samconfig_envs()["prod"]
    without = {name: value for name, value in committed.items() if name not in STEP_3}
    prod = STEP_3 | committed if step_3 else without  # the deployer's own values win
    missing = [name for name in PROD_NEEDS if not prod.get(name)]
    assert missing == ([] if step_3 else list(STEP_3))
    # Each deploy stops before changing anything, naming the next value to set, until none is.
    for name in missing:
        assert name in (rule_refusal(prod) or ""), name
        prod = prod | {name: PROD_NEEDS[name]}
    assert rule_refusal(prod) is None
    for name in PROD_NEEDS:  # and each one alone, taken away, is refused again
        assert name in (rule_refusal({k: v for k, v in prod.items() if k != name}) or ""), name
    for env in ("default", "test"):  # the other stages may run without step 3's values
        assert rule_refusal(samconfig_envs()[env]) is None, env


@pytest.mark.parametrize("parameter_set", sorted(PARAMETER_SETS))
def test_overrides_name_real_parameters_with_allowed_values(parameter_set):
    for name, value in PARAMETER_SETS[parameter_set].items():
        spec = PARAMETERS[name]
        if "AllowedValues" in spec:
            assert value in {str(v) for v in spec["AllowedValues"]}, name
        if spec["Type"] == "Number":
            number = int(value)
            assert number >= spec.get("MinValue", number), name
            assert number <= spec.get("MaxValue", number), name


@pytest.mark.parametrize("parameter_set", sorted(PARAMETER_SETS))
def test_notifier_retries_stay_inside_the_topics_deduplication_interval(parameter_set):
    """A publish repeated by a retry (a crash or a throttled completion after the publish) is
    deduplicated only within 5 minutes of the first, and the notifier publishes a claim never
    recorded again only within idempotency.REPUBLISH_WINDOW_SECONDS of it: every receive of a
    message must fall there, or a crash's retries end in the DLQ rather than publish. Receives
    are a visibility timeout apart; the last one may run a whole function timeout."""
    overrides = PARAMETER_SETS[parameter_set]
    queue = RESOURCES["NotificationQueue"]["Properties"]
    receives = int(queue["RedrivePolicy"]["maxReceiveCount"])
    visibility = resolve_number(queue["VisibilityTimeout"], overrides)
    timeout = resolve_number(function_property("NotifierFunction", "Timeout"), overrides)
    assert (receives - 1) * visibility + timeout < idempotency.REPUBLISH_WINDOW_SECONDS


def test_notifications_topic_is_fifo_and_deduplicates_by_id_per_contact():
    topic = RESOURCES["NotificationsTopic"]["Properties"]
    assert topic["FifoTopic"] is True
    assert topic["ContentBasedDeduplication"] is False  # the notifier sends the id
    assert topic["FifoThroughputScope"] == "MessageGroup"
    assert topic["TopicName"]["Fn::Sub"].endswith(".fifo")


def test_local_stack_is_fast():
    """Tests wait out queue visibility timeouts (6x the function's), so queue-fed functions keep
    short timeouts locally; stream consumers' timeout gates no wait, only how long a batch may
    take on a busy machine."""
    local = PARAMETER_SETS["samconfig-default"]
    for name in ("IngestFunctionTimeout", "NotifierFunctionTimeout", "ChangeQueueFunctionTimeout"):
        assert int(local[name]) <= 10, name
    for name in (
        "IngestBatchingWindowSeconds",
        "NotificationBatchingWindowSeconds",
        "StreamBatchingWindowSeconds",
    ):
        assert int(local[name]) <= 1, name


# --- the translated template (what CloudFormation receives) -----------------------------------

# AWS managed policies SAM attaches on its own: logs and X-Ray (Tracing: Active). The event
# sources' (AWSLambdaSQSQueueExecutionRole, AWSLambdaDynamoDBExecutionRole: every queue, every
# stream) are not: the mappings are explicit and each reader a scoped statement. Anything else
# would be a broadening edit; pipeline/bootstrap.yaml lets the execution role attach only these.
SAM_MANAGED_POLICIES = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}


@pytest.fixture(scope="module")
def translated():
    template = json.loads(json.dumps(TEMPLATE))
    for resource in template["Resources"].values():
        for key in ("CodeUri", "ContentUri"):
            if key in resource.get("Properties", {}):
                resource["Properties"][key] = "s3://placeholder/code.zip"
    policies = get_bundled_managed_policy_map("aws")

    class Loader:
        def load(self):
            return policies

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the translator needs one, any will do
        return transform(template, {}, Loader())


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_translated_roles_are_scoped(translated, mode):
    roles = {
        k: chosen(v, conditions({"FanOut": mode}))
        for k, v in translated["Resources"].items()
        if v["Type"] == "AWS::IAM::Role"
        and k not in ("ChangePipeRole", "ChangeMachineRole", "ContactRecordsDeliveryRole")
    }
    assert len(roles) == len(FUNCTIONS)
    for name, role in roles.items():
        assert set(role["Properties"].get("ManagedPolicyArns", [])) <= SAM_MANAGED_POLICIES, name
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                if "*" in as_list(statement["Resource"]):
                    assert set(as_list(statement["Action"])) <= STAR_RESOURCE_ALLOWLIST, name


# --- security (issue 21): boundary, scoped readers, concurrency, TLS, topics, retention, keys ---

DEPLOYED = {env: PARAMETER_SETS[f"samconfig-{env}"] for env in ("test", "prod")}


@pytest.mark.parametrize("env", sorted(DEPLOYED))
@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_every_role_carries_the_bootstraps_permissions_boundary(translated, env, mode):
    overrides = DEPLOYED[env] | {"FanOut": mode}
    # pipeline/bootstrap.yaml names it <AppName>-<Stage>-permissions-boundary
    assert overrides["PermissionsBoundary"] == f"last-agent-routing-{env}-permissions-boundary"
    roles = {
        k: chosen(v, conditions(overrides))
        for k, v in translated["Resources"].items()
        if v["Type"] == "AWS::IAM::Role" and created(v, mode)
    }
    # the pipe's role in every pipe mode, the machine's in pipe-sfn, the delivery stream's always
    assert (
        len(roles)
        == len([f for f in FUNCTIONS if created(RESOURCES[f], mode)])
        + (mode in PIPE_MODES)
        + (mode == "pipe-sfn")
        + 1
    )
    for name, role in roles.items():
        assert role["Properties"].get("PermissionsBoundary") == {
            "Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:policy/${PermissionsBoundary}"
        }, name


def test_deployed_stages_refuse_to_deploy_without_the_boundary():
    assert "PermissionsBoundary" in rule_refusal({"Stage": "test"})
    assert rule_refusal(DEPLOYED["test"]) is None
    assert rule_refusal({"Stage": "local"}) is None  # the local stack has no bootstrap


# What reads a queue's or a stream's records (sqs:GetQueueAttributes, a mapping's too, counts them
# and reads none: MailSenderFunction counts MailEventsDeadLetterQueue's).
READER_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:DescribeStream",
}


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_each_function_reads_only_its_own_queue_and_stream(function, mode):
    if not created(RESOURCES[function], mode):
        return  # RouterFunction exists in router mode only
    sources = [
        props["Queue"] if kind == "SQS" else props["Stream"]
        for kind in ("SQS", "DynamoDB")
        for props in events(function, kind).values()
        if props.get("Condition") is None or conditions({"FanOut": mode})[props["Condition"]]
    ]
    read = [
        statement["Resource"]
        for statement in statements(function, mode)
        if statement["Effect"] == "Allow" and READER_ACTIONS & set(as_list(statement["Action"]))
    ]
    assert bool(read) == bool(sources), (function, read, sources)  # RouteFunction: neither
    assert all(resource in sources for resource in read), (function, read, sources)


def test_stream_listing_is_never_scoped_to_a_resource():
    # dynamodb:ListStreams has no resource type: scoped to a stream it would never match.
    found = [
        s
        for mode in PIPE_MODES
        for p in chosen(
            RESOURCES["ChangePipeRole"]["Properties"]["Policies"], conditions({"FanOut": mode})
        )
        for s in p["PolicyDocument"]["Statement"]
    ]
    for function in FUNCTIONS:
        for mode in FAN_OUT_MODES:
            found += statements(function, mode)
    listing = [s for s in found if "dynamodb:ListStreams" in as_list(s["Action"])]
    assert listing and all(s["Resource"] == "*" for s in listing)


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_sqs_mappings_cap_their_concurrency_and_route_keeps_its_own(mode):
    caps = []
    for function, event in SQS_MAPPINGS:
        props = events(function, "SQS")[event]
        if props.get("Condition") and not conditions({"FanOut": mode})[props["Condition"]]:
            continue
        scaling = chosen(props["ScalingConfig"], conditions(DEPLOYED["prod"] | {"FanOut": mode}))
        assert 2 <= scaling["MaximumConcurrency"] <= 1000, (function, event)
        caps.append(scaling["MaximumConcurrency"])
    route = FUNCTION_RESOURCES["RouteFunction"]["Properties"]["ReservedConcurrentExecutions"]
    reserved = resolve_number(route, {})
    assert reserved >= 10  # Connect's peak of concurrent lookups, docs/template.md
    # Within a default account (1,000, of which Lambda keeps 100 unreserved), with room to spare
    # for the stream readers (one invocation per shard each).
    assert sum(caps) + reserved <= 900 - 100


def queue_policies(queue: str, mode: str) -> list[dict]:
    return [
        policy_statements(name, mode)
        for name, p in of_type("AWS::SQS::QueuePolicy").items()
        if created(p, mode) and {"Ref": queue} in p["Properties"]["Queues"]
    ]


@pytest.mark.parametrize("queue", sorted(QUEUES))
@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_every_queue_refuses_insecure_transport(queue, mode):
    if not created(QUEUES[queue], mode):
        return
    (policy,) = queue_policies(queue, mode)  # SQS keeps one policy per queue
    tls = policy["DenyInsecureTransport"]
    assert refuses_insecure_transport(tls)
    assert tls["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}


# pipeline/bootstrap.yaml's two roles, by name (issue 43, item 6: never a path's every role).
PIPELINE_ROLES = [
    {"Fn::Sub": f"arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:role/pipeline/{name}"}
    for name in (
        "${AppName}-pipeline-${Stage}-PipelineRole",
        "${AppName}-pipeline-${Stage}-CloudFormationExecutionRole",
    )
]


def test_the_app_name_is_the_bootstraps():
    app_name = PARAMETERS["AppName"]
    assert app_name["Default"] == "last-agent-routing"
    assert app_name["AllowedPattern"] == "^[a-z][a-z0-9-]{1,17}[a-z0-9]$"


@pytest.mark.parametrize(
    ("topic", "publisher", "mode"),
    [
        ("NotificationsTopic", "NotifierFunctionRole", "lambda"),
        ("ChangeTopic", "RouterFunctionRole", "router"),
        ("ChangeTopic", "ChangePipeRole", "pipe-topic"),
    ],
)
def test_topics_with_personal_data_have_one_publisher_and_are_changed_by_the_pipeline_only(
    topic, publisher, mode
):
    [name] = [
        k
        for k, v in of_type("AWS::SNS::TopicPolicy").items()
        if v["Properties"]["Topics"] == [{"Ref": topic}]
    ]
    assert RESOURCES[name].get("Condition") == RESOURCES[topic].get("Condition")
    policy = policy_statements(name, mode)
    assert not [s for s in policy.values() if s["Effect"] == "Allow"]  # IAM grants the account
    publish = policy["OnlyThePublisherPublishes"]
    assert (publish["Effect"], publish["Principal"], publish["Action"]) == (
        "Deny",
        "*",
        "sns:Publish",
    )
    assert publish["Condition"] == {
        "ArnNotEquals": {"aws:PrincipalArn": {"Fn::GetAtt": [publisher, "Arn"]}}
    }
    configure = policy["OnlyThePipelineSubscribesAndConfigures"]
    assert {"sns:Subscribe", "sns:SetTopicAttributes", "sns:AddPermission"} <= set(
        configure["Action"]
    )
    assert configure["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": PIPELINE_ROLES}}
    assert refuses_insecure_transport(policy["DenyInsecureTransport"])
    assert "sns:Publish" in policy["DenyInsecureTransport"]["Action"]


# The stack's alarms: none is named, so CloudFormation names each <stack>-<LogicalId>-<suffix>.
STACK_ALARMS = {
    "Fn::Sub": "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"
    "${AWS::StackName}-*"
}


def test_only_this_stacks_alarms_publish_to_the_alarm_topic_over_tls():
    assert not [a for a in ALARMS if "AlarmName" in a["Properties"]]  # STACK_ALARMS names them
    policy = policy_statements("AlarmTopicPolicy")
    key = policy_statements("AlarmTopicKey")
    for publish in (policy["CloudWatchAlarmsPublish"], key["CloudWatchAlarmsPublish"]):
        assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
        assert publish["Condition"] == {
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
            "ArnLike": {"aws:SourceArn": STACK_ALARMS},
        }
    assert refuses_insecure_transport(policy["DenyInsecureTransport"])


@pytest.mark.parametrize(
    ("role", "target", "service", "source"),
    [
        ("ChangePipeRole", "ChangePipe", "pipes", "pipes:${AWS::Region}:${AWS::AccountId}:pipe/"),
        (
            "ChangeMachineRole",
            "ChangeMachine",
            "states",
            "states:${AWS::Region}:${AWS::AccountId}:stateMachine:",
        ),
    ],
)
def test_the_pipe_and_the_machine_roles_trust_only_their_own_pipe_or_machine(
    role, target, service, source
):
    properties = RESOURCES[target]["Properties"]
    name = properties.get("Name") or properties["StateMachineName"]
    assert name == {"Fn::Sub": "${AWS::StackName}-changes"}
    [trust] = RESOURCES[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": f"{service}.amazonaws.com"}
    assert trust["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnEquals": {
            "aws:SourceArn": {"Fn::Sub": f"arn:${{AWS::Partition}}:{source}{name['Fn::Sub']}"}
        },
    }


def test_personal_data_is_kept_for_a_set_time():
    rules = {
        r["Id"]: r
        for r in RESOURCES["ContactsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    }
    assert (
        rules["ExpireIncomingFiles"]["Prefix"],
        rules["ExpireIncomingFiles"]["ExpirationInDays"],
    ) == ("incoming/", 30)
    assert (
        rules["ExpireRejectedReports"]["Prefix"],
        rules["ExpireRejectedReports"]["ExpirationInDays"],
    ) == ("rejected/", 90)
    for rule, prefix in (
        ("ExpireContactRecords", "contact-records/"),
        ("ExpireUndeliveredContactRecords", "contact-records-errors/"),
    ):
        assert (rules[rule]["Prefix"], rules[rule]["ExpirationInDays"]) == (prefix, 30)
    assert rules["ExpireNoncurrentVersions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 30
    assert all(r["Status"] == "Enabled" for r in rules.values())
    contacts = RESOURCES["ContactsTable"]["Properties"]["TimeToLiveSpecification"]
    assert contacts == {"AttributeName": "expires_at", "Enabled": True}
    logs = of_type("AWS::S3::Bucket")["ContactsAccessLogsBucket"]["Properties"]
    assert logs["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 365
    for queue in DLQS + FAILURE_DESTINATIONS:
        assert retention(queue) <= 14 * 24 * 3600, queue


def test_ingest_writes_the_expiry_the_table_deletes_contacts_by(stack):
    ended = "2026-11-29T09:05:30.250Z"
    row = {
        "contact_id": "c-1",
        "caller": "+4915112345678",
        "agent_id": "agent-7",
        "started_at": "2026-11-29T09:00:00.000Z",
        "ended_at": ended,
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": 5,
        "survey_opt_in": False,
    }
    ingested = model.datetime(2026, 11, 30, tzinfo=model.UTC)
    item = model.parse_contact(row, text_values=False, ingested_at=ingested).to_item(600)
    version = keys.contact_version(item)
    contacts_store.write_contacts(
        stack.dynamodb, stack.contacts_table, [contacts_store.ContactWrite(item, version, 1)]
    )
    stored = stack.dynamodb.scan(TableName=stack.contacts_table)["Items"]
    attribute = RESOURCES["ContactsTable"]["Properties"]["TimeToLiveSpecification"]["AttributeName"]
    expiry = model.datetime.fromisoformat(ended) + model.CONTACT_RETENTION
    # the CONTACT item and its CONTACT_REF (which names the caller's key) expire together
    assert sorted(i["type"]["S"] for i in stored) == ["CONTACT", "CONTACT_REF"]
    assert {i[attribute]["N"] for i in stored} == {str(int(expiry.timestamp()))}
    assert model.CONTACT_RETENTION.days == 400


def test_contact_files_are_encrypted_with_a_key_only_ingest_and_named_roles_use():
    [sse] = RESOURCES["ContactsBucket"]["Properties"]["BucketEncryption"][
        "ServerSideEncryptionConfiguration"
    ]
    assert sse["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": ["ContactsBucketKey", "Arn"]},
    }
    key = RESOURCES["ContactsBucketKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    via_s3 = {"kms:ViaService": {"Fn::Sub": "s3.${AWS::Region}.amazonaws.com"}}
    crypto = {
        "kms:Decrypt",
        "kms:Encrypt",
        "kms:GenerateDataKey",
        "kms:ReEncryptFrom",
        "kms:CreateGrant",
    }
    with_users = conditions({"ContactsKeyUsers": "arn:aws:iam::*:role/exports"})
    policy = {s["Sid"]: s for s in chosen(key["KeyPolicy"]["Statement"], with_users)}
    users = {
        sid: s
        for sid, s in policy.items()
        if crypto & set(as_list(s["Action"])) or "kms:*" in as_list(s["Action"])
    }
    assert set(users) == {
        "IngestReadsFilesAndWritesReports",
        "ContactRecordsDeliveryWritesRecords",
        "UploadersAndOperators",
    }
    assert users["IngestReadsFilesAndWritesReports"]["Principal"] == {
        "AWS": {"Fn::GetAtt": ["IngestFunctionRole", "Arn"]}
    }
    assert users["UploadersAndOperators"]["Condition"]["ArnLike"] == {
        "aws:PrincipalArn": {"Fn::Split": [",", {"Ref": "ContactsKeyUsers"}]}
    }
    assert users["ContactRecordsDeliveryWritesRecords"]["Principal"] == {
        "AWS": {"Fn::GetAtt": ["ContactRecordsDeliveryRole", "Arn"]}
    }
    for statement in users.values():
        assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
        assert statement["Condition"]["StringEquals"] == via_s3
    # without named users, no statement lets anyone but IngestFunction's role in
    alone = {s["Sid"] for s in chosen(key["KeyPolicy"]["Statement"], conditions({}))}
    assert "UploadersAndOperators" not in alone


def test_contact_files_are_put_with_the_bucket_key_only():
    """Issue 43, item 3: a put naming another algorithm or key is denied to everyone; a put
    naming neither gets the bucket's default encryption, the key."""
    policy = policy_statements("ContactsBucketPolicy")
    objects = {"Fn::Sub": "${ContactsBucket.Arn}/*"}
    for sid, key, wanted in (
        ("DenyOtherEncryption", "s3:x-amz-server-side-encryption", "aws:kms"),
        (
            "DenyOtherKeys",
            "s3:x-amz-server-side-encryption-aws-kms-key-id",
            {"Fn::GetAtt": ["ContactsBucketKey", "Arn"]},
        ),
    ):
        deny = policy[sid]
        assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", "*", "s3:PutObject")
        assert deny["Resource"] == objects
        assert deny["Condition"] == {
            "Null": {key: False},  # only when the request names it
            "StringNotEquals": {key: wanted},
        }
    # the delivery stream names the key by its ARN, as DenyOtherKeys compares it
    destination = RESOURCES["ContactRecordsDeliveryStream"]["Properties"][
        "ExtendedS3DestinationConfiguration"
    ]
    assert destination["EncryptionConfiguration"]["KMSEncryptionConfig"] == {
        "AWSKMSKeyARN": {"Fn::GetAtt": ["ContactsBucketKey", "Arn"]}
    }


def test_contact_files_access_is_logged_to_a_bucket_only_s3_log_delivery_writes():
    bucket = RESOURCES["ContactsBucket"]
    assert bucket["Properties"]["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": "ContactsAccessLogsBucket"
    }
    assert "checkov" not in bucket.get("Metadata", {})  # no skip of the access-log check
    policy = policy_statements("ContactsAccessLogsBucketPolicy")
    delivery = policy["S3LogDeliveryFromContactsBucket"]
    assert delivery["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    name, variables = bucket["Properties"]["BucketName"]["Fn::Sub"]
    assert delivery["Condition"]["ArnLike"]["aws:SourceArn"] == {
        "Fn::Sub": ["arn:${AWS::Partition}:s3:::" + name, variables]
    }
    assert [s for s in policy.values() if s["Effect"] == "Allow"] == [delivery]


def test_stateful_resources_outlive_the_stack():
    stateful = of_type("AWS::DynamoDB::Table") | of_type("AWS::S3::Bucket")
    stateful["ContactsBucketKey"] = RESOURCES["ContactsBucketKey"]
    for name, resource in stateful.items():
        assert resource.get("DeletionPolicy") == "Retain", name
        assert resource.get("UpdateReplacePolicy") == "Retain", name


def test_the_execution_role_may_attach_exactly_the_managed_policies_sam_adds(translated):
    attached = {
        arn
        for mode in FAN_OUT_MODES
        for resource in translated["Resources"].values()
        if resource["Type"] == "AWS::IAM::Role"
        for arn in chosen(resource, conditions({"FanOut": mode}))["Properties"].get(
            "ManagedPolicyArns", []
        )
    }
    bootstrap = load_cfn_yaml(str(ROOT / "pipeline" / "bootstrap.yaml"))
    role = bootstrap["Resources"]["CloudFormationExecutionRole"]["Properties"]
    [attach] = [
        s
        for p in role["Policies"]
        for s in p["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and "iam:AttachRolePolicy" in as_list(s["Action"])
    ]
    attachable = {
        a["Fn::Sub"].replace("${AWS::Partition}", "aws")
        for a in attach["Condition"]["ArnEquals"]["iam:PolicyARN"]
    }
    assert attached == attachable == SAM_MANAGED_POLICIES


# --- from Connect to S3 (issue 41): the delivery stream, its role, its alarms, the parameters ----


def test_the_delivery_stream_writes_contact_records_where_ingest_reads_them():
    stream = RESOURCES["ContactRecordsDeliveryStream"]["Properties"]
    assert stream["DeliveryStreamType"] == "DirectPut"
    s3 = stream["ExtendedS3DestinationConfiguration"]
    assert s3["BucketARN"] == {"Fn::GetAtt": ["ContactsBucket", "Arn"]}
    assert s3["RoleARN"] == {"Fn::GetAtt": ["ContactRecordsDeliveryRole", "Arn"]}
    # the plain prefix: Firehose appends YYYY/MM/dd/HH/, so the keys are Firehose's default ones
    assert s3["Prefix"] == "contact-records/" and s3["Prefix"] in INGESTED_PREFIXES
    assert s3["ErrorOutputPrefix"].startswith("contact-records-errors/")
    assert not s3["ErrorOutputPrefix"].startswith(tuple(INGESTED_PREFIXES))
    assert s3["CompressionFormat"] == "GZIP"
    assert s3["ProcessingConfiguration"] == {
        "Enabled": True,
        "Processors": [{"Type": "AppendDelimiterToRecord"}],
    }
    assert s3["EncryptionConfiguration"] == {
        "KMSEncryptionConfig": {"AWSKMSKeyARN": {"Fn::GetAtt": ["ContactsBucketKey", "Arn"]}}
    }
    hints = s3["BufferingHints"]
    assert 60 <= hints["IntervalInSeconds"] <= 900 and 1 <= hints["SizeInMBs"] <= 128
    logging = s3["CloudWatchLoggingOptions"]
    assert logging["Enabled"] is True
    assert logging["LogGroupName"] == {"Ref": "ContactRecordsDeliveryLogGroup"}
    group = RESOURCES["ContactRecordsDeliveryLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionInDays"}  # as every log group
    stream_of_group = RESOURCES[ref_target(logging["LogStreamName"])]["Properties"]
    assert stream_of_group["LogGroupName"] == {"Ref": "ContactRecordsDeliveryLogGroup"}


def test_the_delivery_role_writes_only_its_prefixes_and_logs_only_to_its_group():
    role = RESOURCES["ContactRecordsDeliveryRole"]["Properties"]
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "firehose.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": {"Ref": "AWS::AccountId"}}}
    assert (
        role["PermissionsBoundary"]
        == RESOURCES["ChangePipeRole"]["Properties"]["PermissionsBoundary"]
    )
    [policy] = role["Policies"]
    granted = {
        (action, json.dumps(resource, sort_keys=True))
        for statement in policy["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Allow" and "Condition" not in statement
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }
    bucket = json.dumps(contacts_bucket_arn(""), sort_keys=True)
    objects = [
        json.dumps(contacts_bucket_arn(f"/{prefix}*"), sort_keys=True)
        for prefix in ("contact-records/", "contact-records-errors/")
    ]
    group = json.dumps({"Fn::GetAtt": ["ContactRecordsDeliveryLogGroup", "Arn"]})
    assert granted == (
        {(a, bucket) for a in ("s3:GetBucketLocation", "s3:ListBucket")}
        | {("s3:ListBucketMultipartUploads", bucket)}
        | {
            (a, o)
            for a in ("s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload")
            for o in objects
        }
        | {("logs:PutLogEvents", group)}
    )
    # the key: its policy names this role, through S3, for this bucket's objects only
    key = policy_statements("ContactsBucketKey")["ContactRecordsDeliveryWritesRecords"]
    assert key["Principal"] == {"AWS": {"Fn::GetAtt": ["ContactRecordsDeliveryRole", "Arn"]}}
    assert set(key["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert key["Condition"]["StringEquals"] == {
        "kms:ViaService": {"Fn::Sub": "s3.${AWS::Region}.amazonaws.com"}
    }
    contexts = key["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"]
    assert [json.dumps(c, sort_keys=True) for c in contexts] == [bucket, *objects]
    # and the bucket's policy denies it nothing but plain HTTP and a put under another key than
    # ContactsBucketKey (the stream names the key: test_contact_files_are_put_with_the_bucket_...)
    denies = {
        sid: s
        for sid, s in policy_statements("ContactsBucketPolicy").items()
        if s["Effect"] == "Deny"
    }
    assert set(denies) == {"DenyInsecureTransport", "DenyOtherEncryption", "DenyOtherKeys"}
    assert refuses_insecure_transport(denies["DenyInsecureTransport"])


def test_the_delivery_stream_pages_on_failed_and_late_deliveries():
    alarms = {
        name: RESOURCES[name]["Properties"]
        for name in ("ContactRecordsDeliveryFailuresAlarm", "ContactRecordsDeliveryFreshnessAlarm")
    }
    stream = {"Name": "DeliveryStreamName", "Value": {"Ref": "ContactRecordsDeliveryStream"}}
    failures, freshness = alarms.values()
    assert (failures["Namespace"], failures["MetricName"]) == (
        "AWS/Firehose",
        "DeliveryToS3.Success",
    )
    assert (failures["ComparisonOperator"], alarm_threshold(failures)) == ("LessThanThreshold", 1)
    assert failures["Statistic"] == "Minimum"  # any failed put in the period
    assert freshness["MetricName"] == "DeliveryToS3.DataFreshness"
    assert freshness["ComparisonOperator"] == "GreaterThanThreshold"
    interval = RESOURCES["ContactRecordsDeliveryStream"]["Properties"][
        "ExtendedS3DestinationConfiguration"
    ]["BufferingHints"]["IntervalInSeconds"]
    assert alarm_threshold(freshness) > interval  # never the buffer's own wait
    for alarm in alarms.values():
        assert alarm["Dimensions"] == [stream]
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
        assert alarm["TreatMissingData"] == "notBreaching"


def test_the_survey_attribute_names_reach_ingest():
    assert PARAMETERS["SurveyOptInAttribute"]["Default"] == "survey_opt_in"
    assert PARAMETERS["SurveyEmailAttribute"]["Default"] == "email"
    env = FUNCTION_RESOURCES["IngestFunction"]["Properties"]["Environment"]["Variables"]
    assert env["SURVEY_OPT_IN_ATTRIBUTE"] == {"Ref": "SurveyOptInAttribute"}
    assert env["SURVEY_EMAIL_ATTRIBUTE"] == {"Ref": "SurveyEmailAttribute"}
    for name, function in FUNCTION_RESOURCES.items():  # and no other function
        if name != "IngestFunction":
            variables = function["Properties"].get("Environment", {}).get("Variables", {})
            assert not {"SURVEY_OPT_IN_ATTRIBUTE", "SURVEY_EMAIL_ATTRIBUTE"} & set(variables)


def test_connect_resources_exist_only_with_an_instance():
    connect = {n for n, r in RESOURCES.items() if r["Type"].startswith("AWS::Connect::")}
    assert connect == {
        "ContactRecordsStorage",
        "RouteFunctionConnectAssociation",
        "LastAgentRoutingFlow",
    }
    instance = STEP_3["ConnectInstanceArn"]
    queue = instance + "/queue/0d7c2b1a-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
    for overrides, expected in (
        ({}, set()),
        ({"ConnectInstanceArn": instance}, connect - {"LastAgentRoutingFlow"}),
        ({"ConnectInstanceArn": instance, "ConnectDefaultQueueArn": queue}, connect),
    ):
        made = {n for n in connect if conditions(overrides)[RESOURCES[n]["Condition"]]}
        assert made == expected, overrides
    storage = RESOURCES["ContactRecordsStorage"]["Properties"]
    assert (storage["ResourceType"], storage["StorageType"]) == (
        "CONTACT_TRACE_RECORDS",
        "KINESIS_FIREHOSE",
    )
    assert storage["KinesisFirehoseConfig"]["FirehoseArn"] == {
        "Fn::GetAtt": ["ContactRecordsDeliveryStream", "Arn"]
    }
    association = RESOURCES["RouteFunctionConnectAssociation"]["Properties"]
    assert association["IntegrationType"] == "LAMBDA_FUNCTION"
    assert association["IntegrationArn"] == {"Fn::GetAtt": ["RouteFunction", "Arn"]}
    assert RESOURCES["RouteFunctionConnectPermission"]["Condition"] == "HasConnectInstance"


def test_every_event_source_mapping_counts_its_events_and_every_stream_mapping_alarms():
    """MetricsConfig EventCount on each mapping (issue 47, item 3); a stream mapping that gives
    records up to its OnFailure destination has an alarm on it, drawn on the dashboard."""
    mappings = {
        n: r for n, r in RESOURCES.items() if r["Type"] == "AWS::Lambda::EventSourceMapping"
    }
    for name, mapping in mappings.items():
        assert mapping["Properties"].get("MetricsConfig") == {"Metrics": ["EventCount"]}, name
    watched = {
        r["Properties"]["Dimensions"][0]["Value"]["Ref"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"].get("MetricName") == "OnFailureDestinationDeliveredEventCount"
    }
    streams = {n for n, m in mappings.items() if "DestinationConfig" in m["Properties"]}
    assert streams and watched == streams


# --- the mail sender (issue 44) ---------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_only_the_mail_sender_sends_mail_as_the_stacks_identity_through_its_configuration_set(
    function,
):
    sending = [
        s
        for mode in FAN_OUT_MODES
        for s in statements(function, mode)
        if any(action.startswith("ses:") for action in as_list(s["Action"]))
    ]
    if function != "MailSenderFunction":
        assert sending == []
        return
    assert {json.dumps(s, sort_keys=True) for s in sending} == {
        json.dumps(
            {
                "Sid": "SendItsMail",
                "Effect": "Allow",
                "Action": "ses:SendEmail",
                "Resource": [
                    {"Fn::Sub": SES_ARN + ":identity/${MailIdentity}"},
                    {"Fn::Sub": SES_ARN + ":configuration-set/${MailConfigurationSet}"},
                ],
            },
            sort_keys=True,
        )
    }
    identity = RESOURCES["MailIdentity"]["Properties"]
    assert identity["EmailIdentity"] == {"Ref": "MailSenderIdentity"}


def test_the_mail_queue_is_the_topics_fifo_subscriber_and_only_the_topic_sends_to_it():
    assert QUEUES["MailQueue"]["Properties"]["FifoQueue"] is True
    assert QUEUES["MailDeadLetterQueue"]["Properties"]["FifoQueue"] is True  # a FIFO's DLQ is FIFO
    subscription = RESOURCES["MailSubscription"]["Properties"]
    assert subscription == {
        "TopicArn": {"Ref": "NotificationsTopic"},
        "Protocol": "sqs",
        "Endpoint": {"Fn::GetAtt": ["MailQueue", "Arn"]},
        "RawMessageDelivery": True,  # a message is the notification as published
        # a published notification SNS cannot deliver is kept, not dropped (FIFO: the topic's)
        "RedrivePolicy": {
            "deadLetterTargetArn": {"Fn::GetAtt": ["MailDeliveryDeadLetterQueue", "Arn"]}
        },
    }
    assert QUEUES["MailDeliveryDeadLetterQueue"]["Properties"]["FifoQueue"] is True
    allow = policy_statements("MailDeliveryDeadLetterQueuePolicy")["AllowUndeliveredNotifications"]
    assert allow["Principal"] == {"Service": "sns.amazonaws.com"}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": "NotificationsTopic"}}}
    allow = policy_statements("MailQueuePolicy")["AllowNotifications"]
    assert allow["Principal"] == {"Service": "sns.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": "NotificationsTopic"}}}


# What the sender's wait leaves SES for its own lag (from accepting a message to its Send event on
# the bus) once the recorder's retries are covered: measured locally at most 9.3 s
# (docs/design.md); AWS documents no figure, SendEventLagSeconds shows it.
SES_LAG_ALLOWANCE_SECONDS = 10


@pytest.mark.parametrize("parameter_set", sorted(PARAMETER_SETS))
def test_a_send_in_doubt_waits_until_its_send_event_is_recorded_or_held_back(parameter_set):
    """A claim in doubt with no MAIL_SENT is sent again once the wait has passed and nothing is
    held in MailEventsDeadLetterQueue. So the wait must outlast the recorder: the rule delivers at
    once or dead-letters, MailEventsQueue's receives (a batching window, then one per visibility
    timeout) record the event or dead-letter it. And the sender's own receives must outlast the
    wait, or a send that never happened would end in MailDeadLetterQueue instead of being sent."""
    overrides = PARAMETER_SETS[parameter_set]
    wait = resolve_number({"Ref": "MailSendEventWaitSeconds"}, overrides)
    [target] = RESOURCES["MailEventsRule"]["Properties"]["Targets"]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    recorder_queue = QUEUES["MailEventsQueue"]["Properties"]
    ([mapping],) = [events("MailEventsFunction", "SQS").values()]
    recorded_or_held = resolve_number(mapping["MaximumBatchingWindowInSeconds"], overrides) + (
        recorder_queue["RedrivePolicy"]["maxReceiveCount"]
        * resolve_number(recorder_queue["VisibilityTimeout"], overrides)
    )
    assert wait >= recorded_or_held + SES_LAG_ALLOWANCE_SECONDS

    sender_queue = QUEUES["MailQueue"]["Properties"]
    receives = sender_queue["RedrivePolicy"]["maxReceiveCount"]
    visibility = resolve_number(sender_queue["VisibilityTimeout"], overrides)
    assert visibility * (receives - 1) > wait
    assert PARAMETERS["MailSendEventWaitSeconds"]["Default"] == (
        idempotency.MAIL_SEND_EVENT_WAIT_SECONDS
    )
    # the largest visibility the template allows still outlasts the largest wait
    largest = PARAMETERS["NotificationQueueVisibilityTimeout"]["MaxValue"]
    assert largest * (receives - 1) > PARAMETERS["MailSendEventWaitSeconds"]["MaxValue"]


def test_ses_sending_events_of_the_stacks_configuration_set_reach_the_recorder():
    destination = RESOURCES["MailEventDestination"]["Properties"]
    assert destination["ConfigurationSetName"] == {"Ref": "MailConfigurationSet"}
    events_ = destination["EventDestination"]
    assert {"send", "bounce", "complaint"} <= set(events_["MatchingEventTypes"])
    assert events_["EventBridgeDestination"]["EventBusArn"]["Fn::Sub"].endswith(
        ":event-bus/default"
    )  # SES publishes to the default bus only
    rule = RESOURCES["MailEventsRule"]["Properties"]
    assert "EventBusName" not in rule  # the default bus
    assert rule["EventPattern"]["detail"]["mail"]["tags"] == {
        "ses:configuration-set": [{"Ref": "MailConfigurationSet"}]
    }
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["MailEventsQueue", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["MailEventsDeadLetterQueue", "Arn"]}
    ([mapping],) = [events("MailEventsFunction", "SQS").values()]
    assert mapping["Queue"] == {"Fn::GetAtt": ["MailEventsQueue", "Arn"]}


def test_no_one_moves_the_mail_events_dead_letters_back_to_their_queue():
    """On their way back through MailEventsQueue, Send events would be in neither place a
    sender in doubt looks: SQS's redrive is denied to everyone, `ops dlq redrive` records them."""
    statements = RESOURCES["MailEventsDeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]
    [deny] = [s for s in statements["Statement"] if s["Sid"] == "DenyMoveBack"]
    assert deny == {
        "Sid": "DenyMoveBack",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "sqs:StartMessageMoveTask",
        "Resource": {"Fn::GetAtt": ["MailEventsDeadLetterQueue", "Arn"]},
    }
