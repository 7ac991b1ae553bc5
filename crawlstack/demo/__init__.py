"""The demo: a multi-host loopback web site, its mapping rules and the server behind both.

``python -m crawlstack.demo.server`` serves the site; ``make demo`` crawls it.
The integration tests use :class:`crawlstack.demo.server.LoopbackWeb` too.
"""

from crawlstack.demo.server import DEMO_HOSTS, RULES_DIR, SITE_DIR, LoopbackWeb, Response, demo_seeds, demo_web

__all__ = ["DEMO_HOSTS", "RULES_DIR", "SITE_DIR", "LoopbackWeb", "Response", "demo_seeds", "demo_web"]
