"""Small adapters over SQS, DynamoDB and S3; the only package that imports boto3.

One module per table, queue or bucket, on the shared connection
(``connection``) and helpers (``clients``).  ``from crawlstack import aws`` gives every adapter by name; each
takes its table, queue URL or bucket in its constructor, from the one
``StackNames`` its caller read (``StackNames.from_env``), and the
``Connection`` its calls go through (keyword ``connection``, by default
``ENVIRONMENT``: the environment's region, credentials and endpoint).
"""

from __future__ import annotations

from crawlstack.aws.backlog import BacklogStore
from crawlstack.aws.blobs import BlobStore
from crawlstack.aws.clients import NOTE_MAX_CHARS, WRITE_TOKEN, marshal, marshal_exact, new_token, unmarshal
from crawlstack.aws.connection import ENVIRONMENT, Connection, Credentials, client, reset_clients
from crawlstack.aws.crawls import CrawlStore
from crawlstack.aws.events import EventBus, PublishFailed
from crawlstack.aws.held import HeldStore
from crawlstack.aws.hosts import HostStore
from crawlstack.aws.names import StackNames
from crawlstack.aws.queues import Queue, SendFailed
from crawlstack.aws.resolved import ResolvedStore
from crawlstack.aws.results import ResultStore
from crawlstack.aws.runs import RunStore
from crawlstack.aws.scope_store import ScopeStore
from crawlstack.aws.seen import SeenItems
from crawlstack.aws.sources import DynamoSources
from crawlstack.aws.urls import UrlStore
from crawlstack.aws.watch import DynamoWatch

__all__ = [
    "ENVIRONMENT",
    "NOTE_MAX_CHARS",
    "WRITE_TOKEN",
    "BacklogStore",
    "BlobStore",
    "Connection",
    "CrawlStore",
    "Credentials",
    "DynamoSources",
    "DynamoWatch",
    "EventBus",
    "HeldStore",
    "HostStore",
    "PublishFailed",
    "Queue",
    "ResolvedStore",
    "ResultStore",
    "RunStore",
    "ScopeStore",
    "SeenItems",
    "SendFailed",
    "StackNames",
    "UrlStore",
    "client",
    "marshal",
    "marshal_exact",
    "new_token",
    "reset_clients",
    "unmarshal",
]
