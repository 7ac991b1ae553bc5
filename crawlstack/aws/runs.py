"""The hosts table's run items (kind "run"): the ``Runs`` port (``crawlstack.runs.ports``) on DynamoDB.

Every change is one conditional UpdateItem; the port's docstring says which
race each condition closes.  A call whose reply is lost is sent again by
botocore and meets its own write; each method reads that as success:

* ``schedule``: the run id is new for each call, so it is the call's token:
  a failed condition on an item that already holds our ``run_id`` (returned
  by ``ReturnValuesOnConditionCheckFailure``) was our own write.
* ``lease``: the retry passes its condition through ``holder = :me``; the
  item it returns (``ALL_OLD``) then shows our own lease, not what was there
  before the first attempt (``Runs.lease`` says what the caller makes of it).
* ``renew``: the retry passes through ``holder = :me`` and writes the same values.
* ``release``: the first attempt removed ``holder``, so the retry fails its
  condition; the release leaves ``released_by = :me`` (cleared by the next
  ``lease``), and a failed condition on an item holding it was our release.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.runs.ports import HostRun
from crawlstack.settings import RUN_GRACE_SECONDS

KIND = "run"


class RunStore:
    """One run item per host on the hosts table (key ``{"host": host, "kind": "run"}``)."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    @staticmethod
    def _key(host: str) -> dict[str, Any]:
        return clients.key(host=host, kind=KIND)

    def _update(self, host: str, **request: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One conditional UpdateItem: (its returned attributes, None), or (None, the item it failed on)."""
        try:
            resp = self.connection.client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if not clients.is_conditional_failure(exc):
                raise
            return None, clients.failed_item(exc) or {}
        return resp.get("Attributes") or {}, None

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        _, failed = self._update(
            host,
            UpdateExpression="SET run_id = :rid, run_expires = :exp",
            ConditionExpression="attribute_not_exists(run_id) OR run_expires < :now",
            ExpressionAttributeValues=clients.values(rid=run_id, exp=expires, now=now),
        )
        return failed is None or clients.attribute(failed, "run_id") == run_id

    def lease(self, host: str, run_id: str, holder: str, now: float, until: float) -> HostRun | None:
        before, _ = self._update(
            host,
            UpdateExpression="SET holder = :me, lease_until = :until, run_expires = :exp REMOVE released_by",
            ConditionExpression="run_id = :rid AND "
            "(attribute_not_exists(holder) OR holder = :me OR lease_until <= :now)",
            ExpressionAttributeValues=clients.values(
                rid=run_id, me=holder, until=until, exp=until + RUN_GRACE_SECONDS, now=now
            ),
            ReturnValues="ALL_OLD",
        )
        return None if before is None else _run_from(host, before)

    def renew(self, host: str, holder: str, until: float, last_start: float) -> bool:
        done, _ = self._update(
            host,
            UpdateExpression="SET lease_until = :until, last_start = :ls, run_expires = :exp",
            ConditionExpression="holder = :me",
            ExpressionAttributeValues=clients.values(
                me=holder, until=until, ls=last_start, exp=until + RUN_GRACE_SECONDS
            ),
        )
        return done is not None

    def release(
        self,
        host: str,
        holder: str,
        last_start: float,
        pause_until: float,
        adaptive_delay: float | None,
        next_run: str | None,
        expires: float = 0.0,
    ) -> bool:
        values: dict[str, Any] = {"me": holder, "ls": last_start, "p": pause_until}
        sets = ["last_start = :ls", "pause_until = :p", "released_by = :me"]
        removes = ["holder", "lease_until"]
        if adaptive_delay is None:
            removes.append("adaptive_delay")
        else:
            sets.append("adaptive_delay = :ad")
            values["ad"] = adaptive_delay
        if next_run is None:
            removes += ["run_id", "run_expires"]
        else:
            sets += ["run_id = :rid", "run_expires = :exp"]
            values.update(rid=next_run, exp=expires)
        done, failed = self._update(
            host,
            UpdateExpression=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            ConditionExpression="holder = :me",
            ExpressionAttributeValues=clients.values(**values),
        )
        return done is not None or (
            failed is not None and "holder" not in failed and clients.attribute(failed, "released_by") == holder
        )

    def get(self, host: str) -> HostRun:
        item = (
            self.connection.client("dynamodb")
            .get_item(TableName=self.name, Key=self._key(host), ConsistentRead=True)
            .get("Item")
        )
        return _run_from(host, item or {})


def _run_from(host: str, item: dict[str, Any]) -> HostRun:
    data = clients.unmarshal(item)

    def number(name: str) -> float | None:
        return float(data[name]) if name in data else None

    return HostRun(
        host=host,
        run_id=data.get("run_id"),
        run_expires=number("run_expires") or 0.0,
        holder=data.get("holder"),
        lease_until=number("lease_until") or 0.0,
        last_start=number("last_start") or 0.0,
        pause_until=number("pause_until") or 0.0,
        adaptive_delay=number("adaptive_delay"),
    )
