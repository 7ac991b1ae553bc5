"""Page-derived text made safe for the two places it is shown raw: spreadsheets and terminals.

* ``csv_cell``: a CSV cell a spreadsheet would read as a formula
  (``=HYPERLINK(...)``, ``+``, ``-``, ``@``, or a leading tab or carriage
  return) gets a leading ``'``, as OWASP's CSV-injection guidance says.
  Numbers are left alone: int, float and Decimal values, and strings that are
  a plain decimal number (``-12``, ``+3.5``, ``-1e5``; not ``-1+1`` nor
  ``=1``), so a negative figure still reads as a number.  The quote is only
  added, never stripped: the cell's text is otherwise exact.
* ``terminal_text``: control characters replaced by visible stand-ins, so no
  ANSI/OSC escape sequence from a page reaches the terminal (clearing the
  screen, setting the window title, faking a message).  C0 controls and DEL
  become their Unicode Control Pictures (``\\x1b`` -> ``␛``, DEL -> ``␡``),
  which keep the character readable in one column; C1 controls
  (U+0080-U+009F, such as the one-byte CSI ``\\x9b``) have no pictures and
  become U+FFFD.  Newlines and tabs are replaced too unless the caller keeps
  them (multi-line output); table cells and one-line messages never do.

JSON outputs (jsonl, json) are never passed through these: they stay exact.
"""

from __future__ import annotations

import re
from decimal import Decimal

# OWASP: cells starting with these are read as formulas by Excel, LibreOffice or Google Sheets.
FORMULA_TRIGGERS = frozenset("=+-@\t\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

_C1_STAND_IN = "\ufffd"
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def csv_cell(value: object) -> object:
    """``value`` as a CSV writer should get it: text a spreadsheet would run as a formula gets a leading ``'``."""
    if value is None or isinstance(value, bool | int | float | Decimal):
        return value
    text = value if isinstance(value, str) else str(value)
    if text[:1] in FORMULA_TRIGGERS and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return value


def _stand_in(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ ... ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    return _C1_STAND_IN


def terminal_text(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character (C0, DEL, C1) replaced by a visible stand-in.

    With ``keep_newlines``, ``\\n`` and ``\\t`` stay: for multi-line output
    that is meant to break lines.  ESC is always replaced, so no escape
    sequence survives.
    """
    if keep_newlines:
        return _CONTROLS.sub(lambda m: m.group() if m.group() in "\n\t" else _stand_in(m.group()), text)
    return _CONTROLS.sub(lambda m: _stand_in(m.group()), text)
