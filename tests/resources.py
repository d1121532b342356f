"""The stack's stores and queues as plain moto resources, for tests and the benchmark that run
handlers in-process (mock_aws). Keys and stream settings are those template.yaml gives them."""

from dataclasses import dataclass

import boto3

REGION = "us-east-1"


@dataclass
class Resources:
    bucket: str
    contacts_table: str
    idempotency_table: str
    ingest_queue_url: str
    notification_queue_url: str
    topic_arn: str
    topic_capture_url: str  # a queue subscribed to the topic with raw delivery

    def function_env(self) -> dict[str, str]:
        """The variables template.yaml hands the functions, pointing at these resources."""
        return {
            "CONTACTS_TABLE_NAME": self.contacts_table,
            "IDEMPOTENCY_TABLE_NAME": self.idempotency_table,
            "NOTIFICATION_QUEUE_URL": self.notification_queue_url,
            "NOTIFICATIONS_TOPIC_ARN": self.topic_arn,
        }


def create_resources(prefix: str = "") -> Resources:
    """Create the resources under moto (call inside mock_aws or against a moto server)."""
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName=f"{prefix}contacts",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    dynamodb.create_table(
        TableName=f"{prefix}idempotency",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    s3 = boto3.client("s3", region_name=REGION)
    bucket = f"{prefix}contacts-bucket"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    sqs = boto3.client("sqs", region_name=REGION)
    ingest_url = sqs.create_queue(QueueName=f"{prefix}ingest")["QueueUrl"]
    notification_url = sqs.create_queue(QueueName=f"{prefix}notifications")["QueueUrl"]
    capture_url = sqs.create_queue(QueueName=f"{prefix}topic-capture")["QueueUrl"]
    capture_arn = sqs.get_queue_attributes(QueueUrl=capture_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns = boto3.client("sns", region_name=REGION)
    topic_arn = sns.create_topic(Name=f"{prefix}notifications")["TopicArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=capture_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return Resources(
        bucket=bucket,
        contacts_table=f"{prefix}contacts",
        idempotency_table=f"{prefix}idempotency",
        ingest_queue_url=ingest_url,
        notification_queue_url=notification_url,
        topic_arn=topic_arn,
        topic_capture_url=capture_url,
    )
