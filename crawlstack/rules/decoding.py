"""A page's bytes as text, the way a browser decodes them, and never an exception.

The order is the WHATWG encoding sniffing algorithm's, as w3lib's
``html_to_unicode`` (Scrapy's) follows it: a BOM, then the Content-Type
charset, then a ``<meta>`` or XML declaration, then charset-normalizer's
guess (``sniff_encoding``), then UTF-8.

* **Only text encodings.**  A label is taken only when it names one of the
  encodings of the WHATWG Encoding Standard (or UTF-32, which Python reads
  safely).  Python's codec registry also holds codecs that are not page
  encodings at all: ``base64``, ``zlib`` and ``rot13`` are bytes-to-bytes,
  ``unicode_escape`` turns ``\\ud800`` in the page into a lone surrogate,
  ``idna`` and ``punycode`` raise on ordinary bytes.  Such a label, or one
  Python does not know, counts as no label, and the next step decides.
* **Undecodable bytes** become U+FFFD, and so does any lone surrogate, so
  the text can always be encoded as UTF-8 (lxml's input, and every store's).

w3lib and charset-normalizer are imported when a page is first decoded
(extract), not at a handler's cold start.
"""

from __future__ import annotations

import codecs
import re

# charset-normalizer looks at no more than this much of a body: enough to tell
# encodings apart, bounded on huge pages.
SNIFF_BYTES = 64 * 1024
# How much more chaos (charset-normalizer's mess ratio) windows-1252 may show and still be chosen.
_CP1252_MARGIN = 0.1

# The WHATWG Encoding Standard's encodings (https://encoding.spec.whatwg.org/#names-and-labels)
# by their Python codec names (``codecs.lookup(label).name``), plus the UTF-32s
# and ASCII; "replacement" and "x-user-defined" have no Python codec and fall
# through to detection.  Names, not labels: only a page's own codec is ever
# looked up (each lookup imports its module).
_TEXT_CODECS = frozenset({
    "utf-8", "cp866", "iso8859-1", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5", "iso8859-6", "iso8859-7",
    "iso8859-8", "iso8859-9", "iso8859-10", "iso8859-11", "iso8859-13", "iso8859-14", "iso8859-15", "iso8859-16",
    "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254",
    "cp1255", "cp1256", "cp1257", "cp1258", "gbk", "gb2312", "gb18030", "big5", "big5hkscs", "euc_jp", "iso2022_jp",
    "shift_jis", "cp932", "euc_kr", "cp949", "utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "utf-32-le",
    "ascii",
})  # fmt: skip

_SURROGATE = re.compile("[\ud800-\udfff]")


def text_encoding(name: str | None) -> str | None:
    """``name`` (already resolved by w3lib) if it is a web text encoding, else None."""
    if not name:
        return None
    try:
        codec = codecs.lookup(name).name
    except (LookupError, ValueError):  # ValueError: a label with a NUL in it
        return None
    return name if codec in _TEXT_CODECS else None


def decode_page(content_type: str | None, body: bytes) -> tuple[str, str]:
    """(the encoding used, the text): BOM, header, ``<meta>``, detection, UTF-8, taking text encodings only."""
    from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom

    bom_encoding, bom = read_bom(body)
    if bom_encoding is not None and bom is not None:
        return bom_encoding, decode(body[len(bom) :], bom_encoding)
    encoding = (
        text_encoding(http_content_type_encoding(content_type))
        or text_encoding(html_body_declared_encoding(body))
        or text_encoding(sniff_encoding(body))
        or "utf-8"
    )
    if encoding in ("utf-16", "utf-32"):  # no BOM: the WHATWG standard's "utf-16" is little-endian
        encoding += "-le"
    return encoding, decode(body, encoding)


def decode(data: bytes, encoding: str) -> str:
    """``data`` decoded, undecodable bytes and lone surrogates as U+FFFD; UTF-8 if the codec fails outright."""
    from w3lib.encoding import to_unicode

    try:
        text = to_unicode(data, encoding)
    except (LookupError, UnicodeError, ValueError):
        text = data.decode("utf-8", "replace")
    if encoding != "utf-8" and _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return text


def sniff_encoding(body: bytes) -> str | None:
    """The encoding of an undeclared body: UTF-8 if it is valid UTF-8, else charset-normalizer's best guess."""
    # Valid UTF-8 is almost never anything else, and checking costs little.
    sample = body[:SNIFF_BYTES]
    try:
        sample.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if len(body) > SNIFF_BYTES and exc.start >= len(sample) - 3:  # a character cut at the sample's edge
            return "utf-8"
    from charset_normalizer import from_bytes

    matches = from_bytes(sample)
    best = matches.best()
    if best is None:
        return None
    # Short Western text leaves the single-byte code pages almost tied (a
    # latin-1 "Café crème" scores best as Baltic cp1257).  Browsers fall back
    # to windows-1252 for undeclared pages; so do we, when it is nearly as good.
    for match in matches:
        if "cp1252" in match.could_be_from_charset and match.chaos <= best.chaos + _CP1252_MARGIN:
            return "cp1252"
    return best.encoding
