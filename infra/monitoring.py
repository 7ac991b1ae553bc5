"""CloudWatch dashboard and alarms for the crawl pipeline."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from crawlstack import settings
from infra.functions import Functions
from infra.queues import Queues

PERIOD = Duration.minutes(1)
# EMF metrics the handlers emit (functions/*/handler.py), by the service
# dimension Powertools adds: (service, metric name, label).
PIPELINE_METRICS = (
    ("fetch", "PagesFetched", "pages fetched"),
    ("fetch", "PagesSkipped", "pages skipped"),
    ("fetch", "FetchFailures", "fetch failures"),
    ("dispatch", "RobotsBlocked", "robots-blocked"),
    ("extract", "RecordsExtracted", "records extracted"),
    ("extract", "OutlinksFound", "outlinks found"),
    # The hostile web, at a glance: servers failing, traps and refused ports, damaged archives.
    ("fetch", "FetchRetries", "fetch retries"),
    ("dispatch", "UrlsTrapped", "trap URLs dropped"),
    ("dispatch", "UrlsPortRefused", "ports refused"),
    ("extract", "UnreadableWarcs", "unreadable WARCs"),
    ("extract", "PagesFailedExtraction", "pages failed extraction"),
)


def emf_metric(service: str, name: str, label: str) -> cw.Metric:
    return cw.Metric(
        namespace=settings.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic="Sum",
        period=PERIOD,
        label=label,
    )


class Monitoring(Construct):
    """One dashboard, and alarms on every DLQ's depth and every function's errors and throttles.

    Every alarm notifies one SNS topic (output ``AlarmTopicArn``); context
    ``crawlstack:alarm_email`` subscribes an address to it, or subscribe
    anything else to the topic after deploying.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queues: Queues,
        functions: Functions,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Alarms", display_name=f"{settings.APP_NAME} alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(alarm_email))
        self.alarms: list[cw.Alarm] = []
        for key, dlq in queues.dlqs.items():
            self.alarms.append(
                cw.Alarm(
                    self,
                    f"{key.capitalize()}DlqNotEmpty",
                    alarm_description=f"Messages of the {key} queue were dead-lettered: see `crawlstack dlq show`",
                    metric=dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                    threshold=0,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=1,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                )
            )
        for key, fn in functions.functions.items():
            for what, metric in (
                ("Errors", fn.metric_errors(period=PERIOD, statistic="Sum")),
                ("Throttles", fn.metric_throttles(period=PERIOD, statistic="Sum")),
            ):
                self.alarms.append(
                    cw.Alarm(
                        self,
                        f"{key.capitalize()}{what}",
                        alarm_description=f"The {key} function reported {what.lower()}",
                        metric=metric,
                        threshold=0,
                        comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        evaluation_periods=1,
                        treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                    )
                )

        for alarm in self.alarms:
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        queue_depth = [
            q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum", label=key)
            for key, q in queues.queues.items()
        ]
        in_flight = [
            q.metric_approximate_number_of_messages_not_visible(period=PERIOD, statistic="Maximum", label=key)
            for key, q in queues.queues.items()
        ]
        oldest = [
            q.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum", label=key)
            for key, q in queues.queues.items()
        ]
        dlq_depth = [
            q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum", label=f"{key} DLQ")
            for key, q in queues.dlqs.items()
        ]
        fns = functions.functions.items()
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Queue depth (visible)", left=queue_depth, width=8),
            cw.GraphWidget(title="In flight", left=in_flight, width=8),
            cw.GraphWidget(title="Oldest message age (s)", left=oldest, width=8),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Pipeline per minute",
                left=[emf_metric(*m) for m in PIPELINE_METRICS],
                width=12,
            ),
            cw.GraphWidget(title="Dead-letter queues", left=dlq_depth, width=12),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Function errors and throttles",
                left=[fn.metric_errors(period=PERIOD, statistic="Sum", label=f"{k} errors") for k, fn in fns],
                right=[fn.metric_throttles(period=PERIOD, statistic="Sum", label=f"{k} throttles") for k, fn in fns],
                width=12,
            ),
            cw.GraphWidget(
                title="Duration p95 (ms)",
                left=[fn.metric_duration(period=PERIOD, statistic="p95", label=k) for k, fn in fns],
                width=12,
            ),
        )
