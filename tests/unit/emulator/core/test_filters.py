"""Conformance of emulator.core.filters with AWS Lambda event filtering, from the AWS documentation.

Sources (cited per group below):
- Lambda developer guide, "Lambda event filtering" / "Filter rule syntax" (comparison operator
  table), "Multi-level filtering", "Properly filtering Amazon SQS messages".
- Lambda developer guide, "Using event filtering with a DynamoDB event source" and
  "Using event filtering with an Amazon SQS event source".
- EventBridge user guide, "Content filtering in Amazon EventBridge event patterns" and
  "Arrays in Amazon EventBridge event patterns" (Lambda uses the same pattern language).
- The team's measured filter traps (typed DynamoDB values, numbers as strings) and
  tests/contract.py (the design's stream filters).
"""

import json

import pytest
from shared import rules  # the layer: tests/unit/conftest.py puts it on sys.path

from emulator.cli.filter_test import function_event_sources
from emulator.core.filters import (
    FilterCriteria,
    InvalidPatternError,
    compile_pattern,
    detect_source,
    record_view,
)
from harness import events
from harness.events import contact as contact_item
from tests.contract import STREAM_FILTERS
from tests.unit.emulator.support import ROOT


def matches(pattern, event, source=None) -> bool:
    return compile_pattern(pattern).matches(event, source)


# --------------------------------------------------------------------------------------------
# Lambda guide, "Filter rule syntax": the comparison operator table, one row per case.

RULE_SYNTAX = [
    # Null: "UserID": [ null ]
    ({"UserID": [None]}, {"UserID": None}, True),
    ({"UserID": [None]}, {"UserID": "u-1"}, False),
    ({"UserID": [None]}, {}, False),  # null is a value, not an absent key
    # Empty: "LastName": [""]
    ({"LastName": [""]}, {"LastName": ""}, True),
    ({"LastName": [""]}, {"LastName": "Doe"}, False),
    ({"LastName": [""]}, {"LastName": None}, False),
    # Equals: "Name": [ "Alice" ] (exact, case-sensitive)
    ({"Name": ["Alice"]}, {"Name": "Alice"}, True),
    ({"Name": ["Alice"]}, {"Name": "alice"}, False),
    ({"Name": ["Alice"]}, {"Name": "Alice "}, False),
    # Equals (ignore case): "Name": [ { "equals-ignore-case": "alice" } ]
    ({"Name": [{"equals-ignore-case": "alice"}]}, {"Name": "ALICE"}, True),
    ({"Name": [{"equals-ignore-case": "alice"}]}, {"Name": "Alicia"}, False),
    # And: "Location": [ "New York" ], "Day": ["Monday"]
    (
        {"Location": ["New York"], "Day": ["Monday"]},
        {"Location": "New York", "Day": "Monday"},
        True,
    ),
    (
        {"Location": ["New York"], "Day": ["Monday"]},
        {"Location": "New York", "Day": "Sunday"},
        False,
    ),
    ({"Location": ["New York"], "Day": ["Monday"]}, {"Location": "New York"}, False),
    # Or: "PaymentType": [ "Credit", "Debit"]
    ({"PaymentType": ["Credit", "Debit"]}, {"PaymentType": "Debit"}, True),
    ({"PaymentType": ["Credit", "Debit"]}, {"PaymentType": "Cash"}, False),
    # Or (multiple fields): "$or": [ { "Location": [ "New York" ] }, { "Day": [ "Monday" ] } ]
    ({"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}, {"Day": "Monday"}, True),
    ({"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}, {"Location": "New York"}, True),
    ({"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}, {"Location": "Paris"}, False),
    # Not: "Weather": [ { "anything-but": [ "Raining" ] } ]
    ({"Weather": [{"anything-but": ["Raining"]}]}, {"Weather": "Sunny"}, True),
    ({"Weather": [{"anything-but": ["Raining"]}]}, {"Weather": "Raining"}, False),
    ({"Weather": [{"anything-but": ["Raining"]}]}, {}, False),  # the key must still be there
    # Numeric (equals): "Price": [ { "numeric": [ "=", 100 ] } ]
    ({"Price": [{"numeric": ["=", 100]}]}, {"Price": 100}, True),
    ({"Price": [{"numeric": ["=", 100]}]}, {"Price": 100.0}, True),
    ({"Price": [{"numeric": ["=", 100]}]}, {"Price": "100"}, False),
    # Numeric (range): "Price": [ { "numeric": [ ">", 10, "<=", 20 ] } ]
    ({"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 20}, True),
    ({"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 10.5}, True),
    ({"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 10}, False),
    ({"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 20.01}, False),
    # Exists: "ProductName": [ { "exists": true } ]
    ({"ProductName": [{"exists": True}]}, {"ProductName": "Widget"}, True),
    ({"ProductName": [{"exists": True}]}, {"Other": 1}, False),
    # Does not exist: "ProductName": [ { "exists": false } ]
    ({"ProductName": [{"exists": False}]}, {"Other": 1}, True),
    ({"ProductName": [{"exists": False}]}, {"ProductName": "Widget"}, False),
    # Begins with: "Region": [ {"prefix": "us-" } ]
    ({"Region": [{"prefix": "us-"}]}, {"Region": "us-east-1"}, True),
    ({"Region": [{"prefix": "us-"}]}, {"Region": "eu-west-1"}, False),
    # Ends with: "FileName": [ { "suffix": ".png" } ]
    ({"FileName": [{"suffix": ".png"}]}, {"FileName": "cat.png"}, True),
    ({"FileName": [{"suffix": ".png"}]}, {"FileName": "cat.PNG"}, False),
]


@pytest.mark.parametrize(("pattern", "event", "expected"), RULE_SYNTAX)
def test_filter_rule_syntax_table(pattern, event, expected):
    assert matches(pattern, event) is expected


def test_numbers_compare_by_their_json_text_in_exact_matches():
    # Lambda guide, "Filter rule syntax" note: 300, 300.0 and 3.0e2 are not considered equal.
    assert matches({"n": [300]}, {"n": 300})
    assert not matches({"n": [300]}, {"n": 300.0})
    assert not matches({"n": [300]}, {"n": "300"})  # a string is never a number
    assert matches({"n": [{"numeric": ["=", 300]}]}, {"n": 300.0})  # numeric compares values


def test_values_are_typed_booleans_null_and_strings_do_not_mix():
    assert matches({"b": [True]}, {"b": True})
    assert not matches({"b": [True]}, {"b": "true"})
    assert not matches({"b": [True]}, {"b": 1})
    assert not matches({"b": [1]}, {"b": True})
    assert not matches({"b": ["null"]}, {"b": None})
    assert not matches({"n": [{"numeric": [">", 0]}]}, {"n": True})


def test_fields_not_in_the_pattern_are_ignored():
    # Lambda guide, "Event filtering basics": Lambda ignores the fields that aren't in a filter.
    assert matches({"a": ["x"]}, {"a": "x", "b": "y", "c": {"d": 1}})


# --------------------------------------------------------------------------------------------
# EventBridge guide, "Content filtering in Amazon EventBridge event patterns".


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        # Prefix matching: "time": [ { "prefix": "2017-10-02" } ]
        ({"prefix": "2017-10-02"}, "2017-10-02T18:43:48Z", True),
        ({"prefix": "2017-10-02"}, "2017-10-03T18:43:48Z", False),
        ({"prefix": "2017"}, 2017, False),  # prefix is for strings
        # Prefix matching while ignoring case: {"prefix": {"equals-ignore-case": "EventB"}}
        ({"prefix": {"equals-ignore-case": "EventB"}}, "eventbridge", True),
        ({"prefix": {"equals-ignore-case": "EventB"}}, "Events", False),
        # Suffix matching / ignoring case
        ({"suffix": ".png"}, "image.png", True),
        ({"suffix": {"equals-ignore-case": ".png"}}, "image.PNG", True),
        ({"suffix": {"equals-ignore-case": ".png"}}, "image.jpg", False),
        # Anything-but: a string, a number, a list of strings, a list of numbers
        ({"anything-but": "initializing"}, "running", True),
        ({"anything-but": "initializing"}, "initializing", False),
        ({"anything-but": 123}, 456, True),
        ({"anything-but": 123}, 123, False),
        ({"anything-but": ["stopped", "overloaded"]}, "running", True),
        ({"anything-but": ["stopped", "overloaded"]}, "stopped", False),
        ({"anything-but": [100, 200, 300]}, 200, False),
        ({"anything-but": [100, 200, 300]}, 250, True),
        # Anything-but prefix / suffix / ignore case
        ({"anything-but": {"prefix": "init"}}, "running", True),
        ({"anything-but": {"prefix": "init"}}, "initializing", False),
        ({"anything-but": {"suffix": ".txt"}}, "notes.md", True),
        ({"anything-but": {"suffix": ".txt"}}, "notes.txt", False),
        ({"anything-but": {"equals-ignore-case": ["Stopped", "OverLoaded"]}}, "STOPPED", False),
        ({"anything-but": {"equals-ignore-case": ["Stopped", "OverLoaded"]}}, "running", True),
        ({"anything-but": {"equals-ignore-case": "stopped"}}, "Stopped", False),
        # Numeric matching: lower bound then upper bound, each open or closed
        ({"numeric": [">", 0, "<=", 5]}, 5, True),
        ({"numeric": [">", 0, "<=", 5]}, 0, False),
        ({"numeric": [">=", 0, "<", 5]}, 0, True),
        ({"numeric": [">=", 0, "<", 5]}, 5, False),
        ({"numeric": ["<", 10]}, -3.5, True),
        ({"numeric": ["<=", 10]}, 10, True),
        ({"numeric": [">", 1e9]}, 1.5e9, True),
        ({"numeric": ["=", 3.018e2]}, 301.8, True),
        # Exists matching also works on null values (the key is there)
        ({"exists": True}, None, True),
    ],
)
def test_eventbridge_content_filtering_operators(rule, value, expected):
    assert matches({"detail": {"field": [rule]}}, {"detail": {"field": value}}) is expected


def test_or_combines_with_and_fields_at_the_same_level():
    # EventBridge guide, "Content filtering": $or matching (example with c-count / d-count /
    # x-limit under "detail").
    pattern = {
        "detail": {
            "$or": [
                {"c-count": [{"numeric": [">", 0, "<=", 5]}]},
                {"d-count": [{"numeric": ["<", 10]}]},
                {"x-limit": [{"anything-but": [100, 200, 300]}]},
            ]
        }
    }
    assert matches(pattern, {"detail": {"c-count": 3}})
    assert matches(pattern, {"detail": {"d-count": 9}})
    assert matches(pattern, {"detail": {"x-limit": 301}})
    assert not matches(pattern, {"detail": {"c-count": 6, "x-limit": 100}})
    assert not matches(pattern, {"detail": {}})

    # "source" AND (metricName OR (metricType AND namespace))
    pattern = {
        "source": ["aws.cloudwatch"],
        "$or": [
            {"metricName": ["CPUUtilization", "ReadLatency"]},
            {"metricType": ["MetricType"], "namespace": ["AWS/EC2", "AWS/ES"]},
        ],
    }
    assert matches(pattern, {"source": "aws.cloudwatch", "metricName": "ReadLatency"})
    assert matches(
        pattern, {"source": "aws.cloudwatch", "metricType": "MetricType", "namespace": "AWS/ES"}
    )
    assert not matches(pattern, {"source": "aws.cloudwatch", "metricType": "MetricType"})
    assert not matches(pattern, {"source": "aws.ec2", "metricName": "ReadLatency"})


def test_nested_or_inside_an_or_branch():
    pattern = {"$or": [{"a": ["1"]}, {"$or": [{"b": ["2"]}, {"c": ["3"]}]}]}
    assert matches(pattern, {"c": "3"})
    assert not matches(pattern, {"d": "4"})


# --------------------------------------------------------------------------------------------
# EventBridge guide, "Arrays in Amazon EventBridge event patterns": a pattern list is an OR; an
# event array matches if any of its elements matches.


def test_event_arrays_match_when_any_element_matches():
    pattern = {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]}
    event = {
        "resources": [
            "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f",
            "arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f",
        ]
    }
    assert matches(pattern, event)
    assert not matches(pattern, {"resources": ["arn:aws:ec2:us-east-1:1:instance/i-0"]})
    assert matches({"tags": [{"prefix": "team-"}]}, {"tags": ["env-prod", "team-a"]})
    assert matches({"n": [{"numeric": [">", 5]}]}, {"n": [1, [2, 9]]})  # nested arrays flatten


def test_empty_event_array_counts_as_absent():
    assert not matches({"tags": [{"exists": True}]}, {"tags": []})
    assert matches({"tags": [{"exists": False}]}, {"tags": []})


def test_arrays_of_objects_match_element_by_element():
    pattern = {"items": {"sku": ["A"], "qty": [{"numeric": [">", 1]}]}}
    assert matches(pattern, {"items": [{"sku": "B", "qty": 5}, {"sku": "A", "qty": 2}]})
    # sku A and qty > 1 exist, but not in the same element
    assert not matches(pattern, {"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 5}]})


def test_anything_but_on_an_array_matches_when_some_element_is_not_excluded():
    assert matches({"s": [{"anything-but": ["a"]}]}, {"s": ["a", "b"]})
    assert not matches({"s": [{"anything-but": ["a"]}]}, {"s": ["a", "a"]})


# --------------------------------------------------------------------------------------------
# Lambda guide, "Multi-level filtering" and "Using event filtering with a DynamoDB event source".

DDB_RECORD = {
    "eventID": "1",
    "eventName": "INSERT",
    "eventVersion": "1.1",
    "eventSource": "aws:dynamodb",
    "awsRegion": "us-east-1",
    "dynamodb": {
        "ApproximateCreationDateTime": 1678831218.0,
        "Keys": {"CustomerName": {"S": "AnyCompany Industries"}, "Id": {"N": "101"}},
        "NewImage": {
            "AccountManager": {"S": "Pat Candella"},
            "PaymentTerms": {"S": "60 days"},
            "CustomerName": {"S": "AnyCompany Industries"},
            "Id": {"N": "101"},
            "Active": {"BOOL": True},
            "Organizations": {"L": [{"S": "Sales"}, {"S": "Marketing"}, {"S": "Support"}]},
        },
        "SequenceNumber": "111",
        "SizeBytes": 26,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    },
    "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-11-29T00:00:00",
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # Multi-level filtering: Keys.Id.N is "101" (a string: N values are JSON strings)
        ({"dynamodb": {"Keys": {"Id": {"N": ["101"]}}}}, True),
        ({"dynamodb": {"Keys": {"Id": {"N": [101]}}}}, False),
        # Filtering with table keys
        ({"dynamodb": {"Keys": {"CustomerName": {"S": ["AnyCompany Industries"]}}}}, True),
        # Filtering with table attributes
        ({"dynamodb": {"NewImage": {"AccountManager": {"S": ["Pat Candella"]}}}}, True),
        ({"dynamodb": {"NewImage": {"PaymentTerms": {"S": [{"prefix": "30"}]}}}}, False),
        # Filtering with Boolean expressions
        ({"dynamodb": {"NewImage": {"Active": {"BOOL": [True]}}}}, True),
        ({"dynamodb": {"NewImage": {"Active": {"BOOL": [False]}}}}, False),
        # Using the Exists operator: only on leaf nodes
        ({"dynamodb": {"NewImage": {"Organizations": {"L": {"S": [{"exists": True}]}}}}}, True),
        ({"dynamodb": {"NewImage": {"Organizations": [{"exists": True}]}}}, False),
        ({"dynamodb": {"NewImage": {"Organizations": {"L": {"S": ["Support"]}}}}}, True),
        # eventName is a metadata property next to the dynamodb data property
        ({"eventName": ["INSERT"], "dynamodb": {"Keys": {"Id": {"N": ["101"]}}}}, True),
        ({"eventName": ["MODIFY"], "dynamodb": {"Keys": {"Id": {"N": ["101"]}}}}, False),
    ],
)
def test_dynamodb_guide_examples(pattern, expected):
    assert matches(pattern, DDB_RECORD) is expected


# Known trap: values are typed as the stream sends them.
def test_typed_dynamodb_values_match_only_through_their_type_key():
    assert matches(
        {"dynamodb": {"Keys": {"CustomerName": {"S": ["AnyCompany Industries"]}}}}, DDB_RECORD
    )
    assert not matches(
        {"dynamodb": {"Keys": {"CustomerName": ["AnyCompany Industries"]}}}, DDB_RECORD
    )


# Known trap: exists works only on the typed leaf.
def test_exists_only_sees_the_typed_leaf():
    new_image = {"dynamodb": {"NewImage": {}}}
    new_image["dynamodb"]["NewImage"]["AccountManager"] = {"S": [{"exists": True}]}
    assert matches(new_image, DDB_RECORD)
    assert not matches(
        {"dynamodb": {"NewImage": {"AccountManager": [{"exists": True}]}}}, DDB_RECORD
    )
    # The trap the other way: exists:false on the attribute (an object, not a leaf) passes
    # even though the attribute is there; only {"S": [{"exists": false}]} says "absent".
    assert matches({"dynamodb": {"NewImage": {"AccountManager": [{"exists": False}]}}}, DDB_RECORD)
    assert not matches(
        {"dynamodb": {"NewImage": {"AccountManager": {"S": [{"exists": False}]}}}}, DDB_RECORD
    )
    assert matches({"dynamodb": {"NewImage": {"email": {"S": [{"exists": False}]}}}}, DDB_RECORD)


# Known trap: numeric never matches an N value, but matches ApproximateCreationDateTime.
def test_numeric_never_matches_dynamodb_numbers_but_matches_json_numbers():
    assert not matches(
        {"dynamodb": {"NewImage": {"Id": {"N": [{"numeric": [">", 100]}]}}}}, DDB_RECORD
    )
    assert not matches(
        {"dynamodb": {"NewImage": {"Id": {"N": [{"numeric": ["=", 101]}]}}}}, DDB_RECORD
    )
    assert matches(
        {"dynamodb": {"ApproximateCreationDateTime": [{"numeric": [">", 1.6e9]}]}}, DDB_RECORD
    )
    assert matches({"dynamodb": {"SizeBytes": [{"numeric": ["<", 1024]}]}}, DDB_RECORD)


def test_dynamodb_records_are_matched_as_sent():
    assert detect_source(DDB_RECORD) == "dynamodb"
    assert record_view(DDB_RECORD) == DDB_RECORD


# --------------------------------------------------------------------------------------------
# Lambda guide, "Using event filtering with an Amazon SQS event source" and "Properly filtering
# Amazon SQS messages" (the body-format table).


def sqs_record(body: str) -> dict:
    message = {"MessageId": "059f36b4-87a3-44ab-83d2-661975830a7d", "Body": body}
    return events.sqs_record(message, "arn:aws:sqs:us-west-2:123456789012:my-queue")


JSON_BODY = sqs_record(
    json.dumps({"RecordNumber": 1234, "TimeStamp": "yyyy-mm-ddThh:mm:ss", "RequestCode": "AAAA"})
)
PLAIN_BODY = sqs_record("RecordNumber 1234, RequestCode AAAA")


def test_sqs_json_body_is_matched_as_parsed_json():
    assert matches({"body": {"RequestCode": ["AAAA"]}}, JSON_BODY)
    assert not matches({"body": {"RequestCode": ["BBBB"]}}, JSON_BODY)
    # Known trap: numeric matches numbers in a JSON SQS body
    assert matches({"body": {"RecordNumber": [{"numeric": [">", 1000]}]}}, JSON_BODY)
    assert not matches({"body": {"RecordNumber": [{"numeric": [">", 9999]}]}}, JSON_BODY)
    assert record_view(JSON_BODY)["body"]["RecordNumber"] == 1234
    assert JSON_BODY["body"].startswith("{")  # the record itself is left alone


def test_sqs_plain_text_body_never_matches_a_json_body_pattern():
    # Known trap, and the table: plain string body + JSON pattern -> Lambda drops the message
    assert not matches({"body": {"RequestCode": ["AAAA"]}}, PLAIN_BODY)
    assert not matches({"body": {"RequestCode": [{"exists": False}]}}, PLAIN_BODY)
    assert record_view(PLAIN_BODY)["body"] == PLAIN_BODY["body"]


def test_sqs_plain_text_body_with_plain_string_pattern_is_filtered():
    # Table: plain string body + plain string pattern -> filters based on the criteria
    assert matches({"body": [{"prefix": "RecordNumber"}]}, PLAIN_BODY)
    assert not matches({"body": ["something else"]}, PLAIN_BODY)


def test_sqs_json_body_never_matches_a_plain_string_pattern():
    # Table: valid JSON body + plain string pattern -> Lambda drops the message
    assert not matches({"body": [{"prefix": "{"}]}, JSON_BODY)
    assert not matches({"body": [{"exists": False}]}, JSON_BODY)


def test_sqs_filters_without_body_skip_the_format_check():
    assert matches({"eventSource": ["aws:sqs"]}, PLAIN_BODY)
    assert matches({"attributes": {"ApproximateReceiveCount": ["1"]}}, JSON_BODY)


def test_sqs_source_can_be_given_for_records_without_event_source():
    bare = {"body": json.dumps({"kind": "SURVEY"})}
    assert not matches({"body": {"kind": ["SURVEY"]}}, bare)  # a string, not an object
    assert matches({"body": {"kind": ["SURVEY"]}}, bare, source="sqs")
    with pytest.raises(ValueError, match="unknown event source"):
        record_view(bare, "kafka")


# --------------------------------------------------------------------------------------------
# Lambda guide, "Lambda event filtering": up to five filters; an event satisfying any one is
# sent, otherwise discarded. An empty FilterCriteria removes filtering.


def test_multiple_filters_are_ored():
    criteria = FilterCriteria.from_mapping(
        {
            "Filters": [
                {"Pattern": json.dumps({"body": {"RequestCode": ["BBBB"]}})},
                {"Pattern": json.dumps({"body": {"RecordNumber": [{"numeric": [">", 1000]}]}})},
            ]
        }
    )
    assert len(criteria) == 2
    assert criteria.matches(JSON_BODY)  # second filter
    assert not criteria.matches(sqs_record(json.dumps({"RequestCode": "CCCC", "RecordNumber": 1})))


@pytest.mark.parametrize("criteria", [None, {}, {"Filters": []}])
def test_no_filters_match_everything(criteria):
    assert FilterCriteria.from_mapping(criteria).matches(PLAIN_BODY)
    assert FilterCriteria.from_mapping(criteria).matches(DDB_RECORD)


def test_pattern_may_be_a_mapping_as_in_a_yaml_template():
    criteria = FilterCriteria.from_mapping({"Filters": [{"Pattern": {"eventName": ["INSERT"]}}]})
    assert criteria.matches(DDB_RECORD)
    assert criteria.patterns[0].document == {"eventName": ["INSERT"]}


# --------------------------------------------------------------------------------------------
# Invalid patterns: Lambda rejects them when the mapping is created or updated ("Properly
# filtering Kinesis and DynamoDB messages"); the error says what and where.


@pytest.mark.parametrize(
    ("pattern", "where", "what"),
    [
        ("{not json", "$", "not valid JSON"),
        ('["INSERT"]', "$", "must be a JSON object"),
        ("{}", "$", "empty objects"),
        ({"eventName": "INSERT"}, "$.eventName", 'write ["INSERT"]'),
        (
            {"dynamodb": {"NewImage": {"type": {"S": "CONTACT"}}}},
            "$.dynamodb.NewImage.type.S",
            "lists",
        ),
        ({"a": 5}, "$.a", "leaf values must be lists"),
        ({"a": {}}, "$.a", "empty objects"),
        ({"a": []}, "$.a", "empty lists"),
        ({"a": [["x"]]}, "$.a[0]", "nested lists"),
        ({"a": [{"contains": "x"}]}, "$.a[0]", "unknown operator 'contains'"),
        ({"a": [{"wildcard": "x*"}]}, "$.a[0]", "not supported by Lambda"),
        ({"a": [{"prefix": "x", "suffix": "y"}]}, "$.a[0]", "exactly one operator"),
        ({"a": [{"prefix": 5}]}, "$.a[0].prefix", "must be a string"),
        ({"a": [{"exists": "yes"}]}, "$.a[0]", "exists takes true or false"),
        ({"a": [{"numeric": [">", "5"]}]}, "$.a[0].numeric[1]", "needs a number"),
        ({"a": [{"numeric": ["!=", 5]}]}, "$.a[0].numeric[0]", "unknown numeric operator"),
        ({"a": [{"numeric": [">", 5, ">", 3]}]}, "$.a[0].numeric", "lower bound"),
        ({"a": [{"numeric": [">", 5, "<", 3]}]}, "$.a[0].numeric", "empty range"),
        ({"a": [{"numeric": [">", 5, "<"]}]}, "$.a[0].numeric", "takes [op, number]"),
        ({"a": [{"numeric": 5}]}, "$.a[0].numeric", "takes [op, number]"),
        ({"a": [{"numeric": [">", True]}]}, "$.a[0].numeric[1]", "needs a number"),
        ({"a": [{"anything-but": []}]}, "$.a[0].anything-but", "empty lists"),
        ({"a": [{"anything-but": ["x", 1]}]}, "$.a[0].anything-but", "only strings or only"),
        ({"a": [{"anything-but": True}]}, "$.a[0].anything-but", "only strings or only"),
        ({"a": [{"anything-but": {"prefix": ""}}]}, "$.a[0].anything-but.prefix", "not be empty"),
        ({"a": [{"anything-but": {"wildcard": "x"}}]}, "$.a[0].anything-but", "one of prefix"),
        ({"$or": [{"a": ["x"]}]}, "$.$or", "at least 2"),
        ({"$or": {"a": ["x"]}}, "$.$or", "at least 2"),
        ({"$or": [{"a": ["x"]}, "b"]}, "$.$or[1]", "must be objects"),
    ],
)
def test_invalid_patterns_say_what_and_where(pattern, where, what):
    with pytest.raises(InvalidPatternError) as raised:
        compile_pattern(pattern)
    assert raised.value.path == where
    assert what in str(raised.value)
    assert where in str(raised.value)


def test_pattern_nesting_and_length_limits():
    deep: dict = {"leaf": ["x"]}
    for _ in range(40):
        deep = {"n": deep}
    with pytest.raises(InvalidPatternError, match="nesting deeper"):
        compile_pattern(deep)
    with pytest.raises(InvalidPatternError, match="limit is 4096"):
        compile_pattern(json.dumps({"a": ["x" * 5000]}))


def test_filter_criteria_errors_name_the_filter():
    with pytest.raises(InvalidPatternError) as raised:
        FilterCriteria.from_mapping(
            {"Filters": [{"Pattern": '{"a": ["x"]}'}, {"Pattern": '{"b": "y"}'}]}
        )
    assert raised.value.path == "FilterCriteria.Filters[1].Pattern.b"
    with pytest.raises(InvalidPatternError, match="Pattern"):
        FilterCriteria.from_mapping({"Filters": [{"pattern": "{}"}]})
    with pytest.raises(InvalidPatternError, match="must be a list"):
        FilterCriteria.from_mapping({"Filters": {"Pattern": "{}"}})


# --------------------------------------------------------------------------------------------
# The design's stream filters (tests/contract.py): each stream consumer admits exactly its
# records. The patterns come from the real template.yaml and must equal the contract.

CONTRACT_PATTERNS = STREAM_FILTERS
CONSUMERS = tuple(CONTRACT_PATTERNS)
TEMPLATE = ROOT / "template.yaml"


def consumer_criteria() -> dict[str, FilterCriteria]:
    criteria = {}
    for name in CONSUMERS:
        streams = [s for s in function_event_sources(TEMPLATE, name) if s.source == "dynamodb"]
        assert len(streams) == 1, f"{name} should have one stream event source"
        criteria[name] = streams[0].criteria
    return criteria


def test_template_stream_filters_equal_the_contract():
    for name, criteria in consumer_criteria().items():
        assert [p.document for p in criteria.patterns] == CONTRACT_PATTERNS[name], name


def typed(item: dict) -> dict:
    """A DynamoDB item as a stream record carries it (AttributeValue JSON)."""
    out = {}
    for key, value in item.items():
        if isinstance(value, bool):
            out[key] = {"BOOL": value}
        elif isinstance(value, int | float):
            out[key] = {"N": str(value)}
        else:
            out[key] = {"S": value}
    return out


def stream_record(event_name: str, new: dict | None, old: dict | None = None) -> dict:
    image = new or old
    dynamodb = {
        "ApproximateCreationDateTime": 1764410400.0,
        "Keys": typed({"pk": image["pk"], "sk": image["sk"]}),
        "SequenceNumber": "4421584500000000017450439091",
        "SizeBytes": 412,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        dynamodb["NewImage"] = typed(new)
    if old is not None:
        dynamodb["OldImage"] = typed(old)
    return {
        "eventID": "c4ca4238a0b923820dcc509a6f75849b",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": (
            "arn:aws:dynamodb:us-east-1:123456789012:table/contacts/stream/2026-11-29T00:00:00.000"
        ),
    }


def contact(**overrides) -> dict:
    """A CONTACT item of one caller; None removes an attribute."""
    fields = {"queue": "support", "email": "caller@example.com", "survey_opt_in": True}
    return contact_item(contact_id="c-1", caller="+15550100", **(fields | overrides))


RESOLVED_ALL = contact()
CASES = [
    # (case, record, consumers that must receive it)
    (
        "resolved, agent, opted in, email",
        stream_record("INSERT", RESOLVED_ALL),
        {"LastAgentFunction", "SurveyFunction"},
    ),
    (
        "abandoned before an agent",
        stream_record("INSERT", contact(agent_id=None, disposition="ABANDONED")),
        {"GoodwillFunction"},
    ),
    (
        "abandoned with an agent",
        stream_record("INSERT", contact(disposition="ABANDONED")),
        {"GoodwillFunction"},
    ),
    (
        "escalated after a long wait",
        stream_record("INSERT", contact(disposition="ESCALATED", wait_seconds=900, long_wait=True)),
        {"LastAgentFunction", "GoodwillFunction"},
    ),
    (
        "resolved after a long wait",
        stream_record("INSERT", contact(wait_seconds=600, long_wait=True)),
        {"LastAgentFunction", "SurveyFunction", "GoodwillFunction"},
    ),
    ("resolved, no email", stream_record("INSERT", contact(email=None)), {"LastAgentFunction"}),
    (
        "resolved, not opted in",
        stream_record("INSERT", contact(survey_opt_in=False)),
        {"LastAgentFunction"},
    ),
    (
        "transferred, no agent, no queue",
        stream_record("INSERT", contact(agent_id=None, queue=None, disposition="TRANSFERRED")),
        set(),
    ),
    # A corrected export: what it writes is acted on as new; the last agent also sees what it
    # replaced or removed.
    (
        "MODIFY of a contact",
        stream_record("MODIFY", contact(first_export=False), RESOLVED_ALL),
        {"LastAgentFunction"},
    ),
    (
        "a correction under a new sort key",
        stream_record("INSERT", contact(first_export=False, disposition="ABANDONED")),
        set(),
    ),
    ("REMOVE of a contact", stream_record("REMOVE", None, RESOLVED_ALL), {"LastAgentFunction"}),
    (
        "LAST_AGENT item",
        stream_record(
            "INSERT",
            {
                "pk": "CALLER#+15550100",
                "sk": "LAST_AGENT",
                "type": "LAST_AGENT",
                "agent_id": "agent-7",
                "contact_id": "c-1",
                "ended_at": "2026-11-29T10:05:00.000Z",
            },
        ),
        set(),
    ),
    (
        "LAST_AGENT update",
        stream_record(
            "MODIFY",
            {
                "pk": "CALLER#+15550100",
                "sk": "LAST_AGENT",
                "type": "LAST_AGENT",
                "agent_id": "agent-8",
                "contact_id": "c-2",
                "ended_at": "2026-11-29T11:00:00.000Z",
            },
        ),
        set(),
    ),
    (
        "GIFT_CARD item",
        stream_record(
            "INSERT",
            {
                "pk": "GIFT_CARD#c-1",
                "sk": "GIFT_CARD",
                "type": "GIFT_CARD",
                "contact_id": "c-1",
                "caller": "+15550100",
                "gift_card_id": "GC-1",
                "amount": 10,
                "disposition": "ABANDONED",
                "long_wait": True,
            },
        ),
        set(),
    ),
    (
        "PROCESSING_LOG item",
        stream_record(
            "INSERT",
            {
                "pk": "FILE#contacts-bucket/in/day.jsonl#v1",
                "sk": "PROCESSING_LOG",
                "type": "PROCESSING_LOG",
                "bucket": "contacts-bucket",
                "key": "in/day.jsonl",
                "version": "v1",
                "outcome": "PROCESSED",
                "rows_ok": 3,
                "rows_rejected": 0,
                "report_key": "reports/day.json",
            },
        ),
        set(),
    ),
]


@pytest.mark.parametrize(("case", "record", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_stream_consumer_admits_exactly_its_records(case, record, expected):
    criteria = consumer_criteria()
    router = criteria.pop("RouterFunction")  # FanOut=router: every contact change
    admitted = {name for name in criteria if criteria[name].matches(record)}
    assert admitted == expected, case
    images = (record["dynamodb"].get(image, {}) for image in ("NewImage", "OldImage"))
    assert router.matches(record) == any(i.get("type") == {"S": "CONTACT"} for i in images), case


@pytest.mark.parametrize(("case", "record", "expected"), CASES[:8], ids=[c[0] for c in CASES[:8]])
def test_stream_filters_agree_with_the_domain_rules(case, record, expected):
    image = {k: next(iter(v.values())) for k, v in record["dynamodb"]["NewImage"].items()}
    image["wait_seconds"] = int(image["wait_seconds"])
    assert ("LastAgentFunction" in expected) == rules.sets_last_agent(image), case
    assert ("SurveyFunction" in expected) == rules.survey_due(image), case
    assert ("GoodwillFunction" in expected) == rules.gift_card_due(image, 600), case
