"""Shared by every suite: ``fakes`` (tests/fakes.py), the in-memory stores that unit tests run on and
the integration suites hold to the same contracts as the AWS adapters (one conformance suite per port).

pytest puts this folder on the import path because this file is here (its rootdir-relative
conftest rule), so ``from fakes import ...`` works from any suite without touching sys.path.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator

import botocore.loaders
import botocore.session
import pytest

from crawlstack.config.schema import INTEGER, Setting, register, unregister

# A setting no code reads, registered for one test: every form a setting takes must show it.
THROWAWAY = Setting(
    "throwaway_budget",
    INTEGER,
    7,
    help="a throwaway setting of the tests (default 7)",
    flag="--throwaway-budget",
    metavar="N",
    bounds=(1, 99),
    commands=("crawl", "seed", "watch"),
    env="CRAWLSTACK_THROWAWAY_BUDGET",
    stack_default=True,
)


@pytest.fixture
def throwaway_setting() -> Iterator[Setting]:
    """``THROWAWAY``, registered for the test and gone after it."""
    register(THROWAWAY)
    try:
        yield THROWAWAY
    finally:
        unregister(THROWAWAY.name)


@pytest.fixture(scope="session", autouse=True)
def _one_botocore_loader() -> Iterator[None]:
    """Every boto3 session of the run reads botocore's model files through one loader.

    Each test starts a fresh emulator, and ``aws.reset_clients`` makes the adapters
    build new clients, each on a new session whose own loader parses the same JSON
    (endpoints, service models) again: about 0.2 s a client, most of a ``stack``
    fixture's setup.  The files never change during a run, and one session already
    shares its loader among all its clients, so sharing it among sessions changes
    nothing a test sees.  Subprocesses are not affected.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))
        yield


@pytest.fixture(scope="session", autouse=True)
def _collected_heap_frozen() -> Iterator[None]:
    """What the run holds before its first test (modules, the collected tests) is left out of garbage collection.

    That is most of the heap, and every full collection walked all of it again:
    the automatic ones, many in a moto test, and the ``gc.collect()`` that
    ``rules.markup.parse_html`` runs before each page over twice the node cap
    (cheap in a Lambda, and about 0.7 s each in this process; a hostile-body
    test parses 22 such pages).  Objects made by the tests are collected as before.
    """
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
