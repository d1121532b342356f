"""Shared code of the contact-center functions, shipped as the SharedLayer.

Pure (no I/O): model, keys, rules, files, s3_events.
Domain steps over those (no AWS I/O of their own): ingest, contacts, gift_cards, notifications.
The one Powertools idempotency configuration: idempotency.
Adapters, the only AWS I/O (clients passed in, built once by each handler): the shared.aws
package: table (DynamoDB), files_bucket (S3), messaging (SQS/SNS), table_changes (the
consumers' stream or queue events as stream records).
"""
