"""cdk-nag AwsSolutions suppressions, each with its reason and as narrow as cdk-nag allows.

``app.py`` runs ``AwsSolutionsChecks`` at every synth; an unsuppressed
error fails the synth.  Suppressions name the finding (``applies_to``) where
the rule reports one, and the resource path, never the whole stack.
"""

from __future__ import annotations

from aws_cdk import Stack
from cdk_nag import NagPackSuppression, NagSuppressions

from infra.functions import Functions

BASIC_EXECUTION_ROLE = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
# Object ARNs of the pages bucket under one prefix of infra.functions.BUCKET_ACCESS:
# <StoragePagesXXXX.Arn>/pages/*, .../watch/plans/* and so on.
PREFIX_OBJECTS = r"/^Resource::<StoragePages[0-9A-F]{8}\.Arn>\/(pages|records|crawl-log|events|watch\/plans)\/\*$/g"


def suppress(stack: Stack, *, functions: Functions) -> None:
    for fn in functions.functions.values():
        NagSuppressions.add_resource_suppressions(
            fn.role,  # type: ignore[arg-type]
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AWSLambdaBasicExecutionRole only lets the function write its own CloudWatch Logs "
                    "(CreateLogGroup, CreateLogStream, PutLogEvents); it is what Lambda documents for that.",
                    applies_to=[BASIC_EXECUTION_ROLE],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level "
                    "permissions: Resource '*' is the only form (Tracing.ACTIVE).",
                    applies_to=["Resource::*"],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Object ARNs under one key prefix of the stack's own bucket, with one exact action "
                    "(s3:GetObject or s3:PutObject): object keys are made per batch, so they cannot be listed.",
                    applies_to=[{"regex": PREFIX_OBJECTS}],  # type: ignore[list-item]
                ),
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            fn,
            [
                NagPackSuppression(
                    id="AwsSolutions-L1",
                    reason="Pinned to settings.LAMBDA_PYTHON_VERSION (3.12), the version the dependency layer's "
                    "wheels are built for by scripts/build_lambda.py; the two move together.",
                )
            ],
        )
    # CDK's own singleton behind bucket.add_event_notification.
    NagSuppressions.add_resource_suppressions_by_path(
        stack,
        f"/{stack.stack_name}/BucketNotificationsHandler050a0587b7544547bf325f094a3db834/Role/Resource",
        [
            NagPackSuppression(
                id="AwsSolutions-IAM4",
                reason="CDK's bucket-notifications custom resource (one call at deploy time) uses only "
                "AWSLambdaBasicExecutionRole for its logs.",
                applies_to=[BASIC_EXECUTION_ROLE],
            ),
        ],
    )
