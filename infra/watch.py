"""Watching sources, deployed: the event bus new items go to, and the schedule that ticks the scheduler.

``functions/schedule`` is fed by no queue: an EventBridge Scheduler schedule
invokes it every ``settings.SCHEDULE_RATE_MINUTES`` minute(s) to plan the
day's checks and send the due ones to the frontier.  Extract publishes each
new item of a checked page to the bus (``settings.EVENT_SOURCE``,
``settings.EVENT_DETAIL_TYPE``), where rules of the user's own route them on.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from crawlstack import settings
from infra.functions import Functions

SCHEDULE_FUNCTION = "schedule"
# The next tick does a missed tick's work, so neither Scheduler nor Lambda
# retries one: a retry would only overlap the next tick (and be throttled by
# its reserved concurrency of 1).  60 s is the least event age either allows.
MAX_EVENT_AGE = Duration.seconds(60)


class Watch(Construct):
    """The items bus (every function is told its name) and the schedule invoking the schedule function.

    The schedule has its own role, assumable by EventBridge Scheduler of this
    account only, allowed exactly ``lambda:InvokeFunction`` on the schedule
    function (unqualified: no version or alias is ever invoked).  Extract may
    ``events:PutEvents`` on this bus alone.
    """

    def __init__(self, scope: Construct, construct_id: str, *, functions: Functions, checks_per_day: int) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(self, "Items", description=f"{settings.APP_NAME}: new items of watched sources")
        for fn in functions.functions.values():
            fn.add_environment(settings.ENV_EVENT_BUS, self.bus.event_bus_name)
        self.bus.grant_put_events_to(functions.functions["extract"])

        self.function = functions.functions[SCHEDULE_FUNCTION]
        self.function.add_environment(settings.ENV_WATCH_CHECKS_PER_DAY, str(checks_per_day))
        # Scheduler invokes asynchronously: a tick throttled behind a running one is
        # dropped after a minute, not queued for Lambda's default six hours of retries.
        self.function.configure_async_invoke(max_event_age=MAX_EVENT_AGE, retry_attempts=0)

        self.role = iam.Role(
            self,
            "SchedulerRole",
            description=f"{settings.APP_NAME}: EventBridge Scheduler invokes the schedule function",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            inline_policies={
                "InvokeSchedule": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.function.function_arn])
                    ]
                )
            },
        )
        self.schedule = scheduler.CfnSchedule(
            self,
            "Tick",
            description=f"{settings.APP_NAME}: plan and send the watched sources' checks",
            schedule_expression=rate_expression(settings.SCHEDULE_RATE_MINUTES),
            # On the minute: a flexible window would only spread one invocation.
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.function.function_arn,
                role_arn=self.role.role_arn,
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_retry_attempts=0,
                    maximum_event_age_in_seconds=int(MAX_EVENT_AGE.to_seconds()),
                ),
            ),
        )


def rate_expression(minutes: int) -> str:
    """Scheduler's rate expression: the unit is singular for 1 (``rate(1 minute)``), plural else."""
    return f"rate({minutes} minute{'' if minutes == 1 else 's'})"
