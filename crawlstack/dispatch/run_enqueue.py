"""RunEnqueue: the fetch task, gathered for its host's run, whose backlog it waits in.

The task carries the link's canonical URL, fingerprint and host; it has
no slot (``not_before`` 0) and no delay: the host's run spaces its
requests, by the crawl's delay or a longer robots.txt ``Crawl-delay``,
worked out at each request.  It goes to the batch's ``outbox.runs``,
and ``flush_runs``, when the batch is sent, writes each host's tasks to its
backlog, a bundle per depth, and schedules its run
(``crawlstack.runs.admission``), sending the run messages of the runs it
started.  A stopped crawl's messages are held before this (``Scope``); a
crawl stopped once its tasks wait is the run's to skip.

Settings: admission's own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.runs.admission import admit_and_send, new_run_id
from crawlstack.runs.ports import Backlog, Runs


class RunEnqueue:
    def __call__(self, link: Link, outbox: Outbox) -> Decision:
        msg = link.msg
        task = FetchTask(
            url=link.url,
            fp=link.fp,
            host=link.host,
            depth=msg.depth,
            crawl_id=msg.crawl_id,
            not_before=0.0,
            hops=msg.hops,
            referrer=msg.referrer,
            record_id=msg.record_id,
            want=msg.want,
            check=json.dumps(msg.check.to_dict(), sort_keys=True) if msg.check is not None else None,
        )
        outbox.runs.add(task, link.message_id)
        return Decision(link.url, "queued")


def flush_runs(
    outbox: Outbox,
    backlog: Backlog,
    runs: Runs,
    send: Callable[[list[RunMessage]], None],
    clock: Callable[[], float] = time.time,
    new_run_id: Callable[[], str] = new_run_id,
) -> list[RunMessage]:
    """Admit the batch's gathered tasks and send the run messages of the runs started; those messages.

    On a failure the runs already won are sent before ``AdmissionFailed``
    propagates; the batch then fails and is redelivered
    (``crawlstack.runs.admission``).  ``outbox.runs`` is left as it was:
    ``Outbox.clear`` forgets it.
    """
    if not outbox.runs:
        return []
    return admit_and_send(outbox.runs, backlog, runs, clock(), send, new_run_id)
