"""The workspace log as static files any C2SP client reads: ``agentledger log export DIR``.

The layout is C2SP tlog-tiles' (docs/FORMAT.md, "Static export"):

    DIR/checkpoint                       the newest signed checkpoint
    DIR/tile/<L>/<N>[.p/<W>]             hash tiles: 256 (or W) SHA-256 hashes of level L
    DIR/tile/entries/<N>[.p/<W>]         entry bundles: the leaves of level-0 tile N, each
                                         prefixed by its length (big-endian uint16)

``N`` is written in 3-digit path elements, all but the last prefixed by ``x``
(1234067 is ``x001/x234/067``). The hashes are the stored tiles (``tiles.py``), which are
exactly tlog-tiles'; the leaves are the entries' log-leaf documents, checked against
those hashes tile by tile before they are written.

Exports are incremental: a full tile never changes, so one already in ``DIR`` is never
rewritten; each export writes the tiles its checkpoint's size adds (a partial tile under
its width, as the spec names it) and then, last, the new ``checkpoint``, so a reader never
sees a checkpoint whose tiles are missing. A ``DIR`` holding an export of another ledger,
or of a log this ledger does not extend, is refused.
"""

from __future__ import annotations

import os
import stat
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentledger import _core, tiles
from agentledger import log as wslog
from agentledger.errors import AgentLedgerError, BadArgument, Diverged, LedgerError
from agentledger.keys import resolve_trust
from agentledger.notes import MAX_NOTE_BYTES, Checkpoint, newest_trusted

if TYPE_CHECKING:
    import apsw

    from agentledger.handle import LedgerHandle

MAX_LEAF_BYTES = 0xFFFF
"""An entry bundle prefixes each leaf with a uint16 length."""


def tile_path(level: int | str, index: int, width: int = tiles.TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]`` as tlog-tiles writes it (``L`` may be ``entries``)."""
    digits = f"{index:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    path = "/".join([*(f"x{group}" for group in groups[:-1]), groups[-1]])
    suffix = "" if width == tiles.TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{path}{suffix}"


@dataclass(slots=True)
class ExportSummary:
    """What one export wrote."""

    folder: Path
    size: int
    previous_size: int
    tiles: list[str] = field(default_factory=list)
    entry_bundles: list[str] = field(default_factory=list)
    bytes_written: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "size": self.size,
            "previous_size": self.previous_size,
            "tiles": len(self.tiles),
            "entry_bundles": len(self.entry_bundles),
            "bytes": self.bytes_written,
            "written": [*self.tiles, *self.entry_bundles, "checkpoint"],
        }


def export(ledger: LedgerHandle, folder: Path, *, since: int | None = None) -> ExportSummary:
    """Write the log, as of its newest checkpoint, into ``folder`` (created if absent).

    ``since``: write only the tiles that hold leaves from that index on (the tiles before
    are already where the reader gets them); by default, from the size of the checkpoint
    ``folder`` already holds.
    """
    folder = Path(folder)
    with ledger.db.snapshot() as conn:
        # Published, a note and its tiles are what the world holds the log to (and a tile
        # is never rewritten): only one a trusted key signed for this ledger goes out.
        trusted = resolve_trust((), ledger.keys)
        note = newest_trusted(conn, ledger.path, ledger.id, trusted, "nothing was written")
        reader = tiles.TileReader(conn)
        if note.size and reader.root(note.size) != note.root:
            raise Diverged(
                f"{ledger.path}: the log's tiles are not the tree its newest checkpoint "
                "signs; nothing was written. Run `agentledger verify`",
                code="log-broken",
            )
        if since is not None and not 0 <= since <= note.size:
            raise BadArgument(
                f"--since {since}: the signed log holds {note.size:,} entries (0..{note.size})"
            )
        previous = _previous_export(folder, note, reader)
        start = previous if since is None else since
        summary = ExportSummary(folder, note.size, previous)
        try:
            _write_tiles(conn, reader, note.size, start, summary)
        except BaseException:
            # Nothing half-published: the files this export added go (none was replaced).
            for name in (*summary.tiles, *summary.entry_bundles):
                (folder / name).unlink(missing_ok=True)
            raise
    _write(folder, "checkpoint", note.text().encode(), summary, replace=True)
    return summary


def _previous_export(folder: Path, note: Checkpoint, reader: tiles.TileReader) -> int:
    """The size of the export already in ``folder`` (0 if none); refused when it is of
    another ledger, or of a log this one does not extend."""
    path = folder / "checkpoint"
    if not path.exists():
        return 0
    # Read as a published tile is (``_published``): a FIFO there must not block the export.
    data = _published(path, MAX_NOTE_BYTES)
    if data is None or len(data) > MAX_NOTE_BYTES:
        raise Diverged(
            f"{path}: not an export's checkpoint (not a regular file of at most "
            f"{MAX_NOTE_BYTES:,} bytes)",
            code="export-foreign",
        )
    try:
        old = Checkpoint.parse(data)
    except AgentLedgerError as exc:
        raise Diverged(
            f"{path}: not an export's checkpoint ({exc})", code="export-foreign"
        ) from None
    if old.origin != note.origin or old.legacy:
        raise Diverged(
            f"{folder} holds an export of another log ({old.origin}); export into a new folder",
            code="export-foreign",
        )
    try:
        proof = reader.consistency_proof(old.size, note.size) if old.size <= note.size else []
    except AgentLedgerError:
        proof = []
    if not _core.verify_consistency(old.size, note.size, old.root, note.root, proof):
        raise Diverged(
            f"{folder} holds a log of {old.size:,} entries that this ledger's "
            f"{note.size:,} do not extend (rolled back or forked); nothing was written",
            code="export-diverged",
        )
    return old.size


def _write_tiles(
    conn: apsw.Connection,
    reader: tiles.TileReader,
    size: int,
    start: int,
    summary: ExportSummary,
) -> None:
    """Every tile (and entry bundle) holding a leaf at or after ``start``, at every level."""
    level = 0
    while tiles.hashes_at(size, level):
        count = tiles.hashes_at(size, level)
        first = tiles.hashes_at(start, level) // tiles.TILE_WIDTH
        for index in range(first, (count + tiles.TILE_WIDTH - 1) // tiles.TILE_WIDTH):
            width = min(tiles.TILE_WIDTH, count - index * tiles.TILE_WIDTH)
            hashes = reader.hashes(level, index * tiles.TILE_WIDTH, width)
            name = tile_path(level, index, width)
            if _write(summary.folder, name, hashes, summary):
                summary.tiles.append(name)
            if level == 0:
                bundle = _entry_bundle(conn, index * tiles.TILE_WIDTH, width, hashes)
                name = tile_path("entries", index, width)
                if _write(summary.folder, name, bundle, summary):
                    summary.entry_bundles.append(name)
        level += 1


def _entry_bundle(conn: apsw.Connection, start: int, width: int, hashes: bytes) -> bytes:
    """The leaves ``start..start + width`` as an entry bundle, checked against their hashes:
    the tree of the leaves must have the tile's root."""
    rows = wslog.fetch(conn, wslog.LEAF_RANGE, (start, start + width))
    in_order = [row[0] for row in rows] == list(range(start, start + width))
    # A row of the wrong types (a damaged file) is no leaf of the signed tiles either.
    typed = all(
        isinstance(run_id, str) and type(seq) is int and isinstance(digest, bytes)
        for _, run_id, seq, digest in rows
    )
    leaves = wslog.leaf_data(rows) if typed else []
    if not (in_order and typed) or _core.merkle_root(leaves) != _core.merkle_root_of_hashes(hashes):
        raise Diverged(
            f"the entries of leaves {start}..{start + width - 1} are not the ones the log's "
            "signed tiles hold; nothing was written. Run `agentledger verify`",
            code="log-broken",
        )
    parts = []
    for leaf in leaves:
        if len(leaf) > MAX_LEAF_BYTES:
            raise LedgerError("a log leaf is longer than an entry bundle holds", code="log-broken")
        parts.append(struct.pack(">H", len(leaf)) + leaf)
    return b"".join(parts)


def _write(
    folder: Path, name: str, data: bytes, summary: ExportSummary, *, replace: bool = False
) -> bool:
    """Write ``folder/name`` atomically (a temporary file renamed into place); a file that is
    already there is left as it is, unless ``replace``. Whether it was written."""
    path = folder / name
    if path.exists() and not replace:
        # A tile is immutable once published: one already there must be this one, or the
        # checkpoint written after it would vouch for bytes the log does not hold.
        if _published(path, len(data)) != data:
            raise Diverged(
                f"{path}: holds other bytes than the log's {name}; the folder's export was "
                "changed. Export into a new folder",
                code="export-diverged",
            )
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".export-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    summary.bytes_written += len(data)
    return True


def _published(path: Path, size: int) -> bytes | None:
    """At most ``size + 1`` bytes of the regular file at ``path``; None for anything else.
    The folder is the user's: a FIFO there must not block the export (it is opened
    without blocking, then looked at), nor a huge file fill memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(size + 1)
