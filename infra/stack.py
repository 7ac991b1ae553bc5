"""``CrawlstackStack``: queues, storage, functions, watch, monitoring, analytics, and the outputs the CLI reads."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from crawlstack import settings
from infra.analytics import Analytics
from infra.config import LambdaAssets, StackConfig
from infra.functions import Functions
from infra.monitoring import Monitoring
from infra.nag import suppress
from infra.queues import Queues
from infra.storage import Storage
from infra.watch import Watch


class CrawlstackStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        assets: LambdaAssets,
        config: StackConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config or StackConfig.from_context(self.node)

        self.queues = Queues(self, "Queues")
        self.storage = Storage(
            self,
            "Storage",
            extract_queue=self.queues["extract"],
            page_retention_days=self.config.page_retention_days,
            retain_data=self.config.retain_data,
        )
        self.functions = Functions(
            self, "Functions", assets=assets, queues=self.queues, storage=self.storage, config=self.config
        )
        self.watch = Watch(self, "Watch", functions=self.functions, checks_per_day=self.config.watch_checks_per_day)
        self.analytics = Analytics(self, "Analytics", bucket=self.storage.bucket)
        self.monitoring = Monitoring(
            self, "Monitoring", queues=self.queues, functions=self.functions, alarm_email=self.config.alarm_email
        )
        suppress(self, functions=self.functions)

        for key, queue in self.queues.queues.items():
            CfnOutput(self, settings.OUTPUT_QUEUE_URL[key], value=queue.queue_url)
            CfnOutput(self, settings.OUTPUT_DLQ_URL[key], value=self.queues.dlqs[key].queue_url)
        for key, table in self.storage.tables.items():
            CfnOutput(self, settings.OUTPUT_TABLE[key], value=table.table_name)
        CfnOutput(self, settings.OUTPUT_BUCKET, value=self.storage.bucket.bucket_name)
        CfnOutput(self, settings.OUTPUT_DASHBOARD, value=self.monitoring.dashboard.dashboard_name)
        CfnOutput(self, settings.OUTPUT_ALARM_TOPIC, value=self.monitoring.topic.topic_arn)
        CfnOutput(self, settings.OUTPUT_WORKGROUP, value=self.analytics.workgroup.ref)
        CfnOutput(self, settings.OUTPUT_GLUE_DATABASE, value=self.analytics.database_name)
        CfnOutput(self, settings.OUTPUT_EVENT_BUS, value=self.watch.bus.event_bus_name)
        CfnOutput(self, settings.OUTPUT_SCHEDULE, value=self.watch.schedule.ref)
        for key, fn in self.functions.functions.items():
            CfnOutput(self, settings.OUTPUT_FUNCTION[key], value=fn.function_name)
