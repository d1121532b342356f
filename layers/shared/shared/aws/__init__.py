"""The AWS adapters: the only modules of the shared package that make AWS calls. Clients are
passed in, built once per execution environment by each handler.

table: ContactsTable (DynamoDB). files_bucket: the contacts files and their rejects reports in
ContactsBucket (S3). messaging: NotificationQueue and IngestQueue (SQS), NotificationsTopic and
ChangeTopic (SNS). mail: SES. batch_claims and send_claims: Powertools' idempotency records
around a batch's effects (DynamoDB). The batches themselves (Powertools' batch processing, no AWS
call of its own) are shared.batches.
"""
