"""How much of a file argument is ever read: every input is hostile until parsed.

A proof, a checkpoint, a key or a JSON document handed to a command is read through
``read_capped``, so a multi-gigabyte file (or an endless pipe) is refused after its first
bytes instead of exhausting memory. Integers from such input must also fit SQLite's. A
stored entry is parsed only up to the most an entry can be (``entry_document``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentledger.errors import BadArgument, InvalidInput
from agentledger.sqlite_files import held_by_this_process

MAX_DOCUMENT_BYTES = 64 << 20
"""JSON documents and proof bundles (a proof carries one entry's bytes, base64)."""
MAX_ENTRY_BYTES = 16 << 20
"""One journal entry's canonical bytes: a proof carries them (base64) and is read whole, so
an entry past this could never be proven. Large content belongs in blobs. Verify reports a
longer row unparsed (``entry.size``: the extension's ``MAX_ENTRY_BYTES``, held equal)."""
MAX_KEY_FILE_BYTES = 64 << 10
"""Key and trust files."""
MAX_EVIDENCE_BYTES = 1 << 30
"""An evidence file given to an ``activity`` command (a page, a snapshot, an input): the
stage holds it in memory to hash and store it."""
MAX_INFLATED_BYTES = 1 << 30
"""What a workdir's gzip archives may inflate to, all together: a file of a few kilobytes
can inflate without end."""
MAX_SQLITE_INT = (1 << 63) - 1
"""The largest integer SQLite stores: sequence numbers, leaves and sizes stay below it."""


def read_capped(path: Path | str, limit: int, what: str) -> bytes:
    """The bytes of ``path`` (``-``: standard input), or ``InvalidInput`` past ``limit``."""
    name = "stdin" if str(path) == "-" else str(path)
    if name != "stdin" and held_by_this_process(Path(path)):
        raise BadArgument(f"{name}: a file of a ledger this process has open, not {what}")
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
    except FileNotFoundError:  # a file argument: a usage error, the path named (exit 64)
        raise BadArgument(f"no such file: {name}") from None
    except IsADirectoryError:
        raise BadArgument(f"{name} is a directory, not {what}") from None
    except OSError as error:
        raise BadArgument(f"cannot read {name}: {error.strerror or error}") from None
    if len(data) > limit:
        raise InvalidInput(
            f"{name}: larger than {limit:,} bytes, too large for {what}; not read",
            code="too-large",
        )
    return data


def entry_document(raw: bytes) -> Any:
    """A stored entry's JSON; ``ValueError``, unparsed, for bytes longer than an entry can
    be (tiny items take tens of times their size once parsed; verify reports such a row,
    ``entry.size``), as for bytes that are not JSON."""
    if len(raw) > MAX_ENTRY_BYTES:
        raise ValueError("larger than an entry can be")
    return json.loads(raw)
