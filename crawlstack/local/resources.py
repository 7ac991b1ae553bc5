"""Creates the stack's queues, tables and bucket on an emulator, from crawlstack.settings.

The same specs the CDK constructs are built from; handlers then find the
names in the same environment variables the stack sets.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from crawlstack import aws, settings
from crawlstack.aws import names

# The stack's bus is named by CloudFormation; an emulator's gets this name.
EVENT_BUS_NAME = "crawlstack-items"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def create_all(
    visibility_timeout: int | None = None, exist_ok: bool = False, connection: aws.Connection = aws.ENVIRONMENT
) -> dict[str, str]:
    """Create everything through ``connection``; returns the environment variables that name it.

    ``visibility_timeout`` overrides the queues' (local mode uses a short one
    so a failed batch comes back in seconds, not minutes).  ``exist_ok``
    keeps resources an external endpoint already has.
    """
    sqs = connection.client("sqs")
    ddb = connection.client("dynamodb")
    s3 = connection.client("s3")
    env: dict[str, str] = {}

    try:
        s3.create_bucket(Bucket=settings.BUCKET_NAME)
    except ClientError as exc:
        if not (exist_ok and _code(exc) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")):
            raise
    env[settings.ENV_BUCKET] = settings.BUCKET_NAME

    for queue in settings.QUEUES.values():
        dlq_url = sqs.create_queue(QueueName=queue.dlq_name)["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        timeout = visibility_timeout if visibility_timeout is not None else queue.visibility_timeout_seconds
        url = sqs.create_queue(
            QueueName=queue.name,
            Attributes={
                "VisibilityTimeout": str(timeout),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count}
                ),
            },
        )["QueueUrl"]
        env[settings.ENV_QUEUE_URL[queue.key]] = url
        env[names.dlq_env(queue.key)] = dlq_url

    extract_url = env[settings.ENV_QUEUE_URL["extract"]]
    extract_arn = sqs.get_queue_attributes(QueueUrl=extract_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=settings.BUCKET_NAME,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": extract_arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {
                        "Key": {
                            "FilterRules": [
                                {"Name": "prefix", "Value": settings.PAGES_PREFIX},
                                {"Name": "suffix", "Value": ".warc.gz"},
                            ]
                        }
                    },
                }
            ]
        },
    )

    for table in settings.TABLES.values():
        keys: list[dict[str, Any]] = [{"AttributeName": table.partition_key, "KeyType": "HASH"}]
        attrs = [{"AttributeName": table.partition_key, "AttributeType": "S"}]
        if table.sort_key:
            keys.append({"AttributeName": table.sort_key, "KeyType": "RANGE"})
            attrs.append({"AttributeName": table.sort_key, "AttributeType": "S"})
        try:
            ddb.create_table(
                TableName=table.name, KeySchema=keys, AttributeDefinitions=attrs, BillingMode="PAY_PER_REQUEST"
            )
        except ClientError as exc:
            if not (exist_ok and _code(exc) == "ResourceInUseException"):
                raise
        env[settings.ENV_TABLE[table.key]] = table.name

    try:
        connection.client("events").create_event_bus(Name=EVENT_BUS_NAME)
    except ClientError as exc:
        if not (exist_ok and _code(exc) == "ResourceAlreadyExistsException"):
            raise
    env[settings.ENV_EVENT_BUS] = EVENT_BUS_NAME
    return env
