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
# Watch alarms look at five minutes: the scheduler ticks once a minute, so a tick or two failing
# now and then holds the alarm rather than flipping it with each tick.
WATCH_ALARM_PERIOD = Duration.minutes(5)
# The schedule function's throttles are by design: a tick finding the last one still running is
# throttled (reserved concurrency 1, infra.functions) and dropped; the due-check alarm watches
# what it costs.  Its errors alarm over WATCH_ALARM_PERIOD.
NO_THROTTLES_ALARM = frozenset({"schedule"})
ERRORS_PERIOD = {"schedule": WATCH_ALARM_PERIOD}
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
# The watch's EMF metrics (functions/schedule and extract's checked pages); the alarms and the
# watch's widgets read them.
CHECKS_SENT = ("schedule", "ChecksSent", "checks sent")
CHECKS_PLANNED = ("schedule", "ChecksPlanned", "checks planned")
# Checks sent that no extract ended (robots.txt said no, the fetch failed), ended by the scheduler.
CHECKS_SETTLED = ("schedule", "ChecksSettled", "checks settled unfinished")
# Age of the oldest planned check due but still unsent; 0 when none, emitted by every tick.
OLDEST_DUE_CHECK = ("schedule", "OldestDueCheckAgeSeconds", "oldest due check (s)")
CHECK_PAGES = ("extract", "CheckPages", "checked pages")
CHECK_PAGES_NOT_MODIFIED = ("extract", "CheckPagesNotModified", "checked pages not modified (304)")
NEW_ITEMS = ("extract", "NewItems", "new items")
EVENTS_PUBLISHED = ("extract", "EventsPublished", "events published")
EVENTS_OVERSIZE = ("extract", "EventsOversize", "events too large (in the bucket)")
WATCH_METRICS = (
    CHECKS_SENT,
    CHECKS_PLANNED,
    CHECKS_SETTLED,
    OLDEST_DUE_CHECK,
    CHECK_PAGES,
    CHECK_PAGES_NOT_MODIFIED,
    NEW_ITEMS,
    EVENTS_PUBLISHED,
    EVENTS_OVERSIZE,
)
CHECKS_TITLE = "Checks per minute"
NEW_ITEMS_TITLE = "New items per minute"
NOT_MODIFIED_TITLE = "Share of 304s among checked pages (%)"


def emf_metric(service: str, name: str, label: str, *, statistic: str = "Sum", period: Duration = PERIOD) -> cw.Metric:
    return cw.Metric(
        namespace=settings.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
        label=label,
    )


class Monitoring(Construct):
    """One dashboard, and alarms on every DLQ's depth, every function's errors and throttles, and the watch.

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
            watched = [("Errors", fn.metric_errors(period=ERRORS_PERIOD.get(key, PERIOD), statistic="Sum"))]
            if key not in NO_THROTTLES_ALARM:
                watched.append(("Throttles", fn.metric_throttles(period=PERIOD, statistic="Sum")))
            for what, metric in watched:
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
        # No data is breaching: every tick emits the metric (0 when nothing is due), so none
        # for five minutes means the scheduler is not running.
        self.due_checks_alarm = cw.Alarm(
            self,
            "DueChecksUnsent",
            alarm_description=f"A watched source's check fell due over {settings.WATCH_DUE_ALARM_SECONDS} s ago "
            "and is still unsent, or the schedule function has stopped ticking",
            metric=emf_metric(*OLDEST_DUE_CHECK, statistic="Maximum", period=WATCH_ALARM_PERIOD),
            threshold=settings.WATCH_DUE_ALARM_SECONDS,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.BREACHING,
        )
        self.alarms.append(self.due_checks_alarm)

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
        self.dashboard.add_widgets(*watch_widgets())


def watch_widgets() -> list[cw.IWidget]:
    """Checks sent (and how late the oldest due one is), new items and their events, and the share of 304s."""
    share_period = Duration.minutes(5)
    return [
        cw.GraphWidget(
            title=CHECKS_TITLE,
            left=[emf_metric(*CHECKS_SENT), emf_metric(*CHECKS_PLANNED), emf_metric(*CHECKS_SETTLED)],
            right=[emf_metric(*OLDEST_DUE_CHECK, statistic="Maximum")],
            width=8,
        ),
        cw.GraphWidget(
            title=NEW_ITEMS_TITLE,
            left=[emf_metric(*NEW_ITEMS), emf_metric(*EVENTS_PUBLISHED), emf_metric(*EVENTS_OVERSIZE)],
            width=8,
        ),
        cw.GraphWidget(
            title=NOT_MODIFIED_TITLE,
            left=[
                cw.MathExpression(
                    expression="100 * notmod / pages",
                    using_metrics={
                        "notmod": emf_metric(*CHECK_PAGES_NOT_MODIFIED, period=share_period),
                        "pages": emf_metric(*CHECK_PAGES, period=share_period),
                    },
                    period=share_period,
                    label="304s (%)",
                )
            ],
            left_y_axis=cw.YAxisProps(min=0, max=100),
            period=share_period,
            width=8,
        ),
    ]
