"""How the adapters reach AWS: a ``Connection``, the boto3 clients of one region, endpoint and credentials.

Every adapter takes one as its keyword argument ``connection``; by default
``ENVIRONMENT``, the region, credentials and endpoint the environment gives,
as boto3 reads it (a Lambda's; there ``AWS_ENDPOINT_URL`` would point every
client at an AWS-compatible endpoint such as a moto server).  The CLI builds
its own from ``--region`` and ``--endpoint-url``, local mode one to its
emulator.  A connection creates each client lazily, on first use, so moto can
patch botocore before any exist, and keeps it (a Lambda container's clients
are made once); they use botocore's standard retry mode.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import boto3
from botocore.config import Config

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50)


class Credentials(NamedTuple):
    """An access key (an emulator takes any), and its session token if it has one."""

    key_id: str
    secret: str
    token: str | None = None


class Connection:
    """The boto3 clients of one region, endpoint and credentials; each made once, on first use.

    ``None`` leaves a setting to the environment and config files, as boto3
    reads them: ``credentials`` are given for an emulator (local mode's
    ``--endpoint-url``).  ``environment_endpoint=False`` ignores an endpoint
    the environment names (``AWS_ENDPOINT_URL``): moto in this process
    answers calls to AWS's own endpoints only.
    """

    def __init__(
        self,
        region: str | None = None,
        endpoint_url: str | None = None,
        credentials: Credentials | None = None,
        environment_endpoint: bool = True,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self.credentials = credentials
        # botocore's type stubs predate the option.
        ignoring = Config(ignore_configured_endpoint_urls=True)  # type: ignore[call-arg]
        self._config = _CONFIG if environment_endpoint else _CONFIG.merge(ignoring)
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                key_id, secret, token = self.credentials or (None, None, None)
                session = boto3.session.Session(
                    region_name=self.region,
                    aws_access_key_id=key_id,
                    aws_secret_access_key=secret,
                    aws_session_token=token,
                )
                self._clients[service] = session.client(  # type: ignore[call-overload]
                    service, endpoint_url=self.endpoint_url, config=self._config
                )
            return self._clients[service]

    def reset(self) -> None:
        """Forget the clients made (tests and local mode start a fresh emulator; a fresh retry quota)."""
        with self._lock:
            self._clients.clear()


# The environment's: a Lambda's, and every adapter's unless given another.
ENVIRONMENT = Connection()


def client(service: str) -> Any:
    """The environment's client for ``service``."""
    return ENVIRONMENT.client(service)


def reset_clients() -> None:
    """Forget the environment's clients (tests and local mode start a fresh emulator)."""
    ENVIRONMENT.reset()
