"""A fetched page as the rules engine sees it: URL, body, and lazily built views of it.

* ``kind``: ``html`` (HTML and XHTML), ``xml`` (XML, RSS, Atom, any ``+xml``),
  ``json`` (``application/json`` and any ``+json``), or ``text``.
* ``text``: the body decoded like a browser would, text encodings only,
  never raising (``crawlstack.rules.decoding``).
* ``tree``: the lxml root for HTML and XML (``crawlstack.rules.markup``:
  at most ``settings.MAX_PAGE_NODES`` nodes of it).
* ``json``: the parsed JSON body: null, with a note, past
  ``MAX_JSON_DEPTH`` levels or ``settings.MAX_PAGE_NODES`` objects and arrays.

Every view is built once, on first use, and is ``None`` when the body is not
of that kind or does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from typing import Any
from urllib.parse import urljoin

from lxml import etree

from crawlstack import settings
from crawlstack.rules.decoding import decode_page
from crawlstack.rules.markup import attributes_note, cut_note, parse_html, parse_xml, trim_attributes

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"})
_XML_TYPES = frozenset({"text/xml", "application/xml"})
# JSON values nest at most this deep (a document, or JSON embedded in a page);
# deeper containers are null.  Real documents stay far below; the rules'
# JSONPath and the stores recurse per level, so depth must be bounded.
MAX_JSON_DEPTH = 64
_JSON_TYPES = frozenset({"application/json", "text/json", "application/javascript-json"})


def media_type(content_type: str | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def kind_of(media: str, body: bytes = b"") -> str:
    if media in _HTML_TYPES:
        return "html"
    if media in _JSON_TYPES or media.endswith("+json"):
        return "json"
    if media in _XML_TYPES or media.endswith("+xml"):
        return "xml"
    if not media:
        # No Content-Type at all: sniff the obvious cases, as browsers do.
        head = body[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
        if head[:1] in (b"{", b"["):
            return "json"
        if head[:5] == b"<?xml" and b"<html" not in head.lower():
            return "xml"
        return "html"
    return "text"


def _null_constant(name: str) -> None:
    return None


class TooManyContainers(ValueError):
    """JSON of more objects and arrays than ``settings.MAX_PAGE_NODES``: not parsed."""


def _loads(data: str | bytes) -> tuple[Any, bool]:
    """(the JSON value, whether it was cut at ``MAX_JSON_DEPTH``); raises ``TooManyContainers``."""
    brackets = data.count(b"[") + data.count(b"{") if isinstance(data, bytes) else data.count("[") + data.count("{")
    # Each object or array takes 60 bytes and more in Python, from two bytes
    # of JSON: a 10 MiB page of "{}," is half a gigabyte parsed.  Brackets in
    # strings count too, which errs on the safe side.
    if brackets > settings.MAX_PAGE_NODES:
        raise TooManyContainers(brackets)
    # NaN and Infinity are not JSON (RFC 8259) though Python reads them; they
    # become null rather than values no store or JSON reader can take.
    value = json.loads(data, parse_constant=_null_constant)
    if brackets <= MAX_JSON_DEPTH:  # too few brackets to nest that deep: no walk
        return value, False
    return _cut_deep(value, MAX_JSON_DEPTH)


def _cut_deep(value: Any, levels: int) -> tuple[Any, bool]:
    """``value`` with every container ``levels`` deep replaced by None, walked without recursion."""
    if isinstance(value, dict | list) and levels < 1:
        return None, True
    cut = False
    # One iterator per level being walked, so the stack is as deep as the value, never as wide.
    stack: list[tuple[Any, Iterator[Any], int]] = [(value, iter(_keys(value)), 1)]
    while stack:
        container, keys, depth = stack[-1]
        key = next(keys, _DONE)
        if key is _DONE:
            stack.pop()
            continue
        child = container[key]
        if isinstance(child, dict | list):
            if depth >= levels:
                container[key] = None
                cut = True
            else:
                stack.append((child, iter(_keys(child)), depth + 1))
    return value, cut


_DONE = object()


def _keys(container: dict[str, Any] | list[Any]) -> Any:
    # Setting a member of a dict being iterated is allowed: its size does not change.
    return container if isinstance(container, dict) else range(len(container))


class Page:
    def __init__(self, url: str, body: bytes, content_type: str | None = "text/html") -> None:
        self.url = url
        self.body = body
        self.content_type_header = content_type or ""
        self.content_type = media_type(content_type)
        self.kind = kind_of(self.content_type, body)
        self._embedded_json: dict[str, Any] = {}
        self._embedded_chars = 0
        # What a crawl-log line should say about this page's values ("JSON nested deeper than ...").
        self.notes: list[str] = []

    @property
    def is_markup(self) -> bool:
        return self.kind in ("html", "xml")

    @cached_property
    def _decoded(self) -> tuple[str, str]:
        return decode_page(self.content_type_header or None, self.body)

    @property
    def encoding(self) -> str:
        return self._decoded[0]

    @property
    def text(self) -> str:
        return self._decoded[1]

    @cached_property
    def tree(self) -> Any:
        """The lxml root element, or None for a body that is not markup, is empty, or does not parse."""
        if not self.is_markup or not self.body.strip():
            return None
        # Decode once in Python (the browser-like rules above), then hand lxml
        # clean UTF-8: NULs removed, since libxml2 stops at the first one.
        data = self.text.strip().replace("\x00", "").encode("utf-8")
        if not data:
            return None
        cut = False
        root = None
        if self.kind == "xml":
            root, cut = parse_xml(data, self.url)
        if root is None:
            data, trimmed = trim_attributes(data)
            if trimmed:
                self.note(attributes_note())
            try:
                root, cut = parse_html(data, self.url)
            except (etree.ParserError, etree.XMLSyntaxError, ValueError):
                return None
        if cut:
            self.note(cut_note())
        return root

    @cached_property
    def json(self) -> Any:
        """The parsed body of a JSON page, or None."""
        if self.kind != "json" or not self.body.strip():
            return None
        try:
            return self._parsed(self.body)  # detects UTF-8/16/32 itself, per RFC 8259
        except (ValueError, RecursionError):
            try:
                return self._parsed(self.text)
            except (ValueError, RecursionError):
                return None

    def embedded_json(self, text: str) -> Any:
        """JSON held in a string of this page (a JSON-LD block, say), parsed once however many fields read it.

        None when it is not JSON.
        """
        if text in self._embedded_json:
            return self._embedded_json[text]
        try:
            value = self._parsed(text)
        except (ValueError, RecursionError):
            value = None
        # Kept while the texts kept are within what a page's values may hold:
        # a thousand nested items would otherwise keep a thousand large texts.
        if self._embedded_chars + len(text) <= settings.MAX_PAGE_VALUE_CHARS:
            self._embedded_chars += len(text)
            self._embedded_json[text] = value
        return value

    def _parsed(self, data: str | bytes) -> Any:
        try:
            value, cut = _loads(data)
        except RecursionError:
            # Nested past what the parser's own recursion allows (about 900 levels): no value.
            self.note("JSON nested too deep to parse: read as null")
            raise
        except TooManyContainers:
            self.note(f"JSON of more than {settings.MAX_PAGE_NODES:,} objects and arrays: read as null")
            raise
        if cut:
            self.note(f"JSON nested deeper than {MAX_JSON_DEPTH} levels: the deeper values are null")
        return value

    def note(self, note: str) -> None:
        """Something the page's crawl-log line should say about its values, once."""
        if note not in self.notes:
            self.notes.append(note)

    @cached_property
    def base_url(self) -> str:
        """The URL relative links resolve against, honouring <base href>."""
        root = self.tree
        if root is not None and self.kind == "html":
            hrefs = root.xpath("(//base/@href)[1]")
            if hrefs:
                try:
                    return urljoin(self.url, str(hrefs[0]).strip())
                except ValueError:  # <base href="http://[::1"> (a broken IPv6 literal): no base
                    return self.url
        return self.url

    @cached_property
    def meta_robots(self) -> set[str]:
        root = self.tree
        if root is None or self.kind != "html":
            return set()
        values = root.xpath("//meta[translate(@name,'ROBTS','robts')='robots']/@content")
        return {token.strip().lower() for value in values for token in str(value).split(",")}

    def hrefs(self, limit: int | None = None) -> list[str]:
        """Every followable href on an HTML page: <a> and <area>, minus rel=nofollow; the first ``limit`` if given.

        Walks the tree and stops at the limit: a page of a million links costs
        the strings it keeps, not a million.
        """
        root = self.tree
        if root is None or self.kind != "html" or "nofollow" in self.meta_robots or "none" in self.meta_robots:
            return []
        found: list[str] = []
        for element in root.iter("a", "area"):
            href = element.get("href")
            if href is None or "nofollow" in (element.get("rel") or "").lower().split():
                continue
            found.append(href)
            if limit is not None and len(found) >= limit:
                break
        return found
