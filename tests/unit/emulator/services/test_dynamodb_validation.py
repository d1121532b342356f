"""DynamoDB's validation where moto 5.2.6 accepted what DynamoDB refuses
(emulator/services/dynamodb_validation.py), moto in process through boto3. The cases are the
documented rules: naming rules and data types
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html),
the service quotas (.../developerguide/ServiceQuotas.html: 25 batch writes, 4 MB and 100 actions
per transaction), TransactWriteItems' ClientRequestToken
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html),
expressions never mixed with legacy parameters
(.../developerguide/LegacyConditionalParameters.html).
"""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.process import REGION
from tests.unit.emulator.support import client, fake_credentials, pk_table

pytestmark = pytest.mark.usefixtures("moto_patched")
TABLE = "contacts"


@pytest.fixture
def ddb(monkeypatch):
    fake_credentials(monkeypatch)
    with mock_aws():
        ddb = client("dynamodb")
        ddb.create_table(**pk_table(TABLE))
        yield ddb


def refused(call, *args, code: str = "ValidationException", **kwargs) -> str:
    """The message of the ClientError ``call`` raises, checked to carry ``code``."""
    with pytest.raises(ClientError) as error:
        call(*args, **kwargs)
    assert error.value.response["Error"]["Code"] == code
    return error.value.response["Error"]["Message"]


def items(ddb) -> list[dict]:
    return ddb.scan(TableName=TABLE)["Items"]


def put_request(pk: str) -> dict:
    return {"PutRequest": {"Item": {"pk": {"S": pk}}}}


def test_batch_write_item_refuses_more_than_25_requests_and_writes_none(ddb):
    message = refused(
        ddb.batch_write_item, RequestItems={TABLE: [put_request(f"k{i}") for i in range(26)]}
    )
    assert "less than or equal to 25" in message
    assert items(ddb) == []
    ddb.batch_write_item(RequestItems={TABLE: [put_request(f"k{i}") for i in range(25)]})
    assert len(items(ddb)) == 25


def test_batch_write_item_refuses_a_put_and_a_delete_of_one_item(ddb):
    message = refused(
        ddb.batch_write_item,
        RequestItems={TABLE: [put_request("a"), {"DeleteRequest": {"Key": {"pk": {"S": "a"}}}}]},
    )
    assert message == "Provided list of item keys contains duplicates"
    assert items(ddb) == []


def big_put(pk: str) -> dict:
    return {"Put": {"TableName": TABLE, "Item": {"pk": {"S": pk}, "v": {"S": "x" * 390_000}}}}


def test_transact_write_items_refuses_more_than_4_mb_in_all(ddb):
    message = refused(ddb.transact_write_items, TransactItems=[big_put(f"b{i}") for i in range(11)])
    assert "4 MB" in message
    assert items(ddb) == []
    ddb.transact_write_items(TransactItems=[big_put(f"b{i}") for i in range(10)])
    for i in range(10):  # a scan would stop at 1 MB
        assert "Item" in ddb.get_item(TableName=TABLE, Key={"pk": {"S": f"b{i}"}})


def test_transact_get_items_refuses_two_reads_of_one_item(ddb):
    get = {"Get": {"TableName": TABLE, "Key": {"pk": {"S": "a"}}}}
    message = refused(ddb.transact_get_items, TransactItems=[get, get])
    assert message == "Transaction request cannot include multiple operations on one item"


def test_a_client_request_token_is_idempotent_and_refuses_another_payload(ddb):
    def add_one(pk: str) -> dict:
        return {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": pk}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }

    ddb.transact_write_items(ClientRequestToken="token-1", TransactItems=[add_one("a")])
    ddb.transact_write_items(ClientRequestToken="token-1", TransactItems=[add_one("a")])
    assert items(ddb) == [{"pk": {"S": "a"}, "n": {"N": "1"}}]  # the retry wrote nothing
    refused(
        ddb.transact_write_items,
        ClientRequestToken="token-1",
        TransactItems=[add_one("b")],
        code="IdempotentParameterMismatchException",
    )
    assert items(ddb) == [{"pk": {"S": "a"}, "n": {"N": "1"}}]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"L": [{"SS": []}]}, "An string set  may not be empty"),
        ({"M": {"inner": {"L": [{"NS": []}]}}}, "An number set  may not be empty"),
        ({"SS": ["a", "a"]}, "Input collection [a, a] contains duplicates."),
        ({"NS": ["1", "1.0"]}, "contains duplicates."),
        ({"L": [{"SS": ["x", "x"]}]}, "Input collection [x, x] contains duplicates."),
        ({"N": "1" * 39}, "Attempting to store more than 38 significant digits in a Number"),
        ({"N": "1E+126"}, "Number overflow."),
        ({"N": "-1E+126"}, "Number overflow."),
    ],
)
def test_values_dynamodb_refuses_are_refused(ddb, value, message):
    got = refused(ddb.put_item, TableName=TABLE, Item={"pk": {"S": "a"}, "v": value})
    assert message in got
    assert items(ddb) == []


def test_the_limits_themselves_are_accepted(ddb):
    largest = "9." + "9" * 37 + "E+125"
    ddb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "a"}, "max": {"N": largest}, "digits": {"N": "1" * 38}},
    )
    got = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]
    assert got["digits"] == {"N": "1" * 38}
    assert got["max"] == {"N": "9" * 38 + "0" * 88}


def test_numbers_come_back_normalised_and_keys_match_by_value(ddb):
    ddb.create_table(
        TableName="by-number",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(
        TableName="by-number",
        Item={
            "id": {"N": "00042"},
            "a": {"N": "1.50"},
            "b": {"N": "1E2"},
            "c": {"N": "-0.0"},
            "s": {"NS": ["2.0", "010"]},
        },
    )
    got = ddb.get_item(TableName="by-number", Key={"id": {"N": "42"}})["Item"]
    assert got["id"] == {"N": "42"}
    assert got["a"] == {"N": "1.5"}
    assert got["b"] == {"N": "100"}
    assert got["c"] == {"N": "0"}
    assert sorted(got["s"]["NS"]) == ["10", "2"]


@pytest.mark.parametrize(
    ("call", "params", "legacy", "expression"),
    [
        (
            "put_item",
            {
                "Item": {"pk": {"S": "a"}},
                "ConditionExpression": "attribute_not_exists(pk)",
                "Expected": {"pk": {"Exists": False}},
            },
            "Expected",
            "ConditionExpression",
        ),
        (
            "delete_item",
            {
                "Key": {"pk": {"S": "a"}},
                "ConditionExpression": "attribute_exists(pk)",
                "Expected": {"pk": {"Exists": False}},
            },
            "Expected",
            "ConditionExpression",
        ),
        (
            "query",
            {
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
                "KeyConditions": {
                    "pk": {"AttributeValueList": [{"S": "a"}], "ComparisonOperator": "EQ"}
                },
            },
            "KeyConditions",
            "KeyConditionExpression",
        ),
        (
            "scan",
            {
                "FilterExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
                "ScanFilter": {
                    "pk": {"AttributeValueList": [{"S": "a"}], "ComparisonOperator": "EQ"}
                },
            },
            "ScanFilter",
            "FilterExpression",
        ),
    ],
)
def test_an_expression_with_its_legacy_parameter_is_refused(ddb, call, params, legacy, expression):
    message = refused(getattr(ddb, call), TableName=TABLE, **params)
    assert message == (
        "Can not use both expression and non-expression parameters in the same request: "
        f"Non-expression parameters: {{{legacy}}} Expression parameters: {{{expression}}}"
    )
    assert items(ddb) == []


@pytest.mark.parametrize(
    ("name", "constraint"),
    [
        ("ab", "Member must have length greater than or equal to 3"),
        ("a" * 256, "Member must have length less than or equal to 255"),
        ("contacts table", "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"),
    ],
)
def test_table_names_outside_dynamodbs_rules_are_refused(ddb, name, constraint):
    message = refused(
        ddb.create_table,
        **pk_table(name),
    )
    assert message == (
        f"1 validation error detected: Value '{name}' at 'tableName' failed to satisfy "
        f"constraint: {constraint}"
    )
    assert ddb.list_tables()["TableNames"] == [TABLE]
    assert constraint in refused(ddb.get_item, TableName=name, Key={"pk": {"S": "a"}})


def test_update_arithmetic_keeps_38_digits_and_stores_the_result_normalised(ddb):
    ddb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "a"}, "n": {"N": "1.5"}, "big": {"N": "1234567890123456789.0123456789"}},
    )
    got = ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET n = n + :x, big = big - :tiny",
        ExpressionAttributeValues={":x": {"N": "1.5"}, ":tiny": {"N": "0.0000000001"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert got["n"] == {"N": "3"}
    assert got["big"] == {"N": "1234567890123456789.0123456788"}  # 29 digits: moto kept 28


# The request's parameters, checked against the API reference's constraints before anything else
# and reported together (API_PutItem.html, API_Query.html, API_TransactGetItems.html,
# API_BatchGetItem.html, API_ExecuteTransaction.html: "Length Constraints", "Valid Values",
# "Valid Range"; CommonErrors.html: ValidationException).
@pytest.fixture
def unchecked(ddb):
    """A client that sends what boto3 would refuse itself, as other SDKs may."""
    return boto3.client("dynamodb", region_name=REGION, config=Config(parameter_validation=False))


def test_every_invalid_parameter_is_reported_in_one_message(ddb):
    message = refused(
        ddb.delete_item,
        TableName="no-such-table",
        Key={"pk": {"S": "a"}},
        ReturnValues="INVALID",
        ReturnConsumedCapacity="INVALID",
    )
    assert message.startswith("2 validation errors detected: ")
    assert "Value 'INVALID' at 'returnValues' failed to satisfy constraint" in message
    assert "Value 'INVALID' at 'returnConsumedCapacity' failed to satisfy constraint" in message


def test_an_empty_table_name_is_one_error_of_length(unchecked):
    message = refused(unchecked.put_item, TableName="", Item={"pk": {"S": "a"}})
    assert message == (
        "1 validation error detected: Value '' at 'tableName' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1"
    )


def test_a_limit_below_one_is_refused(unchecked):
    message = refused(unchecked.scan, TableName=TABLE, Limit=0)
    assert message == (
        "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1"
    )


@pytest.mark.parametrize(
    ("call", "parameter", "members"),
    [
        ("transact_get_items", "TransactItems", "transactItems"),
        ("transact_write_items", "TransactItems", "transactItems"),
        ("execute_transaction", "TransactStatements", "transactStatements"),
        ("batch_execute_statement", "Statements", "statements"),
    ],
)
def test_an_empty_list_of_actions_is_refused(unchecked, call, parameter, members):
    message = refused(getattr(unchecked, call), **{parameter: []})
    assert message == (
        f"1 validation error detected: Value '[]' at '{members}' failed to satisfy constraint: "
        "Member must have length greater than or equal to 1"
    )


def test_empty_request_items_are_a_missing_parameter(unchecked):
    assert refused(unchecked.batch_get_item, RequestItems={}) == (
        "The requestItems parameter is required for BatchGetItem"
    )


def test_transact_get_items_reads_100_items_and_refuses_101(ddb):
    gets = [{"Get": {"TableName": TABLE, "Key": {"pk": {"S": f"k{i}"}}}} for i in range(101)]
    assert len(ddb.transact_get_items(TransactItems=gets[:100])["Responses"]) == 100
    message = refused(ddb.transact_get_items, TransactItems=gets)
    assert message.endswith("Member must have length less than or equal to 100")


# The legacy parameters as the expressions they stand for (developer guide, "Legacy conditional
# parameters": https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/LegacyConditionalParameters.html,
# AttributesToGet, Expected, ConditionalOperator "OR - at least one of the conditions must
# evaluate to true"; AttributeUpdates: a key attribute cannot be updated).
def test_attributes_to_get_returns_those_attributes_alone(ddb):
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "name": {"S": "n"}, "role": {"S": "r"}})
    got = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}}, AttributesToGet=["role"])
    assert got["Item"] == {"role": {"S": "r"}}
    [scanned] = ddb.scan(TableName=TABLE, AttributesToGet=["name"])["Items"]
    assert scanned == {"name": {"S": "n"}}


def test_expected_with_or_writes_when_one_condition_holds(ddb):
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "status": {"S": "active"}})
    ddb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "a"}, "status": {"S": "updated"}},
        Expected={
            "status": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "active"}]},
            "role": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "admin"}]},
        },
        ConditionalOperator="OR",
    )
    assert items(ddb) == [{"pk": {"S": "a"}, "status": {"S": "updated"}}]


def test_expected_not_exists_refuses_a_delete_of_an_item_holding_the_attribute(ddb):
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "data": {"S": "x"}})
    refused(
        ddb.delete_item,
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        Expected={"data": {"Exists": False}},
        code="ConditionalCheckFailedException",
    )
    assert len(items(ddb)) == 1


def test_attribute_updates_may_not_change_the_key(ddb):
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}})
    message = refused(
        ddb.update_item,
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        AttributeUpdates={"pk": {"Action": "PUT", "Value": {"S": "b"}}},
    )
    assert message.endswith("Cannot update attribute pk. This attribute is part of the key")
    assert items(ddb) == [{"pk": {"S": "a"}}]


# CreateTable's keys and indexes (developer guide, "Core components of Amazon DynamoDB": one
# partition key and at most one sort key; "Local secondary indexes": "same partition key as the
# base table, but a different sort key"; index names unique; API_CreateTable.html: AttributeType
# "Valid Values: S | N | B").
def composite_lsi(table_keys: list[dict], index_hash: str = "pk") -> dict:
    return {
        "TableName": "lsi",
        "AttributeDefinitions": [
            {"AttributeName": n, "AttributeType": "S"}
            for n in sorted({k["AttributeName"] for k in table_keys} | {index_hash, "lsiSk"})
        ],
        "KeySchema": table_keys,
        "LocalSecondaryIndexes": [
            {
                "IndexName": "byLsiSk",
                "KeySchema": [
                    {"AttributeName": index_hash, "KeyType": "HASH"},
                    {"AttributeName": "lsiSk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


HASH = {"AttributeName": "pk", "KeyType": "HASH"}
RANGE = {"AttributeName": "sk", "KeyType": "RANGE"}


def test_a_local_secondary_index_needs_the_tables_sort_key_and_partition_key(unchecked):
    message = refused(unchecked.create_table, **composite_lsi([HASH]))
    assert message.endswith(
        "Table KeySchema does not have a range key, which is required when specifying a "
        "LocalSecondaryIndex"
    )
    message = refused(unchecked.create_table, **composite_lsi([HASH, RANGE], index_hash="other"))
    assert "does not have the same leading hash key as table KeySchema" in message
    unchecked.create_table(**composite_lsi([HASH, RANGE]))


def test_create_table_refuses_an_unknown_attribute_type_and_a_key_named_twice(unchecked):
    message = refused(
        unchecked.create_table,
        TableName="typed",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "INVALID"}],
        KeySchema=[HASH],
        BillingMode="PAY_PER_REQUEST",
    )
    assert "at 'attributeDefinitions.1.member.attributeType'" in message
    message = refused(
        unchecked.create_table,
        TableName="twice",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[HASH, {"AttributeName": "pk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert message == "Invalid KeySchema: Some index key attribute have no definition"


# The rules between an item request's parameters, with DynamoDB's messages (API_GetItem.html
# Key: "you must provide all of the attributes"; API_Scan.html Segment: "must be less than the
# value provided for TotalSegments"; HowItWorks.NamingRulesDataTypes.html: NULL is true, sets
# are not empty).
def test_a_key_missing_its_sort_key_does_not_match_the_schema(ddb):
    ddb.create_table(
        TableName="composite",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[HASH, RANGE],
        BillingMode="PAY_PER_REQUEST",
    )
    for call in (ddb.get_item, ddb.delete_item):
        message = refused(call, TableName="composite", Key={"pk": {"S": "a"}})
        assert message == "The provided key element does not match the schema"


def test_a_segment_past_the_total_is_named_with_both_numbers(ddb):
    message = refused(ddb.scan, TableName=TABLE, Segment=5, TotalSegments=5)
    assert message.endswith("Segment: 5 is not less than TotalSegments: 5")


def test_a_false_null_and_an_empty_binary_set_are_invalid_values(ddb):
    invalid = "One or more parameter values were invalid: "
    message = refused(ddb.put_item, TableName=TABLE, Item={"pk": {"S": "a"}, "n": {"NULL": False}})
    assert message == invalid + "Null attribute value types must have the value of true"
    message = refused(ddb.put_item, TableName=TABLE, Item={"pk": {"S": "a"}, "b": {"BS": []}})
    assert message == invalid + "Binary sets should not be empty"
    assert items(ddb) == []


def test_update_items_expression_errors_are_not_counted_as_constraints(ddb):
    message = refused(
        ddb.update_item,
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "x"}, ":unused": {"S": "y"}},
    )
    assert (
        message
        == "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"
    )


# Expressions refused by DynamoDB's parser before any item is read (developer guide, "Expression
# attribute names (aliases) in DynamoDB": a placeholder must be defined in
# ExpressionAttributeNames; "Using projection expressions": names, dereferences and list indexes
# separated by commas).
def test_an_undefined_name_placeholder_is_named_in_the_refusal(ddb):
    message = refused(
        ddb.scan,
        TableName=TABLE,
        FilterExpression="#missing = :v",
        ExpressionAttributeValues={":v": {"S": "x"}},
    )
    assert message == (
        "Invalid FilterExpression: An expression attribute name used in the document path is "
        "not defined; attribute name: #missing"
    )


def test_a_projection_with_a_character_no_path_has_is_a_syntax_error(ddb):
    expected = 'Invalid ProjectionExpression: Syntax error; token: "!", near: "!!"'
    key = {"pk": {"S": "a"}}
    assert refused(ddb.get_item, TableName=TABLE, Key=key, ProjectionExpression="!!") == expected
    get = {"Get": {"TableName": TABLE, "Key": key, "ProjectionExpression": "!!!"}}
    assert refused(ddb.transact_get_items, TransactItems=[get]) == expected


# An action's key that is not its table's cancels the transaction (API_TransactGetItems.html,
# TransactionCanceledException: "ValidationError" among the CancellationReasons).
def test_a_transactions_action_with_a_wrong_key_cancels_it_with_a_validation_error(ddb):
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}})
    gets = [
        {"Get": {"TableName": TABLE, "Key": {"pk": {"S": "a"}}}},
        {"Get": {"TableName": TABLE, "Key": {}}},
    ]
    with pytest.raises(ClientError) as error:
        ddb.transact_get_items(TransactItems=gets)
    assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = error.value.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == ["None", "ValidationError"]
