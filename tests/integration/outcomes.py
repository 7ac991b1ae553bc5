"""What became of a crawl's URLs on the stack's resources: the urls table with the crawl-log objects in S3."""

from __future__ import annotations

from typing import Any

from crawlstack import aws
from crawlstack.fetch.crawllog import url_ends


def crawl_outcomes(names: aws.StackNames, crawl_id: str) -> dict[str, dict[str, Any]]:
    """Each URL's end as the crawl reports it (``crawllog.url_ends``), by URL."""
    items = aws.UrlStore(names.urls).scan_crawl(crawl_id)
    return {item["url"]: item for item in url_ends(items, aws.BlobStore(names.bucket), crawl_id)}
