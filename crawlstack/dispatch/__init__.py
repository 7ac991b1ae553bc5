"""Dispatch: frontier message -> canonical, in-scope, new, robots-allowed URL -> its host's backlog and run.

A chain of small components, as Scrapy's middlewares are, each in its own
module with a docstring naming its settings, each taking only the stores it
needs.  Each says what became of a link (a ``Decision``, whose ``kind``
classes a drop for the handler's metrics) or lets it go on to the next.  In
order:

1. ``Canonicalise``: a URL that cannot be crawled is dropped with its
   reason;
2. ``Scope``: a stopped crawl's message held; seed hosts (and a seed's
   port) registered; scope, then ports and trap shapes;
3. ``BudgetAndCaps.known_spent``: dropped at no write if this container saw
   the crawl's budget or the host's cap spent;
4. ``RecordComplete``: a message for a record already complete is skipped,
   before any robots.txt request and without taking the URL's claim;
5. ``Robots.load``: the origin's robots.txt if known yet (the host's run
   fetches it; ``crawlstack.fetch.host_loop``);
6. ``Dedupe``: the claim, a conditional put on the urls table;
7. ``Robots.check``: a disallow recorded as the claimed URL's outcome;
8. ``BudgetAndCaps.take``: the host's cap, then the page budget;
9. ``RunEnqueue``: the task gathered for its host's backlog; when the batch
   is sent (``flush_runs``), each host's tasks are written to its backlog
   and its run scheduled (``crawlstack.runs.admission``).

``Dispatcher`` composes them (``crawlstack.wiring`` builds each with its
stores); ``dispatch_in_turns`` takes a batch through it.

Each link is canonicalised at most once (``Link``): its canonical URL,
fingerprint and host are worked out when first asked and travel onward.  A
link extract found was canonicalised there (``crawlstack.urls.resolve_link``)
and its message says so (``FrontierMessage.canonical``); it is trusted once
its URL passes a cheap check of its shape (``urls.looks_canonical``), and is
not canonicalised again.  No fingerprint travels: it is a hash of the URL,
recomputed, so none can disagree with its URL.  Every other message (a
user's seed, a redirect target, a link sent before the flag existed) is
canonicalised once.
"""

from crawlstack.dispatch.canonicalise import Canonicalise
from crawlstack.dispatch.caps import BudgetAndCaps
from crawlstack.dispatch.chain import Chain, Step
from crawlstack.dispatch.dedupe import Dedupe
from crawlstack.dispatch.dispatcher import Dispatcher
from crawlstack.dispatch.drops import DropNotes, NotedDrops
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import RobotsCache, ScopeRecords
from crawlstack.dispatch.records import RecordComplete
from crawlstack.dispatch.robots import ROBOTS_MISS_SECONDS, Robots
from crawlstack.dispatch.run_enqueue import RunEnqueue, flush_runs
from crawlstack.dispatch.scope import Scope
from crawlstack.dispatch.turns import dispatch_in_turns
from crawlstack.ports import Crawls, Urls

__all__ = [
    "ROBOTS_MISS_SECONDS",
    "BudgetAndCaps",
    "Canonicalise",
    "Chain",
    "Crawls",
    "Decision",
    "Dedupe",
    "Dispatcher",
    "DropNotes",
    "Link",
    "NotedDrops",
    "Outbox",
    "RecordComplete",
    "Robots",
    "RobotsCache",
    "RunEnqueue",
    "Scope",
    "ScopeRecords",
    "Step",
    "Urls",
    "dispatch_in_turns",
    "flush_runs",
]
