"""CreateEventSourceMapping / UpdateEventSourceMapping validate as Lambda does
(emulator/services/awslambda.py): moto in process, through boto3's lambda client.

The client does not validate parameters itself (Config(parameter_validation=False)), as
CloudFormation's requests are not validated by botocore: every setting reaches the service, and
what the service answers is under test.
"""

import json

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.process import ACCOUNT, REGION
from tests.unit.emulator.support import STREAM_OF_BOTH_IMAGES, create_function, pk_table

FUNCTION_TIMEOUT = 30


pytestmark = pytest.mark.usefixtures("moto_patched")


class Aws:
    def __init__(self, clients: dict):
        self.lam = clients["lambda"]
        self.sqs = clients["sqs"]
        self.ddb = clients["dynamodb"]
        self.sns = clients["sns"]
        self.function_arn = create_function(
            self.lam, clients["iam"], "consumer", Timeout=FUNCTION_TIMEOUT
        )

    def queue(self, name: str, visibility: int = FUNCTION_TIMEOUT, **attributes: str) -> str:
        url = self.sqs.create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": str(visibility), **attributes}
        )["QueueUrl"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return attrs["Attributes"]["QueueArn"]

    def fifo_queue(self, name: str = "orders.fifo") -> str:
        return self.queue(name, FifoQueue="true")

    def stream(self, name: str = "contacts") -> str:
        table = self.ddb.create_table(**pk_table(name, StreamSpecification=STREAM_OF_BOTH_IMAGES))
        return table["TableDescription"]["LatestStreamArn"]

    def create(self, source_arn: str, **settings) -> dict:
        return self.lam.create_event_source_mapping(
            EventSourceArn=source_arn, FunctionName="consumer", **settings
        )

    def mappings(self) -> list[dict]:
        return self.lam.list_event_source_mappings(FunctionName="consumer")["EventSourceMappings"]

    def refused(self, source_arn: str, *fragments: str, **settings) -> str:
        """Create a mapping that must be refused; nothing may be stored. The error message."""
        before = len(self.mappings())
        message = refused(lambda: self.create(source_arn, **settings), *fragments)
        assert len(self.mappings()) == before
        return message


def refused(call, *fragments: str) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidParameterValueException", error
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    for fragment in fragments:
        assert fragment in error["Message"], error["Message"]
    return error["Message"]


@pytest.fixture(scope="module")
def clients(module_credentials):
    """boto3 clients, made once (mock_aws intercepts every client while it is active)."""
    unvalidated = Config(parameter_validation=False)
    return {
        "lambda": boto3.client("lambda", region_name=REGION, config=unvalidated),
        **{
            service: boto3.client(service, region_name=REGION)
            for service in ("sqs", "dynamodb", "sns", "iam")
        },
    }


@pytest.fixture
def aws(clients):
    with mock_aws():
        yield Aws(clients)


def pattern(**document) -> dict:
    return {"Pattern": json.dumps(document)}


# --- accepted ------------------------------------------------------------------------------------


def test_valid_sqs_mappings_are_accepted(aws):
    standard = aws.create(
        aws.queue("ingest"),
        BatchSize=100,
        MaximumBatchingWindowInSeconds=1,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        FilterCriteria={"Filters": [pattern(body={"n": [i]}) for i in range(5)]},
    )
    fifo = aws.create(aws.fifo_queue(), BatchSize=10)

    assert standard["BatchSize"] == 100
    assert standard["MaximumBatchingWindowInSeconds"] == 1
    assert len(standard["FilterCriteria"]["Filters"]) == 5
    assert fifo["BatchSize"] == 10
    assert {m["UUID"] for m in aws.mappings()} == {standard["UUID"], fifo["UUID"]}


def test_valid_stream_mapping_with_parallelization_factor_is_accepted(aws):
    failures = aws.queue("stream-failures")
    created = aws.create(
        aws.stream(),
        StartingPosition="TRIM_HORIZON",
        BatchSize=500,
        ParallelizationFactor=4,
        BisectBatchOnFunctionError=True,
        MaximumRetryAttempts=3,
        MaximumRecordAgeInSeconds=3600,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        DestinationConfig={"OnFailure": {"Destination": failures}},
    )

    stored = aws.lam.get_event_source_mapping(UUID=created["UUID"])
    assert stored["ParallelizationFactor"] == 4
    assert stored["StartingPosition"] == "TRIM_HORIZON"
    assert stored["MaximumRetryAttempts"] == 3
    assert stored["DestinationConfig"]["OnFailure"]["Destination"] == failures


@pytest.mark.parametrize("position", ["TRIM_HORIZON", "LATEST"])
def test_stream_mapping_accepts_either_starting_position(aws, position):
    created = aws.create(aws.stream(), StartingPosition=position)
    assert created["StartingPosition"] == position


def test_stream_mapping_accepts_an_sns_on_failure_destination(aws):
    topic = aws.sns.create_topic(Name="stream-failures")["TopicArn"]
    created = aws.create(
        aws.stream(),
        StartingPosition="LATEST",
        DestinationConfig={"OnFailure": {"Destination": topic}},
    )
    assert created["DestinationConfig"]["OnFailure"]["Destination"] == topic


# --- filters -------------------------------------------------------------------------------------


def test_more_than_five_filters_are_refused(aws):
    filters = [pattern(body={"n": [i]}) for i in range(6)]
    aws.refused(aws.queue("ingest"), "6 filters", "at most 5", FilterCriteria={"Filters": filters})


@pytest.mark.parametrize(
    "bad",
    [
        {"Pattern": "{not json"},
        pattern(body={"status": "done"}),  # a leaf value that is not a list
        pattern(body={"status": []}),  # an empty list
        pattern(body={"n": [{"numeric": [">", 1], "prefix": "a"}]}),  # two operators
    ],
    ids=["not-json", "leaf-not-a-list", "empty-list", "two-operators"],
)
def test_an_invalid_filter_pattern_is_refused(aws, bad):
    aws.refused(
        aws.queue("ingest"), "Invalid filter pattern definition", FilterCriteria={"Filters": [bad]}
    )


# --- SQS -----------------------------------------------------------------------------------------


def test_queue_visibility_timeout_below_function_timeout_is_refused(aws):
    aws.refused(
        aws.queue("short", visibility=FUNCTION_TIMEOUT - 1),
        f"Queue visibility timeout: {FUNCTION_TIMEOUT - 1} seconds is less than Function "
        f"timeout: {FUNCTION_TIMEOUT} seconds",
    )
    assert aws.create(aws.queue("equal", visibility=FUNCTION_TIMEOUT))["UUID"]


@pytest.mark.parametrize("window", [None, 0])
def test_sqs_batch_size_over_10_needs_a_batching_window(aws, window):
    settings = {"BatchSize": 11}
    if window is not None:
        settings["MaximumBatchingWindowInSeconds"] = window
    aws.refused(aws.queue("ingest"), "Maximum batch window", "greater than 10", **settings)


@pytest.mark.parametrize(
    ("source", "batch_size", "limit"),
    [
        ("standard", 0, "between 1 and 10000"),
        ("standard", 10_001, "between 1 and 10000"),
        ("fifo", 11, "between 1 and 10 for a FIFO queue"),
        ("fifo", 0, "between 1 and 10 for a FIFO queue"),
        ("stream", 0, "between 1 and 10000"),
        ("stream", 10_001, "between 1 and 10000"),
    ],
)
def test_batch_size_out_of_range_is_refused(aws, source, batch_size, limit):
    settings = {"BatchSize": batch_size}
    if source == "standard":
        arn = aws.queue("ingest")
        settings["MaximumBatchingWindowInSeconds"] = 1  # not the batching window's refusal
    elif source == "fifo":
        arn = aws.fifo_queue()
    else:
        arn = aws.stream()
        settings["StartingPosition"] = "LATEST"
    aws.refused(arn, f"BatchSize {batch_size} is out of range", limit, **settings)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("StartingPosition", "LATEST"),
        ("StartingPosition", "TRIM_HORIZON"),
        ("BisectBatchOnFunctionError", True),
        ("MaximumRetryAttempts", 2),
        ("MaximumRecordAgeInSeconds", 120),
        ("ParallelizationFactor", 2),
    ],
)
def test_a_stream_only_setting_on_an_sqs_mapping_is_refused(aws, name, value):
    aws.refused(aws.queue("ingest"), f"Unsupported {name} parameter", **{name: value})


def test_an_on_failure_destination_on_an_sqs_mapping_is_refused(aws):
    dlq = aws.queue("dlq")
    aws.refused(
        aws.queue("ingest"),
        "Unsupported DestinationConfig parameter",
        DestinationConfig={"OnFailure": {"Destination": dlq}},
    )


def test_an_sqs_mapping_keeps_its_maximum_concurrency(aws):
    created = aws.create(aws.queue("capped"), ScalingConfig={"MaximumConcurrency": 5})
    stored = aws.lam.get_event_source_mapping(UUID=created["UUID"])
    assert stored["ScalingConfig"] == {"MaximumConcurrency": 5}


@pytest.mark.parametrize("maximum", [1, 1001])
def test_a_maximum_concurrency_outside_2_to_1000_is_refused(aws, maximum):
    aws.refused(
        aws.queue(f"capped-{maximum}"),
        "MaximumConcurrency",
        "between 2 and 1000",
        ScalingConfig={"MaximumConcurrency": maximum},
    )


def test_a_stream_mapping_takes_no_scaling_config(aws):
    aws.refused(
        aws.stream("scaled"),
        "Unsupported ScalingConfig",
        StartingPosition="LATEST",
        ScalingConfig={"MaximumConcurrency": 5},
    )


# --- streams -------------------------------------------------------------------------------------


def test_a_stream_mapping_without_starting_position_is_refused(aws):
    aws.refused(aws.stream(), "StartingPosition is required")


def test_at_timestamp_starting_position_is_refused(aws):
    aws.refused(aws.stream(), "StartingPosition", "AT_TIMESTAMP", StartingPosition="AT_TIMESTAMP")


def test_tumbling_window_is_refused_as_not_implemented_locally(aws):
    message = aws.refused(aws.stream(), StartingPosition="LATEST", TumblingWindowInSeconds=60)
    assert message.startswith("TumblingWindowInSeconds is not supported by the local stack")
    assert "tumbling windows" in message
    assert "Remove TumblingWindowInSeconds" in message


def test_event_count_metrics_are_kept_and_kafkas_metrics_refused(aws):
    """API_EventSourceMappingMetricsConfig: EventCount for any source; ErrorCount and
    KafkaMetrics are Kafka's."""
    created = aws.create(aws.queue("q"), MetricsConfig={"Metrics": ["EventCount"]})
    assert created["MetricsConfig"] == {"Metrics": ["EventCount"]}
    aws.refused(
        aws.stream(), "Kafka", StartingPosition="LATEST", MetricsConfig={"Metrics": ["ErrorCount"]}
    )
    aws.refused(aws.queue("r"), "invalid", MetricsConfig={"Metrics": ["Everything"]})


def test_a_tumbling_window_of_zero_is_no_window(aws):
    created = aws.create(aws.stream(), StartingPosition="LATEST", TumblingWindowInSeconds=0)
    assert created["UUID"]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("MaximumRetryAttempts", -2, "MaximumRetryAttempts -2 is out of range"),
        ("MaximumRetryAttempts", 10_001, "MaximumRetryAttempts 10001 is out of range"),
        ("MaximumRecordAgeInSeconds", 59, "MaximumRecordAgeInSeconds 59 is out of range"),
        ("MaximumRecordAgeInSeconds", 0, "MaximumRecordAgeInSeconds 0 is out of range"),
        (
            "MaximumRecordAgeInSeconds",
            604_801,
            "MaximumRecordAgeInSeconds 604801 is out of range",
        ),
    ],
)
def test_retry_and_record_age_settings_out_of_range_are_refused(aws, name, value, expected):
    aws.refused(aws.stream(), expected, StartingPosition="LATEST", **{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MaximumRetryAttempts", -1),
        ("MaximumRetryAttempts", 0),
        ("MaximumRetryAttempts", 10_000),
        ("MaximumRecordAgeInSeconds", -1),
        ("MaximumRecordAgeInSeconds", 60),
        ("MaximumRecordAgeInSeconds", 604_800),
    ],
)
def test_retry_and_record_age_settings_at_their_bounds_are_accepted(aws, name, value):
    created = aws.create(aws.stream(), StartingPosition="LATEST", **{name: value})
    assert created[name] == value


@pytest.mark.parametrize("factor", [0, 11])
def test_parallelization_factor_out_of_range_is_refused(aws, factor):
    aws.refused(
        aws.stream(),
        f"ParallelizationFactor {factor} is out of range",
        "between 1 and 10",
        StartingPosition="LATEST",
        ParallelizationFactor=factor,
    )


@pytest.mark.parametrize("factor", [1, 10])
def test_parallelization_factor_at_its_bounds_is_accepted(aws, factor):
    created = aws.create(aws.stream(), StartingPosition="LATEST", ParallelizationFactor=factor)
    assert created["ParallelizationFactor"] == factor


@pytest.mark.parametrize(
    "destination",
    [
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:failures",
        f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default",
    ],
    ids=["lambda", "eventbridge"],
)
def test_an_on_failure_destination_that_is_not_sqs_sns_or_s3_is_refused(aws, destination):
    aws.refused(
        aws.stream(),
        "must be an SQS queue, SNS topic or S3 bucket ARN",
        StartingPosition="LATEST",
        DestinationConfig={"OnFailure": {"Destination": destination}},
    )


def test_an_on_success_destination_on_a_stream_mapping_is_refused(aws):
    aws.refused(
        aws.stream(),
        "OnSuccess is not supported",
        StartingPosition="LATEST",
        DestinationConfig={"OnSuccess": {"Destination": aws.queue("done")}},
    )


def test_unknown_function_response_types_are_refused(aws):
    aws.refused(
        aws.queue("ingest"),
        "FunctionResponseTypes",
        "ReportBatchItemFailures",
        FunctionResponseTypes=["ReportEverything"],
    )


# --- updates -------------------------------------------------------------------------------------


def test_an_sqs_mapping_update_to_an_invalid_setting_is_refused_and_changes_nothing(aws):
    created = aws.create(aws.queue("ingest"), BatchSize=5)
    uuid = created["UUID"]

    refused(
        lambda: aws.lam.update_event_source_mapping(UUID=uuid, BatchSize=50),
        "Maximum batch window",
    )
    refused(
        lambda: aws.lam.update_event_source_mapping(
            UUID=uuid, FilterCriteria={"Filters": [pattern(body={"n": 1})]}
        ),
        "Invalid filter pattern definition",
    )

    stored = aws.lam.get_event_source_mapping(UUID=uuid)
    assert stored["BatchSize"] == 5
    assert "MaximumBatchingWindowInSeconds" not in stored
    assert "FilterCriteria" not in stored

    # Both together are valid: the update is judged on the merged result.
    aws.lam.update_event_source_mapping(UUID=uuid, BatchSize=50, MaximumBatchingWindowInSeconds=2)
    stored = aws.lam.get_event_source_mapping(UUID=uuid)
    assert (stored["BatchSize"], stored["MaximumBatchingWindowInSeconds"]) == (50, 2)


def test_an_update_is_judged_against_the_mappings_existing_settings(aws):
    uuid = aws.create(aws.queue("ingest"), BatchSize=50, MaximumBatchingWindowInSeconds=2)["UUID"]

    refused(
        lambda: aws.lam.update_event_source_mapping(UUID=uuid, MaximumBatchingWindowInSeconds=0),
        "Maximum batch window",
    )

    stored = aws.lam.get_event_source_mapping(UUID=uuid)
    assert (stored["BatchSize"], stored["MaximumBatchingWindowInSeconds"]) == (50, 2)


def test_a_stream_mapping_update_to_an_invalid_setting_is_refused_and_changes_nothing(aws):
    uuid = aws.create(
        aws.stream(), StartingPosition="LATEST", ParallelizationFactor=4, MaximumRetryAttempts=3
    )["UUID"]

    for settings, fragment in [
        ({"ParallelizationFactor": 11}, "ParallelizationFactor 11 is out of range"),
        ({"MaximumRetryAttempts": 10_001}, "MaximumRetryAttempts 10001 is out of range"),
        ({"TumblingWindowInSeconds": 30}, "TumblingWindowInSeconds is not supported"),
        (
            {"DestinationConfig": {"OnFailure": {"Destination": aws.function_arn}}},
            "must be an SQS queue, SNS topic or S3 bucket ARN",
        ),
    ]:
        refused(lambda s=settings: aws.lam.update_event_source_mapping(UUID=uuid, **s), fragment)

    stored = aws.lam.get_event_source_mapping(UUID=uuid)
    assert stored["ParallelizationFactor"] == 4
    assert stored["MaximumRetryAttempts"] == 3
    assert "TumblingWindowInSeconds" not in stored
    assert "DestinationConfig" not in stored

    aws.lam.update_event_source_mapping(UUID=uuid, ParallelizationFactor=10)
    assert aws.lam.get_event_source_mapping(UUID=uuid)["ParallelizationFactor"] == 10
