"""Shared code of the contact-center functions, shipped as the SharedLayer.

Pure (no I/O): model, keys, rules, files, s3_events.
Domain steps over those (no AWS I/O of their own): ingest, contacts, gift_cards, notifications,
mail.
The one Powertools idempotency configuration: idempotency.
The functions' batches through Powertools' batch processing (no AWS call of their own): the
shared.batches package: table_changes (the consumers' stream or queue events as stream records),
sends (what a batch's records send, in as few calls as the service allows).
Adapters, the only AWS I/O (clients passed in, built once by each handler): the shared.aws
package: table (DynamoDB), files_bucket (S3), messaging (SQS/SNS), mail (SES), batch_claims and
send_claims (idempotency records).
"""
