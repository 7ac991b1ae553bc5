"""A page's markup parsed by lxml, at most ``settings.MAX_PAGE_NODES`` nodes of it.

lxml has no node cap of its own, and each node (element, attribute, text,
comment) takes over 100 bytes: a 10 MiB page of tiny tags or attributes is
millions of nodes and 500 MB and more.  Every node takes at least two bytes
of markup, so a page of at most twice the cap in bytes is parsed at once
(nearly every page).  A larger HTML page is fed to the parser in pieces; after
each, the nodes built so far are counted in C (XPath ``count()``), and the
next piece is at most two bytes per node still allowed, so the count cannot
run far past the cap.  Once past it, the rest is not fed.  An XML page is
cut before parsing where its ``<``, ``=`` and ``&`` (each at most two
nodes) reach the cap.  Either way the caller notes the cut.

XML is parsed without entity expansion, DTD loading or network access, and
its namespaces are removed so ``//item/title`` works on RSS and Atom alike.
"""

from __future__ import annotations

import gc
import re
from functools import cache
from typing import Any

from lxml import etree

from crawlstack import settings
from crawlstack.rules import budget

_HTML_OPTIONS: dict[str, Any] = {
    "encoding": "utf-8",
    "no_network": True,
    "remove_comments": False,
    # Without huge_tree libxml2 silently drops everything below 256 levels of
    # nesting or after an attribute over 10 MB, and the fields there come back
    # empty.  The HTML parser expands no entities, and bodies are capped when
    # fetched, so the limits it lifts protect nothing here.
    "huge_tree": True,
}
# The smallest piece a large page is fed in (or the cap's nodes in bytes, if fewer).
_MIN_PIECE = 64 * 1024
_COUNT_NODES = etree.XPath("count(//node())")
_COUNT_ATTRIBUTES = etree.XPath("count(//@*)")


def cut_note() -> str:
    return f"markup cut at {settings.MAX_PAGE_NODES:,} nodes: the rest of the page is not read"


@cache
def _html_parser() -> etree.HTMLParser:
    # lxml.html when a page is first parsed: only extract parses pages; dispatch and fetch compile rules.
    import lxml.html

    return lxml.html.HTMLParser(**_HTML_OPTIONS)


def parse_html(data: bytes, url: str) -> tuple[Any, bool]:
    """(the root element, whether the page was cut at the node cap); raises lxml's errors when nothing parses."""
    cap = settings.MAX_PAGE_NODES
    if len(data) <= 2 * cap:
        return etree.fromstring(data, parser=_html_parser(), base_url=url), False
    import lxml.html

    # lxml keeps the root of a pull-parsed tree in its parser, which the
    # tree's document holds: a cycle only the collector frees.  Free an
    # earlier large page's before building another.
    gc.collect()
    # Events for the root only: it is what the count starts from.
    parser = etree.HTMLPullParser(events=("start",), tag="html", base_url=url, **_HTML_OPTIONS)
    parser.set_element_class_lookup(lxml.html.HtmlElementClassLookup())
    root = None
    fed = nodes = 0
    while fed < len(data) and nodes <= cap:
        budget.check()
        piece = data[fed : fed + max(min(_MIN_PIECE, cap), 2 * (cap - nodes))]
        parser.feed(piece)
        fed += len(piece)
        for _, element in parser.read_events():
            root = element
        # Before the root, only comments and the like: each has its '<'.
        nodes = _nodes(root) if root is not None else data.count(b"<", 0, fed)
    return parser.close(), fed < len(data)


# An attribute as libxml2's HTML parser reads one: a name, perhaps ``=`` and a
# quoted or bare value (a quoted one may hold ``>`` or ``<``).  Atomic and
# possessive, so a tag with fewer attributes than asked for fails at once.
_ATTRIBUTE = rb"""(?>[\s/]++[^\s/>=]*+(?>\s*+=\s*+(?>"[^"]*+"|'[^']*+'|[^\s>]*+))?)"""


@cache
def _crowded_tag(cap: int) -> re.Pattern[bytes]:
    """A start tag's name and its first ``cap`` attributes, where one more follows."""
    return re.compile(rb"<[A-Za-z][^\s/>]*+" + _ATTRIBUTE + rb"{%d}(?=" % cap + _ATTRIBUTE + rb")")


@cache
def _attributes(most: int) -> re.Pattern[bytes]:
    return re.compile(_ATTRIBUTE + rb"{1,%d}" % most)


def attributes_note() -> str:
    return f"a tag's attributes past the first {settings.MAX_TAG_ATTRIBUTES:,} were not read"


def trim_attributes(data: bytes) -> tuple[bytes, bool]:
    """``data`` with each start tag's attributes past ``settings.MAX_TAG_ATTRIBUTES`` left out; whether any were.

    Only pages over ``settings.ATTRIBUTE_SCAN_MIN_BYTES`` are scanned: one
    search, in C, that no tag within the cap matches.
    """
    cap = settings.MAX_TAG_ATTRIBUTES
    if len(data) <= settings.ATTRIBUTE_SCAN_MIN_BYTES:
        return data, False
    crowded, rest = _crowded_tag(cap), _attributes(cap)
    kept: list[bytes] = []
    at = 0
    tag = crowded.search(data)
    while tag is not None:
        budget.check()
        kept.append(data[at : tag.end()])
        at = tag.end()
        more = rest.match(data, at)
        while more is not None and more.end() > at:  # the tag's other attributes, left out
            at = more.end()
            more = rest.match(data, at)
        tag = crowded.search(data, at)
    if not kept:
        return data, False
    kept.append(data[at:])
    return b"".join(kept), True


def _nodes(root: Any) -> int:
    return int(_COUNT_NODES(root) + _COUNT_ATTRIBUTES(root))


# resolve_entities=False, load_dtd=False and no_network=True: no external
# entities, no DTD fetch; the entity references left are removed after the
# parse (``parse_xml``), so internal ones never expand either.
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


def _markers(data: bytes, start: int = 0, end: int | None = None) -> int:
    """The XML markup that can make nodes: tags, comments and CDATA (``<``), attributes (``=``), entities (``&``)."""
    return data.count(b"<", start, end) + data.count(b"=", start, end) + data.count(b"&", start, end)


def _xml_within_cap(data: bytes) -> tuple[bytes, bool]:
    """``data`` cut before the tag where its markers reach half the node cap (each makes at most two nodes)."""
    allowed = settings.MAX_PAGE_NODES // 2
    if _markers(data) <= allowed:
        return data, False
    step = max(256, min(_MIN_PIECE, allowed))
    seen = at = 0
    while at < len(data):
        found = _markers(data, at, at + step)
        if seen + found > allowed:
            break
        seen += found
        at += step
    tag = data.rfind(b"<", 0, at)
    return data[: tag if tag > 0 else at], True


def parse_xml(data: bytes, url: str) -> tuple[Any, bool]:
    """(the root element or None, whether the page was cut at the node cap)."""
    if data.startswith(b"<?xml"):
        # The declaration may name the original charset; the bytes are UTF-8 now.
        end = data.find(b"?>")
        data = data[end + 2 :].lstrip() if end != -1 else data
    data, cut = _xml_within_cap(data)
    if b"&#" in data:
        data = _CHAR_REF.sub(_no_surrogate_ref, data)
    try:
        root = etree.fromstring(data, parser=_xml_parser, base_url=url)
    except (etree.XMLSyntaxError, ValueError):
        return None, cut
    if root is None:
        return None, cut
    # Entity references stay nodes (resolve_entities=False), but XPath's
    # string value would still expand an internal one: remove them, so a
    # billion-laughs document costs nothing whichever field reads it.
    etree.strip_elements(root, etree.Entity, with_tail=False)
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.startswith("{"):
            element.tag = etree.QName(element).localname
    etree.cleanup_namespaces(root)
    return root, cut
