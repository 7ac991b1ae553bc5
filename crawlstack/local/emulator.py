"""The embedded AWS emulator for local mode: moto, in process.

moto's in-process backends are not guarded against concurrent requests, and a
conditional write that two threads check at once would both succeed.  Real
DynamoDB makes each request atomic, and politeness and dedupe rely on that, so
every emulated request here runs under one lock.  The crawler's own HTTP
traffic does not go through it.

moto's SQS checks every message's visibility and delay on every call, each
check reading the clock through datetime arithmetic.  The same epoch seconds
from ``time.time()`` make those checks about ten times cheaper; queues stay
short by design (ARCHITECTURE.md), and this keeps their cost small too.

``calls`` and ``seconds`` count the emulated requests and the time spent
serving them inside that lock: the part of a local crawl no handler code can
overlap with, which ``summary.json`` reports as ``emulator``.

``connection`` reaches it whatever the environment says: a region, test keys,
and AWS's own endpoints (an ``AWS_ENDPOINT_URL`` would lead past moto).
Clients made otherwise (``aws.ENVIRONMENT``) need a region from the
environment.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from crawlstack import aws

REGION = "us-east-1"


class EmbeddedAws:
    """``with EmbeddedAws():`` every boto3 client created inside talks to moto; ``connection`` makes them."""

    def __init__(self) -> None:
        self.connection = aws.Connection(
            region=REGION, credentials=aws.Credentials("testing", "testing", "testing"), environment_endpoint=False
        )
        self._mock: Any = None
        self._original: Any = None
        self._clocks: dict[str, Any] = {}
        self.calls = 0
        self.seconds = 0.0

    def __enter__(self) -> EmbeddedAws:
        from moto import mock_aws
        from moto.core import models

        self._mock = mock_aws()
        self._mock.start()
        stubber = models.botocore_stubber
        self._original = stubber.process_request
        lock = threading.RLock()
        original = self._original

        def atomic(request: Any) -> Any:
            with lock:
                began = time.perf_counter()
                try:
                    return original(request)
                finally:
                    self.calls += 1
                    self.seconds += time.perf_counter() - began

        stubber.process_request = atomic  # type: ignore[method-assign]

        import moto.sqs.models as sqs_models

        self._clocks = {"unix_time": sqs_models.unix_time, "unix_time_millis": sqs_models.unix_time_millis}
        sqs_models.unix_time = _unix_time  # type: ignore[assignment]
        sqs_models.unix_time_millis = _unix_time_millis  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        from moto.core import models

        models.botocore_stubber.process_request = self._original  # type: ignore[method-assign]
        import moto.sqs.models as sqs_models

        for name, original in self._clocks.items():
            setattr(sqs_models, name, original)
        self._mock.stop()


def _unix_time(dt: Any = None) -> float:
    if dt is not None:  # not on the hot path; keep moto's own naive-UTC arithmetic
        from moto.core.utils import unix_time

        return float(unix_time(dt))
    return time.time()


def _unix_time_millis(dt: Any = None) -> float:
    return _unix_time(dt) * 1000.0
