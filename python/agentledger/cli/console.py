"""The rich console of every human output, and the styled text it prints.

``human_console`` builds it: markup and emoji codes in printed strings are not interpreted
(``[red]`` in a body prints as ``[red]``), every text segment it renders goes through the
sanitiser (``agentledger.display``) as a last line of defence, and output that is not a
terminal is not wrapped at 80 columns: it honours ``COLUMNS`` or ``--width``, else it is as
wide as each line needs. Loaded by the commands that print for people, never by the verifier.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO

from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from agentledger.display import UNSAFE_IN_LAYOUT, escape_match, safe

UNWRAPPED_WIDTH = 1 << 16
"""The width of output that is not a terminal, with no ``COLUMNS`` and no ``--width``: wide
enough that no line is ever wrapped, a digest never split and a number never cut."""


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
            if segment.control is None and UNSAFE_IN_LAYOUT.search(segment.text):
                yield Segment(UNSAFE_IN_LAYOUT.sub(escape_match, segment.text), segment.style)
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


__all__ = ["UNWRAPPED_WIDTH", "SafeConsole", "human_console", "output_width", "styled"]
