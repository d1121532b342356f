"""A mapping's outcomes (emulator/delivery/mappings.py): Lambda's success and failure
conditions of an invocation's response, with and without ReportBatchItemFailures."""

import pytest

from emulator.delivery.mappings import read_outcome
from emulator.lambda_.workers import InvokeResult
from tests.unit.emulator.delivery.support import failures


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (None, "ok"),
        ({}, "ok"),
        ({"statusCode": 200}, "ok"),
        ({"batchItemFailures": None}, "ok"),
        ({"batchItemFailures": []}, "ok"),
        (failures("a"), "partial"),
        (failures("a", "b", "a"), "partial"),
        ({"batchItemFailures": "a"}, "malformed"),
        ({"batchItemFailures": {"itemIdentifier": "a"}}, "malformed"),
        (failures(""), "malformed"),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, "malformed"),
        ({"batchItemFailures": [{"id": "a"}]}, "malformed"),
        ({"batchItemFailures": ["a"]}, "malformed"),
        (failures("a", "zz"), "malformed"),
        ("a string", "malformed"),
        ([failures("a")], "malformed"),
    ],
)
def test_partial_batch_response_conditions(payload, kind):
    outcome = read_outcome(InvokeResult(True, payload, None), ["a", "b", "c"], True)
    assert outcome.kind == kind
    if kind == "partial":
        assert outcome.failed == {i["itemIdentifier"] for i in payload["batchItemFailures"]}
    if kind == "malformed":
        assert outcome.failed is None  # the whole batch


def test_without_report_batch_item_failures_any_response_is_success():
    assert read_outcome(InvokeResult(True, failures("a"), None), ["a"], False).kind == "ok"
    assert read_outcome(InvokeResult(True, "junk", None), ["a"], False).kind == "ok"
    error = read_outcome(InvokeResult(False, None, {"errorType": "X"}), ["a"], False)
    assert error.kind == "error"
    assert error.failed is None
