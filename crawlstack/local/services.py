"""Local mode's composition: the settings its handlers would read in Lambda, and the handlers the pump invokes.

A local crawl runs each function's body (``crawlstack.lambdas``) in this
process, on one ``Services`` it builds for the crawl, under the decorators a
Lambda's entry point has (``Observability.handler``).  What the stack would
put in a function's environment (``handler_env``: the crawl id, the rules
directory, and what ``LocalOptions.extra_env`` adds, over this process's
own variables) is read once into ``HandlerSettings``; the logger's level
comes from the same mapping (``POWERTOOLS_LOG_LEVEL``, else
``HANDLER_LOG_LEVEL``) and tracing is off.  Nothing is written to
``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.lambdas import dispatch, extract, fetch
from crawlstack.lambdas.observability import for_service
from crawlstack.local.pump import Handler
from crawlstack.wiring import Services

# The handlers' log level unless POWERTOOLS_LOG_LEVEL says otherwise: warnings and errors only on the terminal.
HANDLER_LOG_LEVEL = "WARNING"
# Each function's body, by the name its logs and metrics carry.
BODIES = {"dispatch": dispatch.handle, "fetch": fetch.handle, "extract": extract.handle}


def handler_env(crawl_id: str, rules_dir: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the handlers would read, as the stack sets it for the Lambdas, over this process's own."""
    return {
        **os.environ,
        settings.ENV_DEFAULT_CRAWL_ID: crawl_id,
        settings.ENV_RULES_DIR: str(Path(rules_dir).resolve()) if rules_dir else "",
        **(extra or {}),
    }


def log_level(env: Mapping[str, str]) -> str:
    """The handlers' log level: ``POWERTOOLS_LOG_LEVEL`` in ``env``, else ``HANDLER_LOG_LEVEL``."""
    return env.get("POWERTOOLS_LOG_LEVEL") or HANDLER_LOG_LEVEL


def local_handlers(services: Callable[[], Services], level: str = HANDLER_LOG_LEVEL) -> dict[str, Handler]:
    """Each function's handler, by name: its body on ``services()``, logged at ``level``, untraced."""
    return {name: _handler(name, body, services, level) for name, body in BODIES.items()}


def _handler(name: str, body: Callable[..., Any], services: Callable[[], Services], level: str) -> Handler:
    observed = for_service(name, level=level, traced=False)

    def handler(event: dict[str, Any], context: Any) -> Any:
        return body(services(), observed, event, context)

    return observed.handler(handler)
