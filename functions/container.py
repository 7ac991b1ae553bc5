"""This Lambda container's settings and services: read and built at its first invocation, the same after.

The settings come from the environment the stack set (``HandlerSettings``);
a variable missing fails the first invocation with its name, and so does an
invalid rule.  ``reset`` gives what a fresh container would see (tests, a bench).
"""

from __future__ import annotations

import os
import threading

from crawlstack import aws
from crawlstack.lambdas.environment import HandlerSettings, services_on_aws
from crawlstack.wiring import Services

_built: tuple[HandlerSettings, Services] | None = None
_lock = threading.Lock()


def _container() -> tuple[HandlerSettings, Services]:
    global _built
    with _lock:
        if _built is None:
            read = HandlerSettings.from_env(os.environ)
            _built = (read, services_on_aws(read))
        return _built


def settings() -> HandlerSettings:
    return _container()[0]


def services() -> Services:
    return _container()[1]


def reset() -> None:
    """Forget the settings and services (and the AWS clients): the next invocation builds them afresh."""
    global _built
    with _lock:
        _built = None
    aws.reset_clients()
