"""The embedded AWS emulator for local mode: moto, in process.

moto's in-process backends are not guarded against concurrent requests, and a
conditional write that two threads check at once would both succeed.  Real
DynamoDB makes each request atomic, and politeness and dedupe rely on that, so
every emulated request here runs under one lock.  The crawler's own HTTP
traffic does not go through it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class EmbeddedAws:
    """``with EmbeddedAws():`` every boto3 client created inside talks to moto."""

    def __init__(self) -> None:
        self._mock: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._original: Any = None

    def __enter__(self) -> EmbeddedAws:
        from moto import mock_aws
        from moto.core import models

        for key, value in _FAKE_ENV.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        self._saved_env["AWS_ENDPOINT_URL"] = os.environ.pop("AWS_ENDPOINT_URL", None)
        self._mock = mock_aws()
        self._mock.start()
        stubber = models.botocore_stubber
        self._original = stubber.process_request
        lock = threading.RLock()
        original = self._original

        def atomic(request: Any) -> Any:
            with lock:
                return original(request)

        stubber.process_request = atomic  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from moto.core import models

        models.botocore_stubber.process_request = self._original  # type: ignore[method-assign]
        self._mock.stop()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
