"""IngestFunction: IngestQueue messages (S3 event notifications) -> contacts files ingested once:
Amazon Connect's contact records as Firehose writes them under contact-records/, and flat exports
under incoming/.

Each SQS message is one BatchProcessor record. Per file step (a file from its start, or resumed
after a line by a continuation message), a Powertools idempotency claim keyed on the file id
(bucket/key#version, never the message id: S3 itself delivers duplicates under new message ids)
and the line wraps the ingest, so every duplicate delivery has one effect. Outcomes are returned
and so recorded as completed; transient failures raise, making only that message a batch item
failure (Powertools deletes the claim, so the retry can run). A file too big for one invocation
comes back IN_PROGRESS: its continuation (same run) is enqueued on every delivery of the step that
reached it (a duplicate continuation finds its step claimed or done), with the run's age as the
metric FileInProgressSeconds (alarmed past an hour: a file that keeps continuing and never ends).
A step of a run the file's processing log no longer holds (the file was reprocessed) is
acknowledged as OBSOLETE (metric FileStepsObsolete) and continues nothing.

A message that is not an S3 event notification (poison) is reported (error log with the message
id, metric MessagesRejected) and acknowledged: no retry can change it, and it names no file, so
nothing good is lost. Logs name files (bucket, key, version: export file names, not personal
data), outcomes and counts, never row contents.
"""

import functools
import os
import warnings
from dataclasses import asdict
from datetime import UTC, datetime

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import idempotent_function
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from shared import idempotency, ingest, model, rules, s3_events
from shared.aws import messaging

logger = Logger()
metrics = Metrics()
# An invocation may rightly publish no metric: an s3:TestEvent (S3 sends one when the bucket's
# notification is set up) is acknowledged and ignored. Powertools' documented way to silence its
# "No application metrics to publish" warning for such a function.
warnings.filterwarnings("ignore", "No application metrics to publish")

CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
INGEST_QUEUE_URL = os.environ["INGEST_QUEUE_URL"]
GOODWILL_WAIT_SECONDS = int(
    os.environ.get("GOODWILL_WAIT_SECONDS", rules.DEFAULT_GOODWILL_WAIT_SECONDS)
)
# The Connect contact attributes a flow sets for the survey (template parameters).
SURVEY_ATTRIBUTES = model.SurveyAttributes(
    opt_in=os.environ.get("SURVEY_OPT_IN_ATTRIBUTE", model.SurveyAttributes.opt_in),
    email=os.environ.get("SURVEY_EMAIL_ATTRIBUTE", model.SurveyAttributes.email),
)
_retries = Config(retries={"mode": "standard"})
s3 = boto3.client("s3", config=_retries)
# botocore's client-side parameter validation was a third of the ingest's CPU (100-action
# transactions of items shared.aws.table serializes itself). DynamoDB validates every request;
# an item it refuses is refused alone (shared.aws.table.write_contacts).
dynamodb = boto3.client("dynamodb", config=_retries.merge(Config(parameter_validation=False)))
sqs = boto3.client("sqs", config=_retries)
processor = BatchProcessor(event_type=EventType.SQS)

OUTCOME_METRICS = {
    ingest.PROCESSED: "FilesProcessed",
    ingest.REJECTED_FILE: "FilesRejected",
    ingest.SKIPPED_MISSING: "FilesSkipped",
    ingest.STALE: "FilesStale",
    ingest.IN_PROGRESS: "FilesContinued",
    ingest.OBSOLETE: "FileStepsObsolete",
}


file_claims = idempotency.FILE_STEPS.config(
    response_hook=idempotency.count_duplicates(
        metrics, logger, "duplicate delivery of an ingested file suppressed"
    ),
)


@idempotent_function(
    data_keyword_argument="task",
    persistence_store=idempotency.persistence_layer(dynamodb),
    config=file_claims,
    key_prefix=idempotency.FILE_STEPS.key_prefix,
)
def ingest_file_once(
    *, task: s3_events.FileTask, margin: float, lambda_context: LambdaContext
) -> dict:
    context = ingest.StepContext(
        s3=s3,
        dynamodb=dynamodb,
        table_name=CONTACTS_TABLE_NAME,
        settings=ingest.Settings(GOODWILL_WAIT_SECONDS, SURVEY_ATTRIBUTES, datetime.now(UTC)),
        seconds_left=lambda: seconds_left(lambda_context),
        margin=margin,
        logger=logger,
    )
    result = ingest.ingest_file(task, context)
    metrics.add_metric(name=OUTCOME_METRICS[result.outcome], unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="RowsIngested", unit=MetricUnit.Count, value=result.rows_ok)
    metrics.add_metric(name="RowsSuperseded", unit=MetricUnit.Count, value=result.rows_superseded)
    metrics.add_metric(name="RowsRejected", unit=MetricUnit.Count, value=result.rows_rejected)
    logger.info("file outcome recorded", extra={"transition": "step_ended", **asdict(result)})
    return asdict(result)


def seconds_left(lambda_context: LambdaContext) -> float:
    return lambda_context.get_remaining_time_in_millis() / 1000


def record_handler(record: SQSRecord, lambda_context: LambdaContext, margin: float) -> None:
    try:
        tasks = s3_events.parse_message(record.body)
    except s3_events.NotAnS3Event as error:
        metrics.add_metric(name="MessagesRejected", unit=MetricUnit.Count, value=1)
        logger.error(
            "message is not an S3 event notification; acknowledged without processing",
            extra={"message_id": record.message_id, "reason": str(error)},
        )
        return
    for task in tasks:
        file_id = task.s3_object.file_id
        if seconds_left(lambda_context) < 2 * margin:
            # Too little time left to start it (a late file of a batch): a new invocation will.
            messaging.enqueue_continuation(sqs, INGEST_QUEUE_URL, task)
            metrics.add_metric(name="FilesDeferred", unit=MetricUnit.Count, value=1)
            logger.info("file deferred to a new invocation", extra={"file_id": file_id})
            continue
        try:
            result = ingest_file_once(task=task, margin=margin, lambda_context=lambda_context)
            if result["outcome"] == ingest.IN_PROGRESS:
                following = s3_events.FileTask(task.s3_object, result["next_line"], task.run)
                messaging.enqueue_continuation(sqs, INGEST_QUEUE_URL, following)
                # Here, not in the step: a step answered from its stored result continues too.
                age = datetime.now(UTC) - datetime.fromisoformat(result["run_started_at"])
                metrics.add_metric(
                    name="FileInProgressSeconds",
                    unit=MetricUnit.Seconds,
                    value=age.total_seconds(),
                )
                logger.info(
                    "file continues in a new invocation",
                    extra={"file_id": file_id, "run": task.run, "after_line": following.after_line},
                )
            elif result["outcome"] == ingest.OBSOLETE:
                logger.info(
                    "step of an earlier run of the file acknowledged as obsolete",
                    extra={"file_id": file_id, "run": task.run, "after_line": task.after_line},
                )
        except Exception:
            logger.exception("file failed; its message will be retried", extra={"file_id": file_id})
            raise


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    file_claims.register_lambda_context(context)
    margin = ingest.step_margin(seconds_left(context))
    return process_partial_response(
        event=event,
        record_handler=functools.partial(record_handler, margin=margin),
        processor=processor,
        context=context,
    )
