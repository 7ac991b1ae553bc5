"""Extract: a WARC from S3 -> records (mapping rules) and outlinks (frontier); ``Extractor`` is in ``extractor``."""

from crawlstack.extract.extractor import (
    Extracted,
    Extractor,
    record_line,
    records_key,
)
from crawlstack.extract.outlinks import SentLinks, SkippedLinks, page_links

__all__ = ["Extracted", "Extractor", "SentLinks", "SkippedLinks", "page_links", "record_line", "records_key"]
