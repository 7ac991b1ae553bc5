"""Local mode's embedded backend: the stores' ports on one SQLite file and a directory (issue 15).

``db.StateDb`` is the file and its one connection; each store is a module
of its own, as the AWS adapters are (``crawlstack.aws``), and runs the same
conformance suite as its AWS counterpart (``tests/integration/*``).
``blobs.FileBlobs`` is the pages bucket as files.
"""

from crawlstack.local.sqlite.backlog import SqliteBacklog
from crawlstack.local.sqlite.blobs import FileBlobs, LocalBlobs
from crawlstack.local.sqlite.crawls import SqliteCrawls
from crawlstack.local.sqlite.db import StateDb
from crawlstack.local.sqlite.held import SqliteHeld
from crawlstack.local.sqlite.hosts import SqliteHosts
from crawlstack.local.sqlite.journal import SqliteJournal
from crawlstack.local.sqlite.queues import SqliteQueue
from crawlstack.local.sqlite.resolved import SqliteResolved
from crawlstack.local.sqlite.results import SqliteResults
from crawlstack.local.sqlite.runs import SqliteRuns
from crawlstack.local.sqlite.scope import SqliteScope
from crawlstack.local.sqlite.urls import SqliteUrls

__all__ = [
    "FileBlobs",
    "LocalBlobs",
    "SqliteBacklog",
    "SqliteCrawls",
    "SqliteHeld",
    "SqliteHosts",
    "SqliteJournal",
    "SqliteQueue",
    "SqliteResolved",
    "SqliteResults",
    "SqliteRuns",
    "SqliteScope",
    "SqliteUrls",
    "StateDb",
]
