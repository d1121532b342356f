"""DynamoDB's answers where moto 5.2.6 gave others (emulator/services/dynamodb_api.py), moto in
process through boto3. The cases are DynamoDB's documented behaviour: ListTables' paging
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ListTables.html) and document
paths in a ProjectionExpression
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html),
ItemCollectionMetrics ("only returned if the request asked for it. If the table does not have any
local secondary indexes, this information is not returned",
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ItemCollectionMetrics.html),
PartiQL's writes (developer guide, "PartiQL insert statements for DynamoDB": an INSERT of an
existing key is DuplicateItemException; update and delete statements need an equality on every key
attribute; ExecuteTransaction writes all or nothing).
"""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.table import Table

from emulator.process import REGION
from tests.unit.emulator.support import client, fake_credentials

pytestmark = pytest.mark.usefixtures("moto_patched")
NAMES = ["zeta", "alpha", "Beta", "mid_1", "mid-0"]  # created in this order
IN_ORDER = ["Beta", "alpha", "mid-0", "mid_1", "zeta"]  # byte order: upper case, '-', '_' first


@pytest.fixture
def ddb(monkeypatch):
    fake_credentials(monkeypatch)
    with mock_aws():
        yield client("dynamodb")


def create(ddb, name: str, sort_key: str | None = None) -> None:
    """An on-demand table keyed by pk (and ``sort_key``), string keys."""
    keys = {"pk": "HASH"} | ({sort_key: "RANGE"} if sort_key else {})
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": kind} for key, kind in keys.items()],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def test_list_tables_lists_names_in_order_whatever_the_creation_order(ddb):
    for name in NAMES:
        create(ddb, name)

    listed = ddb.list_tables()

    assert listed["TableNames"] == IN_ORDER
    assert "LastEvaluatedTableName" not in listed


def test_list_tables_pages_by_limit_from_after_the_exclusive_start_name(ddb):
    for name in NAMES:
        create(ddb, name)

    pages, start = [], None
    while True:
        page = ddb.list_tables(Limit=2, **({"ExclusiveStartTableName": start} if start else {}))
        pages.append(page["TableNames"])
        start = page.get("LastEvaluatedTableName")
        if start is None:
            break

    assert pages == [["Beta", "alpha"], ["mid-0", "mid_1"], ["zeta"]]
    # The start name need not be a table's: the page begins after it in order
    assert ddb.list_tables(ExclusiveStartTableName="beta")["TableNames"] == [
        "mid-0",
        "mid_1",
        "zeta",
    ]


@pytest.fixture
def item(ddb):
    create(ddb, "contacts")
    ddb.put_item(
        TableName="contacts",
        Item={
            "pk": {"S": "k"},
            "calls": {"L": [{"M": {"agent": {"S": "a1"}, "secs": {"N": "30"}}}, {"S": "second"}]},
            "tags": {"L": [{"S": "t0"}, {"S": "t1"}, {"S": "t2"}]},
            "grid": {"L": [{"L": [{"N": "1"}, {"N": "2"}]}, {"L": [{"N": "3"}, {"N": "4"}]}]},
            "photo": {"B": b"abc"},
        },
    )
    return ddb


def projected(ddb, expression: str, names: dict | None = None) -> dict:
    extra = {"ExpressionAttributeNames": names} if names else {}
    got = ddb.get_item(
        TableName="contacts", Key={"pk": {"S": "k"}}, ProjectionExpression=expression, **extra
    ).get("Item", {})
    scanned = ddb.scan(TableName="contacts", ProjectionExpression=expression, **extra)["Items"]
    assert scanned == [got] if got else scanned in ([], [{}])
    return got


def test_projection_takes_a_list_element_behind_a_name_placeholder(item):
    assert projected(item, "calls[0].agent, #t[2]", {"#t": "tags"}) == {
        "calls": {"L": [{"M": {"agent": {"S": "a1"}}}]},
        "tags": {"L": [{"S": "t2"}]},
    }


def test_projection_of_two_elements_of_one_list_keeps_both_in_index_order(item):
    assert projected(item, "tags[2], tags[0]") == {"tags": {"L": [{"S": "t0"}, {"S": "t2"}]}}


def test_projection_follows_nested_indexes_and_skips_paths_to_nothing(item):
    assert projected(item, "grid[1][0], tags[9], calls[1].agent, nothing") == {
        "grid": {"L": [{"L": [{"N": "3"}]}]}
    }


def test_size_of_a_binary_is_its_length_in_bytes(item):
    def count(size: int) -> int:
        return item.scan(
            TableName="contacts",
            FilterExpression="size(photo) = :n",
            ExpressionAttributeValues={":n": {"N": str(size)}},
        )["Count"]

    assert (count(3), count(4)) == (1, 0)  # b"abc": 3 bytes (its base64 text has 4 characters)


@pytest.fixture
def lsi_table(ddb):
    """A table with a local secondary index (item collections) beside one without."""
    create(ddb, "plain")
    ddb.create_table(
        TableName="calls",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "agent", "AttributeType": "S"},
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by_agent",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "agent", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb


def collection(pk: str) -> dict:
    return {"ItemCollectionKey": {"pk": {"S": pk}}, "SizeEstimateRangeGB": [0.0, 1.0]}


def test_single_writes_to_a_table_with_a_local_index_return_their_item_collection(lsi_table):
    ddb = lsi_table
    key = {"pk": {"S": "c1"}, "sk": {"S": "1"}}
    put = ddb.put_item(
        TableName="calls",
        Item={**key, "agent": {"S": "a1"}},
        ReturnItemCollectionMetrics="SIZE",
    )
    update = ddb.update_item(
        TableName="calls",
        Key=key,
        UpdateExpression="SET secs = :s",
        ExpressionAttributeValues={":s": {"N": "30"}},
        ReturnItemCollectionMetrics="SIZE",
    )
    delete = ddb.delete_item(TableName="calls", Key=key, ReturnItemCollectionMetrics="SIZE")

    for response in (put, update, delete):
        assert response["ItemCollectionMetrics"] == collection("c1")
    unasked = ddb.put_item(TableName="calls", Item={**key, "agent": {"S": "a1"}})
    assert "ItemCollectionMetrics" not in unasked


def test_a_table_without_a_local_index_returns_no_item_collection_metrics(lsi_table):
    put = lsi_table.put_item(
        TableName="plain", Item={"pk": {"S": "p1"}}, ReturnItemCollectionMetrics="SIZE"
    )

    assert "ItemCollectionMetrics" not in put


def test_batch_and_transaction_map_each_indexed_table_to_the_collections_written(lsi_table):
    ddb = lsi_table
    batch = ddb.batch_write_item(
        RequestItems={
            "calls": [
                {"PutRequest": {"Item": {"pk": {"S": "c1"}, "sk": {"S": "1"}}}},
                {"PutRequest": {"Item": {"pk": {"S": "c1"}, "sk": {"S": "2"}}}},
                {"PutRequest": {"Item": {"pk": {"S": "c2"}, "sk": {"S": "1"}}}},
            ],
            "plain": [{"PutRequest": {"Item": {"pk": {"S": "p1"}}}}],
        },
        ReturnItemCollectionMetrics="SIZE",
    )
    transaction = ddb.transact_write_items(
        TransactItems=[
            {"Delete": {"TableName": "calls", "Key": {"pk": {"S": "c2"}, "sk": {"S": "1"}}}},
            {"Put": {"TableName": "plain", "Item": {"pk": {"S": "p2"}}}},
        ],
        ReturnItemCollectionMetrics="SIZE",
    )

    assert batch["ItemCollectionMetrics"] == {"calls": [collection("c1"), collection("c2")]}
    assert transaction["ItemCollectionMetrics"] == {"calls": [collection("c2")]}


@pytest.fixture
def contacts(ddb):
    create(ddb, "contacts")
    ddb.execute_statement(Statement="INSERT INTO contacts VALUE {'pk': 'c1', 'state': 'open'}")
    return ddb


def error_of(call, **kwargs) -> dict:
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return error.value.response


def state_of(ddb, pk: str) -> str | None:
    item = ddb.get_item(TableName="contacts", Key={"pk": {"S": pk}}).get("Item")
    return item["state"]["S"] if item else None


def test_partiql_insert_of_an_existing_key_is_refused_and_keeps_the_item(contacts):
    response = error_of(
        contacts.execute_statement,
        Statement="INSERT INTO contacts VALUE {'pk': 'c1', 'state': 'overwritten'}",
    )

    assert response["Error"] == {
        "Code": "DuplicateItemException",
        "Message": "Duplicate primary key exists in table",
    }
    assert state_of(contacts, "c1") == "open"


def test_partiql_update_and_delete_need_the_full_key_in_where(contacts):
    for statement in (
        "UPDATE contacts SET note = 'x' WHERE state = 'open'",
        "DELETE FROM contacts WHERE state = 'open'",
    ):
        response = error_of(contacts.execute_statement, Statement=statement)
        assert response["Error"]["Code"] == "ValidationException"
        assert "mandatory equality on all key attributes" in response["Error"]["Message"]
    assert state_of(contacts, "c1") == "open"

    contacts.execute_statement(
        Statement="UPDATE contacts SET state = ? WHERE pk = ?",
        Parameters=[{"S": "closed"}, {"S": "c1"}],
    )
    assert state_of(contacts, "c1") == "closed"
    contacts.execute_statement(Statement="DELETE FROM contacts WHERE pk = 'c1'")
    assert state_of(contacts, "c1") is None


def test_batch_execute_statement_reports_a_duplicate_insert_beside_the_others(contacts):
    responses = contacts.batch_execute_statement(
        Statements=[
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c2', 'state': 'open'}"},
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c1', 'state': 'again'}"},
        ]
    )["Responses"]

    assert "Error" not in responses[0]
    assert responses[1]["Error"] == {
        "Code": "DuplicateItem",
        "Message": "Duplicate primary key exists in table",
    }
    assert (state_of(contacts, "c1"), state_of(contacts, "c2")) == ("open", "open")


def test_execute_transaction_with_a_duplicate_insert_writes_nothing(contacts):
    response = error_of(
        contacts.execute_transaction,
        TransactStatements=[
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c3', 'state': 'open'}"},
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c1', 'state': 'again'}"},
        ],
    )

    assert response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in response["CancellationReasons"]] == ["None", "DuplicateItem"]
    assert (state_of(contacts, "c1"), state_of(contacts, "c3")) == ("open", None)


@pytest.mark.parametrize(
    ("statement", "parameters"),
    [
        ("SELECT * FROM \"contacts\" WHERE pk = 'c1'", []),  # the developer guide's form
        ('SELECT * FROM "contacts" WHERE pk = ?', [{"S": "c1"}]),
        ("SELECT * FROM contacts WHERE pk = 'c1'", []),
        ("SELECT * FROM contacts WHERE pk = ?", [{"S": "c1"}]),  # the check once used it up
    ],
)
def test_a_select_names_its_table_quoted_or_not(contacts, statement, parameters):
    """The parse check before moto runs a statement once refused every quoted table name and
    consumed the parameters it bound, so that the statement itself matched nothing."""
    request = {"Statement": statement, **({"Parameters": parameters} if parameters else {})}
    answered = contacts.execute_statement(**request)
    assert answered["Items"] == [{"pk": {"S": "c1"}, "state": {"S": "open"}}]
    batch = contacts.batch_execute_statement(Statements=[request])["Responses"]
    assert batch == [{"TableName": "contacts", "Item": answered["Items"][0]}]


def test_a_statement_on_a_table_that_does_not_exist_is_resource_not_found(contacts):
    statement = "SELECT * FROM \"nowhere\" WHERE pk = 'c1'"
    answer = error_of(contacts.execute_statement, Statement=statement)
    assert answer["Error"]["Code"] == "ResourceNotFoundException"
    (entry,) = contacts.batch_execute_statement(Statements=[{"Statement": statement}])["Responses"]
    assert entry["Error"]["Code"] == "ResourceNotFound"


@pytest.mark.parametrize(
    "statement",
    [
        "SELEC * FROM contacts",
        "SELECT * FROM",
        "INSERT INTO contacts VALUE {'pk': ",
        "SELECT * FROM contacts WHERE pk = ",
        "garbage",
    ],
)
def test_a_statement_that_is_not_well_formed_is_a_validation_error(contacts, statement):
    """DynamoDB's 400, not moto's parser failing inside the server (a 500 the client retries)."""
    response = error_of(contacts.execute_statement, Statement=statement)
    assert response["Error"]["Code"] == "ValidationException"
    assert response["Error"]["Message"].startswith(
        "Statement wasn't well formed, can't be processed:"
    )
    responses = contacts.batch_execute_statement(
        Statements=[
            {"Statement": statement},
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c4', 'state': 'open'}"},
        ]
    )["Responses"]
    assert responses[0]["Error"]["Code"] == "ValidationError"
    assert "Error" not in responses[1]
    transaction = error_of(
        contacts.execute_transaction,
        TransactStatements=[
            {"Statement": "INSERT INTO contacts VALUE {'pk': 'c5', 'state': 'open'}"},
            {"Statement": statement},
        ],
    )
    assert transaction["Error"]["Code"] == "ValidationException"
    assert state_of(contacts, "c5") is None  # nothing of the transaction written


@pytest.mark.parametrize("limit", [101, 1000])
def test_list_tables_refuses_a_limit_over_100(ddb, limit):
    response = error_of(ddb.list_tables, Limit=limit)
    assert response["Error"]["Code"] == "ValidationException"
    assert (
        f"Value '{limit}' at 'limit' failed to satisfy constraint" in response["Error"]["Message"]
    )
    assert ddb.list_tables(Limit=100)["TableNames"] == []


@pytest.fixture
def partitions(ddb):
    create(ddb, "calls", sort_key="sk")
    for caller in range(30):
        for n in range(5):
            ddb.put_item(
                TableName="calls",
                Item={
                    "pk": {"S": f"CALLER#{caller}"},
                    "sk": {"S": f"CONTACT#{n}"},
                    "n": {"N": str(n)},
                },
            )
    return ddb


def test_a_query_reads_only_its_partition_and_answers_as_before(partitions, monkeypatch):
    """moto sorted every item of the table for each Query; its answer must not change."""

    def whole_table(self):
        raise AssertionError("a base-table Query read the whole table")

    monkeypatch.setattr(Table, "all_items", whole_table)
    query = {
        "TableName": "calls",
        "KeyConditionExpression": "pk = :pk AND sk > :after",
        "ExpressionAttributeValues": {":pk": {"S": "CALLER#7"}, ":after": {"S": "CONTACT#0"}},
    }
    found = partitions.query(**query)
    assert [i["sk"]["S"] for i in found["Items"]] == [f"CONTACT#{n}" for n in (1, 2, 3, 4)]
    backwards = partitions.query(**query, ScanIndexForward=False, Limit=2)
    assert [i["sk"]["S"] for i in backwards["Items"]] == ["CONTACT#4", "CONTACT#3"]
    rest = partitions.query(
        **query, ScanIndexForward=False, ExclusiveStartKey=backwards["LastEvaluatedKey"]
    )
    assert [i["sk"]["S"] for i in rest["Items"]] == ["CONTACT#2", "CONTACT#1"]
    with_two = {**query["ExpressionAttributeValues"], ":two": {"N": "2"}}
    filtered = partitions.query(
        **query | {"ExpressionAttributeValues": with_two}, FilterExpression="n > :two"
    )
    assert (filtered["Count"], filtered["ScannedCount"]) == (2, 4)
    nobody = {":pk": {"S": "CALLER#none"}, ":after": {"S": "CONTACT#0"}}
    assert partitions.query(**query | {"ExpressionAttributeValues": nobody})["Items"] == []


# Tags and time to live (API_Tag.html: "If you try to add an existing tag (same key), the existing
# tag value will be updated to the new value"; API_TagResource.html / API_ListTagsOfResource.html:
# an ARN that is no table's is a ValidationException, another account's table
# AccessDeniedException;
# API_UpdateTimeToLive.html: AttributeName of 1 to 255 characters, ResourceNotFoundException).
def test_a_tag_of_an_existing_key_replaces_its_value(ddb):
    create(ddb, "tagged")
    arn = ddb.describe_table(TableName="tagged")["Table"]["TableArn"]
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "staging"}])
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "production"}])
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [
        {"Key": "env", "Value": "production"}
    ]


def test_tags_of_no_table_are_refused_by_what_is_wrong_with_the_arn(ddb):
    def refused(arn: str) -> str:
        with pytest.raises(ClientError) as error:
            ddb.list_tags_of_resource(ResourceArn=arn)
        return error.value.response["Error"]["Code"]

    assert refused("not-a-valid-arn") == "ValidationException"
    assert refused("arn:aws:dynamodb:us-east-1:000000000000:table/other") == "AccessDeniedException"
    assert refused("arn:aws:dynamodb:us-east-1:123456789012:table/none") == (
        "ResourceNotFoundException"
    )


def unchecked() -> object:
    """A client that sends what boto3 would refuse itself, as other SDKs may."""
    return boto3.client("dynamodb", region_name=REGION, config=Config(parameter_validation=False))


def test_time_to_live_needs_a_table_and_an_attribute_name(ddb):
    create(ddb, "expiring")
    for table, name, code in (
        ("expiring", "", "ValidationException"),
        ("no-such-table", "ttl", "ResourceNotFoundException"),
    ):
        with pytest.raises(ClientError) as error:
            unchecked().update_time_to_live(
                TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": name}
            )
        assert error.value.response["Error"]["Code"] == code


# UpdateTable's capacity (API_ProvisionedThroughput.html: "Minimum value of 1";
# API_UpdateTable.html: with PAY_PER_REQUEST no ProvisionedThroughput; an update that changes
# nothing is refused).
def test_update_table_refuses_a_throughput_that_is_invalid_or_unchanged(ddb):
    ddb.create_table(
        TableName="provisioned",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
    )
    for update, words in (
        ({"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}, "will not change"),
        ({"ReadCapacityUnits": 0, "WriteCapacityUnits": 5}, "greater than or equal to 1"),
    ):
        with pytest.raises(ClientError) as error:
            unchecked().update_table(TableName="provisioned", ProvisionedThroughput=update)
        assert words in error.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as error:
        ddb.update_table(
            TableName="provisioned",
            BillingMode="PAY_PER_REQUEST",
            ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
        )
    assert "can be specified when BillingMode is PAY_PER_REQUEST" in str(error.value)
    ddb.update_table(
        TableName="provisioned",
        ProvisionedThroughput={"ReadCapacityUnits": 10, "WriteCapacityUnits": 5},
    )


# Functions on binary values (developer guide, "Condition and filter expressions": size "if the
# attribute is of type Binary, returns the number of bytes"; begins_with "a" prefix of "a String
# or Binary"; a function of an absent attribute makes its comparison false).
def test_size_and_begins_with_read_a_binary_as_bytes(ddb):
    create(ddb, "binary")
    ddb.put_item(
        TableName="binary", Item={"pk": {"S": "five"}, "b": {"B": b"\x03\x01\x02\x03\x04"}}
    )
    ddb.put_item(TableName="binary", Item={"pk": {"S": "none"}})

    def scanned(expression: str, value: dict) -> list[str]:
        items = ddb.scan(
            TableName="binary",
            FilterExpression=expression,
            ExpressionAttributeValues={":v": value},
        )["Items"]
        return [item["pk"]["S"] for item in items]

    assert scanned("size(b) = :v", {"N": "5"}) == ["five"]
    assert scanned("size(b) > :v", {"N": "5"}) == []
    assert scanned("begins_with(b, :v)", {"B": b"\x03"}) == ["five"]
    assert scanned("begins_with(b, :v)", {"B": b"\x04"}) == []
