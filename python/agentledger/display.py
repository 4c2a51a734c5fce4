"""Showing ledger strings to people: one sanitiser, and the shapes of text built on it.

A ledger (or an imported workdir, a proof, an archive) is data an attacker may have written.
Its strings reach a terminal, so ESC sequences would move the cursor, clear the screen or
recolour text, and bidi overrides would reorder what a reviewer reads. ``safe`` makes every
such character visible as an escape (``\\x1b``, ``\\u202e``); machine output (``--json``)
keeps the exact strings, JSON-escaped, and never goes through it.

No rich here: the verifier shortens what it quotes with these, and a verify that prints
JSON never loads the console (``cli/console.py``, which also escapes through ``safe``).
"""

from __future__ import annotations

import json
import re
from typing import Any

_FORMATTING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE = re.compile(f"[\x00-\x1f{_FORMATTING}]")
"""C0 and C1 controls (ESC included), DEL, bidi marks and overrides (U+202A-202E,
U+2066-2069, LRM, RLM, ALM), the Unicode line/paragraph separators, and lone surrogates
(valid in JSON text as ``\\ud800``, but no output encoding can write them)."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_UNSAFE_IN_JSON = re.compile(f"[{_FORMATTING}]")
"""``UNSAFE`` but the C0 controls, which json.dumps escapes in strings itself (and whose
newline lays out an indented document)."""

UNSAFE_IN_LAYOUT = re.compile(f"[\x00-\x09\x0b-\x1f{_FORMATTING}]")
"""``UNSAFE`` but the newline: what the console escapes in the segments rich lays out."""


def escape_match(match: re.Match[str]) -> str:
    """The escape that shows one matched character (``\\x1b``, ``\\u202e``)."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object) -> str:
    """``text`` with every control and bidi character shown as an escape; idempotent."""
    value = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(escape_match, value)


def json_text(value: object, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` that any output can write and
    any terminal can show: a lone surrogate in a string (a tampered entry can hold one), and
    every other ``UNSAFE`` character json.dumps leaves raw (C1 controls such as the CSI
    ``\\x9b``, DEL, bidi overrides, U+2028/2029), is written as its JSON escape
    (``\\ud800``, ``\\u009b``), which reads back as the same string. Such characters only
    occur inside strings, so escaping them never changes the document. Machine output goes
    through here."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def shorten(text: str, limit: int) -> str:
    """At most about ``limit`` characters, cut in the middle so both ends stay visible.

    The cut moves to a space nearby when there is one, so that a digest is dropped whole
    rather than cut.
    """
    if len(text) <= limit:
        return text
    keep = max(limit - 1, 2)
    head = (keep + 1) // 2
    tail = len(text) - (keep - head)
    space = text.rfind(" ", 0, head)
    if space >= 0 and space > head - 80:
        head = space + 1
    space = text.find(" ", tail)
    if 0 <= space < tail + 80:
        tail = space
    return text[:head] + "…" + text[tail:]


__all__ = [
    "LONE_SURROGATE",
    "UNSAFE",
    "UNSAFE_IN_LAYOUT",
    "escape_match",
    "json_text",
    "safe",
    "shorten",
]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``: ``n`` with thousands separators, then ``word`` or its
    plural (``many``, else ``word`` + s)."""
    return f"{n:,} " + (word if n == 1 else many or word + "s")
