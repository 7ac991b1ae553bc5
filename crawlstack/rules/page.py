"""A fetched page as the rules engine sees it: URL, body, and lazily built views of it.

* ``kind``: ``html`` (HTML and XHTML), ``xml`` (XML, RSS, Atom, any ``+xml``),
  ``json`` (``application/json`` and any ``+json``), or ``text``.
* ``text``: the body decoded like a browser would, text encodings only,
  never raising (``crawlstack.rules.decoding``).
* ``tree``: the lxml root for HTML and XML.  XML is parsed without entity
  expansion, DTD loading or network access, and its namespaces are removed so
  ``//item/title`` works on RSS and Atom alike.
* ``json``: the parsed JSON body.

Every view is built once, on first use, and is ``None`` when the body is not
of that kind or does not parse.
"""

from __future__ import annotations

import json
import re
from functools import cache, cached_property
from typing import Any
from urllib.parse import urljoin

from lxml import etree

from crawlstack.rules.decoding import decode_page

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"})
_XML_TYPES = frozenset({"text/xml", "application/xml"})
# JSON values nest at most this deep (a document, or JSON embedded in a page);
# deeper containers are null.  Real documents stay far below; the rules'
# JSONPath and the stores recurse per level, so depth must be bounded.
MAX_JSON_DEPTH = 64
_JSON_TYPES = frozenset({"application/json", "text/json", "application/javascript-json"})


# huge_tree: without it libxml2 silently drops everything below 256 levels of
# nesting or after an attribute over 10 MB, and the fields there come back
# empty.  The HTML parser expands no entities, and bodies are capped when
# fetched, so the limits it lifts protect nothing here.
@cache
def _html_parser() -> etree.HTMLParser:
    # lxml.html when a page is first parsed: only extract parses pages; dispatch and fetch compile rules.
    import lxml.html

    return lxml.html.HTMLParser(encoding="utf-8", no_network=True, remove_comments=False, huge_tree=True)


# resolve_entities=False, load_dtd=False and no_network=True: no external
# entities, no DTD fetch; the entity references left are removed after the
# parse (``_parse_xml``), so internal ones never expand either.
_xml_parser = etree.XMLParser(
    encoding="utf-8",
    resolve_entities=False,
    load_dtd=False,
    no_network=True,
    huge_tree=False,
    recover=True,
    remove_comments=True,
    remove_pis=True,
)

# A numeric character reference, for finding those to a surrogate (U+D800 to U+DFFF),
# which XML forbids: in recover mode libxml2 keeps each as bytes that are not UTF-8,
# and every read of that text or attribute raises UnicodeDecodeError.
_CHAR_REF = re.compile(rb"&#(?:[xX]0*([0-9a-fA-F]{1,8})|0*([0-9]{1,10}));")


def _no_surrogate_ref(match: re.Match[bytes]) -> bytes:
    hex_digits, digits = match.groups()
    code = int(hex_digits, 16) if hex_digits else int(digits)
    return b"&#xFFFD;" if 0xD800 <= code <= 0xDFFF else match.group(0)


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


def _loads(data: str | bytes) -> tuple[Any, bool]:
    """(the JSON value, whether it was cut at ``MAX_JSON_DEPTH``)."""
    # NaN and Infinity are not JSON (RFC 8259) though Python reads them; they
    # become null rather than values no store or JSON reader can take.
    value = json.loads(data, parse_constant=_null_constant)
    brackets = data.count(b"[") + data.count(b"{") if isinstance(data, bytes) else data.count("[") + data.count("{")
    if brackets <= MAX_JSON_DEPTH:  # too few brackets to nest that deep: no walk
        return value, False
    return _cut_deep(value, MAX_JSON_DEPTH)


def _cut_deep(value: Any, levels: int) -> tuple[Any, bool]:
    """``value`` with every container ``levels`` deep replaced by None, walked without recursion."""
    cut = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            child = container[key]
            if isinstance(child, dict | list):
                if depth >= levels:
                    container[key] = None
                    cut = True
                else:
                    stack.append((child, depth + 1))
    if isinstance(value, dict | list) and levels < 1:
        return None, True
    return value, cut


class Page:
    def __init__(self, url: str, body: bytes, content_type: str | None = "text/html") -> None:
        self.url = url
        self.body = body
        self.content_type_header = content_type or ""
        self.content_type = media_type(content_type)
        self.kind = kind_of(self.content_type, body)
        self._embedded_json: dict[str, Any] = {}
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
        if self.kind == "xml":
            root = self._parse_xml(data)
            if root is not None:
                return root
        try:
            return etree.fromstring(data, parser=_html_parser(), base_url=self.url)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError):
            return None

    def _parse_xml(self, data: bytes) -> Any:
        if data.startswith(b"<?xml"):
            # The declaration may name the original charset; the bytes are UTF-8 now.
            end = data.find(b"?>")
            data = data[end + 2 :].lstrip() if end != -1 else data
        if b"&#" in data:
            data = _CHAR_REF.sub(_no_surrogate_ref, data)
        try:
            root = etree.fromstring(data, parser=_xml_parser, base_url=self.url)
        except (etree.XMLSyntaxError, ValueError):
            return None
        if root is None:
            return None
        # Entity references stay nodes (resolve_entities=False), but XPath's
        # string value would still expand an internal one: remove them, so a
        # billion-laughs document costs nothing whichever field reads it.
        etree.strip_elements(root, etree.Entity, with_tail=False)
        for element in root.iter():
            if isinstance(element.tag, str) and element.tag.startswith("{"):
                element.tag = etree.QName(element).localname
        etree.cleanup_namespaces(root)
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
        if text not in self._embedded_json:
            try:
                self._embedded_json[text] = self._parsed(text)
            except (ValueError, RecursionError):
                self._embedded_json[text] = None
        return self._embedded_json[text]

    def _parsed(self, data: str | bytes) -> Any:
        try:
            value, cut = _loads(data)
        except RecursionError:
            # Nested past what the parser's own recursion allows (about 900 levels): no value.
            self._note("JSON nested too deep to parse: read as null")
            raise
        if cut:
            self._note(f"JSON nested deeper than {MAX_JSON_DEPTH} levels: the deeper values are null")
        return value

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    @cached_property
    def base_url(self) -> str:
        """The URL relative links resolve against, honouring <base href>."""
        root = self.tree
        if root is not None and self.kind == "html":
            hrefs = root.xpath("//base/@href")
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
