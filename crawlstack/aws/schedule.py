"""The watch's schedule (EventBridge Scheduler), as ``crawlstack status`` shows it."""

from __future__ import annotations

from crawlstack.aws.connection import Connection
from crawlstack.aws.errors import aws_errors


def schedule_state(connection: Connection, name: str) -> tuple[str, str]:
    """The schedule's state (ENABLED or DISABLED) and expression; a failure is one line."""
    with aws_errors(f"schedule {name}"):
        found = connection.client("scheduler").get_schedule(Name=name)
    return str(found.get("State", "")), str(found.get("ScheduleExpression", ""))
