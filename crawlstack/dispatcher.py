"""Dispatch's names where fetch and the handlers import them; the code is in ``crawlstack.dispatch``."""

from crawlstack.dispatch import (
    Crawls,
    Decision,
    Dispatcher,
    Outbox,
    RobotsCache,
    ScopeRecords,
    Urls,
    dispatch_in_turns,
)
from crawlstack.resolution import RECORD_COMPLETE

__all__ = [
    "RECORD_COMPLETE",
    "Crawls",
    "Decision",
    "Dispatcher",
    "Outbox",
    "RobotsCache",
    "ScopeRecords",
    "Urls",
    "dispatch_in_turns",
]
