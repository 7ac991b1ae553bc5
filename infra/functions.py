"""The Lambda functions, their SQS triggers and each one's least-privilege grants."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from crawlstack import settings
from infra.config import LambdaAssets, StackConfig
from infra.queues import Queues
from infra.storage import Storage

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64

# Which queue feeds which function; a function left out has no event source (schedule: EventBridge
# Scheduler invokes it, infra.watch).
TRIGGERS = {spec.consumer: key for key, spec in settings.QUEUES.items()}
# Reserved concurrency: one scheduler at a time, a minute's invocation finding the last one still
# running is throttled (its claims are conditional writes anyway, so this saves work, not correctness).
RESERVED_CONCURRENCY = {"schedule": 1}
# Least privilege, per function.
SENDS = {
    "dispatch": ("frontier", "fetch"),  # re-queues to the frontier; run messages of the host runs it starts
    "fetch": ("fetch", "frontier"),  # wake-ups of its own runs; redirect targets to the frontier
    "extract": ("frontier",),  # discovered links; a check's next page
    "schedule": ("frontier",),  # the checks that fell due
}
# Tables each function reads and writes.
TABLE_ACCESS = {
    "dispatch": ("crawls", "urls", "hosts", "parked"),
    "fetch": ("crawls", "urls", "hosts", "parked"),
    # Merges page fields into resolved records; reads each page's depth from urls and writes a page's
    # failed extraction there (crawlstack.extract.outcomes).
    # And the watch: a checked page's items seen, the check's end (crawlstack.watch.pages).
    "extract": ("crawls", "results", "resolved", "urls", "watch"),
    # Plans, claims and settles checks in watch; the watch crawl's item in crawls.
    "schedule": ("watch", "crawls"),
}
# Tables each function only reads.
TABLE_READS: dict[str, tuple[str, ...]] = {
    "dispatch": ("resolved",),  # skips messages of complete records
    "fetch": ("resolved",),  # skips tasks of complete records
    "extract": (),
    "schedule": (),
}
# (read prefixes, write prefixes) in the bucket.
BUCKET_ACCESS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dispatch": ((), ()),
    "fetch": ((), (settings.PAGES_PREFIX, settings.CRAWL_LOG_PREFIX)),  # WARCs and the crawl log
    # Records, and the crawl-log line of a page whose extraction failed.
    # And the whole text of an event too large for EventBridge (settings.EVENT_MAX_BYTES).
    "extract": (
        (settings.PAGES_PREFIX,),
        (settings.RECORDS_PREFIX, settings.CRAWL_LOG_PREFIX, settings.EVENTS_PREFIX),
    ),
    # Each day's plan, written before it is applied and read back to finish one cut short.
    "schedule": ((settings.WATCH_PLANS_PREFIX,), (settings.WATCH_PLANS_PREFIX,)),
}


class Functions(Construct):
    """One function per ``settings.FUNCTIONS`` entry, keyed like it; a queue's consumer gets its trigger.

    All share one code asset (the ``crawlstack/`` and ``functions/`` modules the
    handlers import, and ``rules/``) and one layer with the third-party dependencies.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        assets: LambdaAssets,
        queues: Queues,
        storage: Storage,
        config: StackConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        code = lambda_.Code.from_asset(str(assets.code_dir))
        layers: list[lambda_.ILayerVersion] = []
        if assets.layer_dir is not None:
            self.layer: lambda_.LayerVersion | None = lambda_.LayerVersion(
                self,
                "Dependencies",
                code=lambda_.Code.from_asset(str(assets.layer_dir)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description="crawlstack third-party dependencies",
            )
            layers.append(self.layer)
        else:
            self.layer = None

        environment = {
            **{settings.ENV_QUEUE_URL[key]: queue.queue_url for key, queue in queues.queues.items()},
            **{settings.ENV_TABLE[key]: table.table_name for key, table in storage.tables.items()},
            settings.ENV_BUCKET: storage.bucket.bucket_name,
            settings.ENV_RULES_DIR: settings.LAMBDA_RULES_DIR,
            **config.crawl_environment(),
            "POWERTOOLS_METRICS_NAMESPACE": settings.METRICS_NAMESPACE,
        }

        self.functions: dict[str, lambda_.Function] = {}
        for key, spec in settings.FUNCTIONS.items():
            name = key.capitalize()
            log_group = logs.LogGroup(
                self,
                f"{name}Logs",
                removal_policy=RemovalPolicy.DESTROY,
            )
            # Days straight from context (already checked against CloudWatch's
            # allowed values); RetentionDays is an enum of names.
            cfn_log_group = log_group.node.default_child
            assert isinstance(cfn_log_group, logs.CfnLogGroup)
            cfn_log_group.retention_in_days = config.log_retention_days
            fn = lambda_.Function(
                self,
                name,
                description=f"{settings.APP_NAME} {key}",
                code=code,
                handler=spec.handler,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                layers=layers,
                timeout=Duration.seconds(spec.timeout_seconds),
                memory_size=config.memory_of(key),
                environment={**environment, "POWERTOOLS_SERVICE_NAME": key},
                logging_format=lambda_.LoggingFormat.JSON,
                application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
                system_log_level_v2=lambda_.SystemLogLevel.WARN,
                log_group=log_group,
                tracing=lambda_.Tracing.ACTIVE,
                # frontier -> dispatch -> fetch -> S3 -> extract -> frontier is
                # a loop by design; Lambda's recursive loop detection would stop
                # it after a few rounds.
                recursive_loop=lambda_.RecursiveLoop.ALLOW,
                reserved_concurrent_executions=RESERVED_CONCURRENCY.get(key),
            )
            self.functions[key] = fn

            queue_key = TRIGGERS.get(key)
            if queue_key is not None:
                fn.add_event_source(
                    sources.SqsEventSource(
                        queues[queue_key],
                        batch_size=settings.QUEUES[queue_key].batch_size,
                        max_batching_window=(
                            Duration.seconds(settings.QUEUES[queue_key].batching_window_seconds)
                            if settings.QUEUES[queue_key].batching_window_seconds
                            else None
                        ),
                        report_batch_item_failures=True,
                        max_concurrency=config.fetch_concurrency if key == "fetch" else None,
                    )
                )
            for send in SENDS[key]:
                queues[send].grant_send_messages(fn)
            for table in TABLE_ACCESS[key]:
                storage.tables[table].grant_read_write_data(fn)
            for table in TABLE_READS[key]:
                storage.tables[table].grant_read_data(fn)
            reads, writes = BUCKET_ACCESS[key]
            # iam.Grant with exact actions rather than bucket.grant_read/put,
            # whose action wildcards (s3:GetObject*, s3:List*, s3:Abort*)
            # allow more than one GET or PUT of an object.
            for prefix, action in [(p, "s3:GetObject") for p in reads] + [(p, "s3:PutObject") for p in writes]:
                iam.Grant.add_to_principal(
                    grantee=fn, actions=[action], resource_arns=[storage.bucket.arn_for_objects(f"{prefix}*")]
                )
