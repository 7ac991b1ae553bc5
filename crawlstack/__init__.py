"""crawlstack: a polite, serverless web crawler and scraper for AWS."""

from crawlstack.settings import VERSION as __version__

__all__ = ["__version__"]
