"""A fetched page as the rules engine sees it: URL, body and a lazily parsed tree."""

from __future__ import annotations

from functools import cached_property
from typing import Any
from urllib.parse import urljoin

import lxml.html
from lxml import etree

_HTML_TYPES = ("text/html", "application/xhtml+xml")


class Page:
    def __init__(self, url: str, body: bytes, content_type: str = "text/html") -> None:
        self.url = url
        self.body = body
        self.content_type = (content_type or "").split(";", 1)[0].strip().lower()
        self._charset = _charset_of(content_type)

    @property
    def is_markup(self) -> bool:
        return self.content_type in _HTML_TYPES or self.content_type.endswith("xml") or not self.content_type

    @cached_property
    def tree(self) -> Any:
        """The lxml root element, or None for a body that is not markup or is empty."""
        if not self.is_markup or not self.body.strip():
            return None
        try:
            parser = lxml.html.HTMLParser(encoding=self._charset, no_network=True, remove_comments=False)
            root = lxml.html.fromstring(self.body, parser=parser, base_url=self.url)
        except (etree.ParserError, ValueError, LookupError):
            # An unknown charset label: let lxml sniff instead.
            try:
                root = lxml.html.fromstring(self.body, base_url=self.url)
            except (etree.ParserError, ValueError):
                return None
        return root

    @cached_property
    def base_url(self) -> str:
        """The URL relative links resolve against, honouring <base href>."""
        root = self.tree
        if root is not None:
            hrefs = root.xpath("//base/@href")
            if hrefs:
                return urljoin(self.url, str(hrefs[0]).strip())
        return self.url

    @cached_property
    def meta_robots(self) -> set[str]:
        root = self.tree
        if root is None:
            return set()
        values = root.xpath("//meta[translate(@name,'ROBTS','robts')='robots']/@content")
        return {token.strip().lower() for value in values for token in str(value).split(",")}

    def hrefs(self) -> list[str]:
        """Every followable href on the page: <a> and <area>, minus rel=nofollow."""
        root = self.tree
        if root is None or "nofollow" in self.meta_robots or "none" in self.meta_robots:
            return []
        found = root.xpath(
            "//a[@href][not(contains(concat(' ', normalize-space(@rel), ' '), ' nofollow '))]/@href"
            " | //area[@href][not(contains(concat(' ', normalize-space(@rel), ' '), ' nofollow '))]/@href"
        )
        return [str(h) for h in found]


def _charset_of(content_type: str) -> str | None:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None
