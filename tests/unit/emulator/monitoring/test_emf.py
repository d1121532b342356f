"""EMF lines to CloudWatch metrics (emulator/monitoring/emf.py), as CloudWatch Logs extracts
them; what Powertools Metrics prints is the first case."""

import json

import pytest

from emulator.monitoring import emf

STAMP = 1796118880745


def line(root: dict) -> bytes:
    return json.dumps(root).encode() + b"\n"


def document(**root) -> dict:
    return {
        "_aws": {
            "Timestamp": STAMP,
            "CloudWatchMetrics": [
                {
                    "Namespace": "ContactCenter",
                    "Dimensions": [["service"]],
                    "Metrics": [{"Name": "GiftCardsIssued", "Unit": "Count"}],
                }
            ],
        },
        "service": "goodwill",
        "GiftCardsIssued": [1.0, 1.0],
        **root,
    }


def test_a_powertools_line_gives_its_metric_with_dimensions_unit_values_and_time():
    [extracted] = emf.extract(line(document()))
    assert extracted.namespace == "ContactCenter"
    [datum] = extracted.metric_data
    assert datum["MetricName"] == "GiftCardsIssued"
    assert datum["Dimensions"] == [{"Name": "service", "Value": "goodwill"}]
    assert datum["Values"] == [1.0, 1.0]
    assert datum["Unit"] == "Count"
    assert datum["Timestamp"].isoformat() == "2026-12-01T09:54:40.745000"


def test_every_dimension_set_gets_every_metric_and_a_single_value_counts():
    root = document(FilesProcessed=3, function_name="ingest-fn")
    root["_aws"]["CloudWatchMetrics"][0].update(
        Dimensions=[["service"], ["service", "function_name"], []],
        Metrics=[{"Name": "FilesProcessed", "StorageResolution": 1}],
    )
    [extracted] = emf.extract(line(root))
    assert [d["Dimensions"] for d in extracted.metric_data] == [
        [{"Name": "service", "Value": "goodwill"}],
        [
            {"Name": "service", "Value": "goodwill"},
            {"Name": "function_name", "Value": "ingest-fn"},
        ],
        [],
    ]
    assert {d["StorageResolution"] for d in extracted.metric_data} == {1}
    assert all(d["Values"] == [3] and "Unit" not in d for d in extracted.metric_data)


def test_lines_that_are_not_emf_give_nothing():
    assert emf.extract(b'{"level":"INFO","message":"file processed"}\n') == []
    assert emf.extract(b"START RequestId: 1 Version: $LATEST\n") == []
    assert emf.extract(line({"message": 'a value with "_aws" in it'})) == []


def invalid(change) -> dict:
    root = document()
    change(root)
    return root


@pytest.mark.parametrize(
    ("root", "problem"),
    [
        (invalid(lambda r: r["_aws"].pop("Timestamp")), "Timestamp"),
        (invalid(lambda r: r["_aws"].update(CloudWatchMetrics={})), "CloudWatchMetrics"),
        (invalid(lambda r: r["_aws"]["CloudWatchMetrics"][0].pop("Namespace")), "Namespace"),
        (invalid(lambda r: r.pop("service")), "dimension 'service'"),
        (invalid(lambda r: r.update(service=7)), "dimension 'service'"),
        (invalid(lambda r: r.pop("GiftCardsIssued")), "GiftCardsIssued"),
        (invalid(lambda r: r.update(GiftCardsIssued="1")), "GiftCardsIssued"),
        (invalid(lambda r: r.update(GiftCardsIssued=[1.0] * 101)), "GiftCardsIssued"),
        (
            invalid(lambda r: r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0].update(Unit="Pcs")),
            "unit",
        ),
        (
            invalid(
                lambda r: r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0].update(
                    StorageResolution=5
                )
            ),
            "StorageResolution",
        ),
        (
            invalid(
                lambda r: r["_aws"]["CloudWatchMetrics"][0].update(
                    Dimensions=[[f"d{i}" for i in range(31)]]
                )
            ),
            "at most 30",
        ),
    ],
)
def test_invalid_emf_gives_no_metric_and_counts_as_a_validation_error(root, problem):
    with pytest.raises(emf.InvalidEmf, match=problem) as raised:
        emf.extract(line(root))
    assert raised.value.metric == emf.VALIDATION_ERRORS


def test_an_emf_line_that_is_not_json_is_a_parsing_error():
    with pytest.raises(emf.InvalidEmf) as raised:
        emf.extract(b'{"_aws": {"Timestamp": 1, \n')
    assert raised.value.metric == emf.PARSING_ERRORS
