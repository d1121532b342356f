"""What Lambda reports of a stream mapping's invocations (emulator/delivery/mappings.py
report_stream_invocation): GetEventSourceMapping's LastProcessingResult and the function's
IteratorAge metric, read back through the Lambda and CloudWatch APIs, moto in process."""

from datetime import timedelta

import pytest
from moto.core.utils import utcnow

from emulator.delivery.mappings import BatchOutcome, MappingConfig, report_stream_invocation
from tests.unit.emulator.support import client, stream_consumer

pytestmark = pytest.mark.usefixtures("moto_patched")


def test_a_stream_mapping_reports_its_last_result_and_the_iterator_age(moto_in_process):
    lam = client("lambda")
    mapping = stream_consumer(lam, client("iam"), "consumer")
    function_arn, uuid = mapping["FunctionArn"], mapping["UUID"]

    def last_result() -> str:
        return lam.get_event_source_mapping(UUID=uuid)["LastProcessingResult"]

    assert last_result() == "No records processed"
    config = MappingConfig.from_api(lam.get_event_source_mapping(UUID=uuid))
    report_stream_invocation(config, BatchOutcome("error", None, "Unhandled"), 700.0)
    assert last_result() == "PROBLEM: Function call failed"
    report_stream_invocation(config, BatchOutcome("ok"), 2.5)
    assert last_result() == "OK"

    [result] = client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "age",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/Lambda",
                        "MetricName": "IteratorAge",
                        "Dimensions": [{"Name": "FunctionName", "Value": "consumer"}],
                    },
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=utcnow() - timedelta(minutes=1),
        EndTime=utcnow() + timedelta(minutes=1),
    )["MetricDataResults"]
    assert max(result["Values"]) == 700_000.0  # milliseconds
    assert function_arn.endswith(":function:consumer")
