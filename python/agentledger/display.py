"""Showing ledger strings to people: one sanitiser, and the console every human output uses.

A ledger (or an imported workdir, a proof, an archive) is data an attacker may have written.
Its strings reach a terminal, so ESC sequences would move the cursor, clear the screen or
recolour text, and bidi overrides would reorder what a reviewer reads. ``safe`` makes every
such character visible as an escape (``\\x1b``, ``\\u202e``); machine output (``--json``)
keeps the exact strings, JSON-escaped, and never goes through it.

``human_console`` builds the rich console of every human output: markup and emoji codes in
printed strings are not interpreted (``[red]`` in a body prints as ``[red]``), every text
segment it renders goes through ``safe`` as a last line of defence, and output that is not a
terminal is not wrapped at 80 columns: it honours ``COLUMNS`` or ``--width``, else it is
as wide as each line needs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

_FORMATTING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE = re.compile(f"[\x00-\x1f{_FORMATTING}]")
"""C0 and C1 controls (ESC included), DEL, bidi marks and overrides (U+202A-202E,
U+2066-2069, LRM, RLM, ALM), the Unicode line/paragraph separators, and lone surrogates
(valid in JSON text as ``\\ud800``, but no output encoding can write them)."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_UNSAFE_IN_LAYOUT = re.compile(f"[\x00-\x09\x0b-\x1f{_FORMATTING}]")
"""``UNSAFE`` but the newline: what the console escapes in the segments rich lays out."""

UNWRAPPED_WIDTH = 1 << 16
"""The width of output that is not a terminal, with no ``COLUMNS`` and no ``--width``: wide
enough that no line is ever wrapped, a digest never split and a number never cut."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object) -> str:
    """``text`` with every control and bidi character shown as an escape; idempotent."""
    value = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(_escape, value)


def json_text(value: object, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` that any output can write: a
    lone surrogate in a string (a tampered entry can hold one) is written as its JSON escape
    (``\\ud800``), which reads back as the same string. Machine output goes through here."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


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


def styled(template: str, **values: object) -> Text:
    """Our own markup in ``template``; each ``{name}`` value is shown safe, never as markup."""
    return Text.from_markup(template.format(**{k: escape(safe(v)) for k, v in values.items()}))


class SafeConsole(Console):
    """A rich console that shows every text segment through ``safe``.

    Call sites still pass ledger strings through ``safe`` themselves (so rich measures the
    escaped text); this catches whatever a call site forgot.
    """

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            # Rich ends each line it lays out with a "\n" segment of its own; a ledger's
            # newlines were escaped by ``safe`` before rich saw them.
            if segment.control is None and _UNSAFE_IN_LAYOUT.search(segment.text):
                yield Segment(_UNSAFE_IN_LAYOUT.sub(_escape, segment.text), segment.style)
            else:
                yield segment

    def on_broken_pipe(self) -> None:
        """The reader closed the pipe (``show RUN | head``): it has what it wanted.

        Rich's own handler exits 1; this raises ``BrokenPipeError`` so that the command
        line ends quietly with exit 0, as ``git log | head`` does (cli/__init__.py).
        """
        self.quiet = True
        raise BrokenPipeError


def output_width(file: IO[str], width: int | None = None) -> int | None:
    """``--width``, else rich's own choice for a terminal or ``COLUMNS``, else unwrapped."""
    if width is not None:
        return width
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    isatty = getattr(file, "isatty", None)
    if isatty is not None and isatty():
        return None
    return UNWRAPPED_WIDTH


def human_console(
    *, stderr: bool = False, width: int | None = None, file: IO[str] | None = None
) -> SafeConsole:
    """The console of human output (stdout, or stderr for progress and notes)."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    return SafeConsole(
        file=file,
        stderr=stderr,
        width=output_width(stream, width),
        markup=False,
        emoji=False,
    )


__all__ = [
    "UNSAFE",
    "SafeConsole",
    "human_console",
    "json_text",
    "output_width",
    "safe",
    "shorten",
    "styled",
]
