"""The AWS adapters: the only modules of the shared package that make AWS calls. Clients are
passed in, built once per execution environment by each handler.

table: ContactsTable (DynamoDB). files_bucket: the contacts files and their rejects reports in
ContactsBucket (S3). messaging: NotificationQueue and IngestQueue (SQS), NotificationsTopic and
ChangeTopic (SNS). table_changes: the fan-out consumers' events (the table's stream, or their
queue in fan-out modes pipe and router) as stream records, through Powertools' batch processing.
"""
