"""Extract: a WARC from S3 -> records (mapping rules) and outlinks (frontier).

``Extractor`` (``extractor``) reads each page of a WARC in its own budget:
its records and their resolution across pages (``records``), its outlinks
and the frontier batch (``outlinks``), and what its crawl-log line says
(``outcomes``), from the fetcher's WARC metadata (``metadata``), on the
stores of ``ports``.  The rules that read a page are ``crawlstack.rules``.
"""

from crawlstack.extract.extractor import Extracted, Extractor
from crawlstack.extract.outlinks import SentLinks, SkippedLinks, page_links
from crawlstack.extract.page_records import record_line, records_key

__all__ = ["Extracted", "Extractor", "SentLinks", "SkippedLinks", "page_links", "record_line", "records_key"]
