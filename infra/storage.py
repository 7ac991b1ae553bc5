"""The pages bucket and the DynamoDB tables."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from crawlstack import settings

WARC_SUFFIX = ".warc.gz"
ACCESS_LOG_DAYS = 90


class Storage(Construct):
    """Bucket for fetched pages (WARC) and extracted records, plus the tables.

    Every new ``pages/*.warc.gz`` object is announced to ``extract_queue``
    (S3 -> SQS -> extract Lambda), which gives extraction batching, retries,
    a DLQ and partial batch failures.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        extract_queue: sqs.IQueue,
        page_retention_days: int,
        retain_data: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY

        # Server access logs of the pages bucket: who read or wrote what.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=removal,
            auto_delete_objects=not retain_data,
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(ACCESS_LOG_DAYS))],
        )
        self.bucket = s3.Bucket(
            self,
            "Pages",
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="pages-bucket/",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=removal,
            auto_delete_objects=not retain_data,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-pages",
                    prefix=settings.PAGES_PREFIX,
                    expiration=Duration.days(page_retention_days),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
        )
        self.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.SqsDestination(extract_queue),
            s3.NotificationKeyFilter(prefix=settings.PAGES_PREFIX, suffix=WARC_SUFFIX),
        )

        self.tables: dict[str, dynamodb.Table] = {}
        for key, spec in settings.TABLES.items():
            self.tables[key] = dynamodb.Table(
                self,
                f"{spec.stem}Table",
                partition_key=dynamodb.Attribute(name=spec.partition_key, type=dynamodb.AttributeType.STRING),
                sort_key=(
                    dynamodb.Attribute(name=spec.sort_key, type=dynamodb.AttributeType.STRING)
                    if spec.sort_key
                    else None
                ),
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=spec.ttl_attribute,
                removal_policy=removal,
            )
