"""Extract: a WARC from S3 -> records (mapping rules) and outlinks (frontier); ``Extractor`` is in ``extractor``."""

from crawlstack.extract.extractor import (
    Extracted,
    Extractor,
    SentLinks,
    SkippedLinks,
    page_links,
    record_line,
    records_key,
)

__all__ = ["Extracted", "Extractor", "SentLinks", "SkippedLinks", "page_links", "record_line", "records_key"]
