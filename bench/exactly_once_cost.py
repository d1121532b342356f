"""P3: what exactly-once costs in DynamoDB requests, per notification, on first delivery and on a
duplicate, for SurveyFunction, GoodwillFunction and NotifierFunction.

In-process under moto (mock_aws), each handler loaded cold and invoked with one batch of
NOTIFICATIONS records, then with the same batch again (a duplicate delivery): for the consumers,
stream INSERT records of the CONTACT items the ingest stores of Amazon Connect's contact records
(generated records, mapped by shared.model; one per customer interaction, since surveys and gift
cards are per interaction) in the envelope of the events/ samples; for the notifier,
NotificationQueue messages.

First delivery counts writes to the idempotency table: the exactly-once bookkeeping. Only the
notifier keeps any (claim, then completion): the consumers' effects carry deterministic ids, so a
duplicate re-enqueues the same notification, which the notifier suppresses (its duplicate row
shows that cost). GoodwillFunction's gift card write is the business effect, not bookkeeping: it
is reported in the detail, not counted against the budget. A duplicate counts every DynamoDB
request.
"""

import copy
import json
from collections.abc import Callable

import boto3
from boto3.dynamodb.types import TypeSerializer

from bench.common import Figure
from bench.inprocess import (
    RequestCounter,
    aws_in_process,
    breakdown,
    by_operation,
    contact_records,
    event_sample,
    import_shared,
    lambda_environment,
    load_handler,
    quiet,
    sqs_event,
    stored_contacts,
)
from emulator.process import REGION
from harness.in_process import FakeLambdaContext, Resources, create_resources

NOTIFICATIONS = 20
BUDGET_FIRST_WRITES = 2
BUDGET_DUPLICATE_REQUESTS = 1


def _stream_event(due: str, count: int) -> dict:
    """`count` INSERT records of CONTACT items as the ingest stores them from Amazon Connect's
    contact records (bench.inprocess.contact_records, mapped by shared.model), of contacts for
    which `due` holds ("survey", "gift_card" or "last_agent", by shared.rules), each of an
    interaction and a caller of its own, in the envelope of an events/ sample, each with its own
    event id and sequence number."""
    import_shared()
    from shared import keys, rules  # noqa: PLC0415 (the layer is on sys.path now)

    wait = rules.DEFAULT_GOODWILL_WAIT_SECONDS
    test = {
        "survey": rules.survey_due,
        "gift_card": lambda contact: rules.gift_card_due(contact, wait),
        "last_agent": rules.sets_last_agent,
    }[due]
    chosen: list[dict] = []
    seen: set[str] = set()
    for item in stored_contacts(list(contact_records(count * 50, seed=31)), wait):
        ours = {keys.interaction_id(item), item.get("caller") or item["contact_id"]}
        if test(item) and not ours & seen:
            chosen.append(item)
            seen |= ours
        if len(chosen) == count:
            break
    else:
        raise RuntimeError(f"fewer than {count} generated contacts are {due} due")
    envelope = event_sample("dynamodb-insert-contact-resolved-optin.json")["Records"][0]
    serialize = TypeSerializer().serialize
    records = []
    for index, item in enumerate(chosen):
        record = copy.deepcopy(envelope)
        # the first copy of the contact, as the ingest's transaction puts it (shared.aws.table)
        image = {name: serialize(value) for name, value in (item | {"first_export": True}).items()}
        record["dynamodb"]["NewImage"] = image
        record["dynamodb"]["Keys"] = {"pk": image["pk"], "sk": image["sk"]}
        record["eventID"] = f"{index:032x}"
        record["dynamodb"]["SequenceNumber"] = f"{4421584500000000017450439092 + index}"
        records.append(record)
    return {"Records": records}


def _notification_event(count: int) -> dict:
    """`count` NotificationQueue messages, half SURVEY and half GIFT_CARD, built as the consumers
    build them (shared.notifications), in the shape of events/sqs-notification.json."""
    import_shared()
    from shared import gift_cards, notifications  # noqa: PLC0415 (the layer is on sys.path now)

    bodies = []
    for index in range(count):
        contact = {
            "contact_id": f"c-bench-{index:05d}",
            "caller": f"+1415555{index:04d}",
            "email": f"caller.{index}@example.com",
        }
        message = (
            notifications.survey(contact)
            if index % 2
            else notifications.gift_card(gift_cards.new_gift_card(contact))
        )
        bodies.append(json.dumps(message))
    event = sqs_event(bodies, "bench-notifications")
    sample = event_sample("sqs-notification.json")["Records"][0]
    for record in event["Records"]:
        record["eventSourceARN"] = sample["eventSourceARN"]
    return event


def _queued(resources: Resources, url: str) -> int:
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


# Per function: the event, where its messages go, and how many more a duplicate delivery sends
# there (the consumers re-enqueue, for the notifier to suppress; the notifier sends none).
CASES: dict[str, tuple[Callable[[], dict], Callable[[Resources], str], int]] = {
    "SurveyFunction": (
        lambda: _stream_event("survey", NOTIFICATIONS),
        lambda r: r.notification_queue_url,
        NOTIFICATIONS,
    ),
    "GoodwillFunction": (
        lambda: _stream_event("gift_card", NOTIFICATIONS),
        lambda r: r.notification_queue_url,
        NOTIFICATIONS,
    ),
    "NotifierFunction": (
        lambda: _notification_event(NOTIFICATIONS),
        lambda r: r.topic_capture_url,
        0,
    ),
}


def _measure(logical_id: str) -> list[Figure]:
    build_event, output_queue, resent = CASES[logical_id]
    counter = RequestCounter()
    with aws_in_process(), counter.installed():
        resources = create_resources("bench-")
        with lambda_environment(logical_id, resources.function_env()), quiet():
            app = load_handler(logical_id)
            event = build_event()
            counter.reset()
            first_response = app.lambda_handler(event, FakeLambdaContext(logical_id))
            first = counter.reset()
            sent_first = _queued(resources, output_queue(resources))
            duplicate_response = app.lambda_handler(
                copy.deepcopy(event), FakeLambdaContext(logical_id)
            )
            duplicate = counter.reset()
            sent_total = _queued(resources, output_queue(resources))

    n = NOTIFICATIONS
    idempotency = resources.idempotency_table
    bookkeeping = [c for c in first if c.write and idempotency in c.tables]
    business = [c for c in first if c.write and resources.contacts_table in c.tables]
    first_per = len(bookkeeping) / n
    duplicate_per = len(duplicate) / n
    failures = first_response.get("batchItemFailures") or duplicate_response.get(
        "batchItemFailures"
    )
    ok = not failures and sent_first == n and sent_total == n + resent
    check = (
        ""
        if ok
        else f"; INVALID RUN: {sent_first} then {sent_total} messages out for {n}, "
        f"failures {failures}"
    )
    business_note = (
        f"; business write (gift card, not counted): {breakdown(by_operation(business))} "
        f"= {len(business) / n:g}/notification"
        if business
        else ""
    )
    return [
        Figure(
            "P3",
            f"exactly-once writes, first delivery {logical_id}",
            round(first_per, 3),
            "writes/notif",
            f"<= {BUDGET_FIRST_WRITES} (idempotency table)",
            first_per <= BUDGET_FIRST_WRITES and ok,
            (
                f"{n} notifications, {n} messages out; idempotency table "
                f"{breakdown(by_operation(first, idempotency))}; all requests "
                f"{len(first) / n:g}/notification{business_note}{check}"
            ),
        ),
        Figure(
            "P3",
            f"requests per duplicate {logical_id}",
            round(duplicate_per, 3),
            "req/dup",
            f"<= {BUDGET_DUPLICATE_REQUESTS} (all DynamoDB)",
            duplicate_per <= BUDGET_DUPLICATE_REQUESTS and ok,
            (
                f"same {n} records again: {breakdown(by_operation(duplicate)) or 'none'}; "
                f"{sent_total - sent_first} extra messages out"
                f"{' (suppressed by the notifier)' if resent else ''}{check}"
            ),
        ),
    ]


def run() -> list[Figure]:
    figures = []
    for logical_id in CASES:
        figures.extend(_measure(logical_id))
    return figures


if __name__ == "__main__":
    for figure in run():
        print(figure)
