"""The key proof of the fan-out modes: whatever the mode, each consumer gets exactly the changes
its stream filter admits. For arbitrary stream records (any event name, either image or none,
CONTACT and other items, every tested field present, absent or of another DynamoDB type, with
values on both sides of the filters), as template.yaml declares the selections:

- router: a consumer's subscription filter policy matches the record's message attributes
  (shared.contacts.change_attributes) iff its stream mapping's FilterCriteria match the record;
- pipe: its rule's event pattern matches the event ChangePipe puts on ChangeBus iff its
  FilterCriteria match the record; the pipe's own filter admits a record iff some consumer's does;
- pipe-topic: its subscription's filter policy on the body (the record ChangePipe publishes)
  and then its queue mapping's FilterCriteria on that body admit the record iff its
  FilterCriteria do;
- pipe-sfn: the pipe's filter, then (ChangeMachine sends each change to every consumer's queue,
  the record as the body) its queue mapping's FilterCriteria on that body admit the record iff
  its FilterCriteria do;
- the router's mapping admits every record some subscription takes (it drops none a consumer needs).

Matched with the local stack's matchers (emulator/core/filters.py,
emulator/services/sns_filter_policies.py), which implement the pattern language Lambda,
EventBridge and SNS document."""

import json
import os

import pytest
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from hypothesis import Phase, example, find, given, settings
from moto.sns.exceptions import SNSInvalidParameter
from moto.sns.models import SNSBackend
from shared import contacts

from emulator.services import moto_patches
from tests.contract import STREAM_FILTERS
from tests.unit.fanout.fanout_template import (
    CONSUMERS,
    bus_event,
    pipe_filter,
    publish_attributes,
    queue_message,
    router_filter,
    selections,
)
from tests.unit.fanout.helpers import SAMPLES
from tests.unit.fanout.strategies import stream_records

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "1"))  # a multiplier for long searches


def admitted(record: dict) -> dict[str, dict[str, bool]]:
    """Consumer -> mode -> whether that mode's selection gives the consumer the record."""
    attributes = publish_attributes(contacts.change_attributes(DynamoDBRecord(record)))
    event = bus_event(record)
    body = json.dumps(record)  # what ChangePipe publishes to ChangeTopic (pipe-topic)
    # what ChangeMachine sends each queue (States.JsonToString: compact JSON), pipe-sfn
    machine_body = json.dumps(record, separators=(",", ":"))
    piped = pipe_filter().matches(record)
    return {
        consumer: {
            "lambda": selection.stream.matches(record),
            "router": selection.subscription.matches(attributes, body),
            "pipe": selection.rule.matches(event),
            "pipe-topic": selection.body_subscription.matches({}, body)
            and selection.queue.matches(queue_message(body)),
            "pipe-sfn": piped and selection.machine_queue.matches(queue_message(machine_body)),
        }
        for consumer, selection in selections().items()
    }


def with_examples(test):
    for sample in SAMPLES:
        test = example(sample)(test)
    return test


@settings(max_examples=1500 * EXAMPLES, deadline=None)
@with_examples
@given(stream_records())
def test_every_mode_gives_each_consumer_exactly_its_stream_filters_records(record):
    modes = admitted(record)
    for consumer, by_mode in modes.items():
        assert by_mode["router"] == by_mode["lambda"], (consumer, "router", record)
        assert by_mode["pipe"] == by_mode["lambda"], (consumer, "pipe", record)
        assert by_mode["pipe-topic"] == by_mode["lambda"], (consumer, "pipe-topic", record)
        assert by_mode["pipe-sfn"] == by_mode["lambda"], (consumer, "pipe-sfn", record)

    anyone = any(by_mode["lambda"] for by_mode in modes.values())
    assert pipe_filter().matches(record) == anyone
    if anyone:
        assert router_filter().matches(record)


def test_the_search_reaches_both_sides_of_every_filter():
    """The strategy is worth its examples: it yields records each consumer's filter admits and
    records it refuses (so the equivalence above is not vacuous)."""
    for consumer in CONSUMERS:
        for wanted in (True, False):
            find(  # the first found is enough: no shrinking
                stream_records(),
                lambda r, c=consumer, w=wanted: selections()[c].stream.matches(r) is w,
                settings=settings(max_examples=2000, database=None, phases=[Phase.generate]),
            )


@pytest.mark.parametrize("record", SAMPLES, ids=[r["eventID"] for r in SAMPLES])
def test_the_sample_records_reach_the_same_consumers_in_every_mode(record):
    for by_mode in admitted(record).values():
        assert len(set(by_mode.values())) == 1, by_mode


def test_the_subscriptions_are_within_what_sns_allows():
    """At most 5 keys per policy (or per $or branch), as the contract says."""
    for selection in selections().values():
        for policy in (selection.subscription_policy, selection.body_subscription_policy):
            branches = policy.get("$or", [policy])
            assert all(len(branch) <= 5 for branch in branches)


def test_the_body_policies_weigh_what_sns_accepts():
    """SNS weighs a body policy's values by their nesting depth (a leaf four levels down counts
    4; at most 150): each $or branch within it, as the local stack's SNS checks on Subscribe."""
    moto_patches.install()
    try:
        _check_the_body_policies(SNSBackend("us-east-1", "123456789012"))
    finally:
        moto_patches.uninstall()


def _check_the_body_policies(backend: SNSBackend) -> None:
    for consumer, selection in selections().items():
        backend._validate_filter_policy(selection.body_subscription_policy, "MessageBody")
        # the whole stream filter as one body policy is what SNS refuses for Survey
        filters = STREAM_FILTERS[consumer]
        whole = filters[0] if len(filters) == 1 else {"$or": filters}
        if consumer == "SurveyFunction":
            with pytest.raises(SNSInvalidParameter, match="too complex"):
                backend._validate_filter_policy(whole, "MessageBody")
