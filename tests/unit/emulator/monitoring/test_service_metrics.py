"""The services' metrics on the local stack (emulator/monitoring/service_metrics.py), read back
through CloudWatch's own API (GetMetricData), moto in process."""

from datetime import timedelta
from pathlib import Path

import pytest
from moto.core.utils import utcnow

from emulator.lambda_.workers import FunctionSpec, InvokeResult
from emulator.monitoring.service_metrics import ServiceMetrics
from emulator.process import ACCOUNT, REGION
from tests.unit.emulator.support import client, new_queue

pytestmark = pytest.mark.usefixtures("moto_patched")

SPEC = FunctionSpec("GoodwillFunction", "stack-GoodwillFunction-X1", "app.handler", Path("."))


def sums(namespace: str, metric: str, dimensions: list[dict]) -> float:
    """The metric's Sum over the last five minutes, as a dashboard asks for it."""
    [result] = client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {
                        "Namespace": namespace,
                        "MetricName": metric,
                        "Dimensions": dimensions,
                    },
                    "Period": 300,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=utcnow() - timedelta(minutes=5),
        EndTime=utcnow() + timedelta(minutes=1),
    )["MetricDataResults"]
    return sum(result["Values"])


def test_a_functions_emf_line_becomes_its_metric(moto_in_process):
    metrics = ServiceMetrics(ACCOUNT, REGION)
    stamp = int(utcnow().timestamp() * 1000)
    metrics.logged(
        SPEC,
        b'{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"ContactCenter",'
        b'"Dimensions":[["service"]],"Metrics":[{"Name":"GiftCardsIssued","Unit":"Count"}]}]},'
        b'"service":"goodwill","GiftCardsIssued":[1.0,1.0]}\n' % stamp,
    )
    metrics.logged(SPEC, b'{"level":"INFO","message":"card issued"}\n')
    service = [{"Name": "service", "Value": "goodwill"}]
    assert sums("ContactCenter", "GiftCardsIssued", service) == 2.0


def test_invalid_emf_counts_as_a_validation_error_of_the_log_group(moto_in_process):
    metrics = ServiceMetrics(ACCOUNT, REGION)
    metrics.logged(SPEC, b'{"_aws":{"CloudWatchMetrics":[]},"GiftCardsIssued":1}\n')
    group = [{"Name": "LogGroup", "Value": "/aws/lambda/stack-GoodwillFunction-X1"}]
    assert sums("AWS/Logs", "EMFValidationErrors", group) == 1.0
    assert sums("ContactCenter", "GiftCardsIssued", []) == 0.0


def test_each_invocation_counts_in_invocations_and_a_failed_one_in_errors(moto_in_process):
    metrics = ServiceMetrics(ACCOUNT, REGION)
    metrics.invoked(SPEC, InvokeResult(True, None, None, duration_ms=12.0))
    metrics.invoked(SPEC, InvokeResult(False, None, {"errorType": "Sandbox.Timedout"}))
    function = [{"Name": "FunctionName", "Value": SPEC.function_name}]
    assert sums("AWS/Lambda", "Invocations", function) == 2.0
    assert sums("AWS/Lambda", "Errors", function) == 1.0
    assert sums("AWS/Lambda", "Duration", function) == 12.0


def test_a_delivery_sns_cannot_make_counts_in_the_topics_failed_notifications(moto_in_process):
    sns, sqs = client("sns"), client("sqs")
    topic_arn = sns.create_topic(Name="changes")["TopicArn"]
    url, arn = new_queue(sqs, "gone")
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
    sqs.delete_queue(QueueUrl=url)  # a client-side failure: no retry, no RedrivePolicy: dropped
    sns.publish(TopicArn=topic_arn, Message="a change")
    topic = [{"Name": "TopicName", "Value": "changes"}]
    assert sums("AWS/SNS", "NumberOfNotificationsFailed", topic) == 1.0
