"""`log export DIR`: the workspace log as C2SP tlog-tiles static files, written incrementally,
checked here with nothing but hashlib, PyNaCl and the spec's layout."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import VerifyKey

from agentledger import Ledger
from agentledger.checkpoint import install_public_key
from agentledger.log_export import tile_path

from .logkit import break_newest_signature, build, retype_rows


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _mth(hashes: list[bytes]) -> bytes:
    """RFC 6962 root of already-hashed leaves."""
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return _h(b"\x01" + _mth(hashes[:k]) + _mth(hashes[k:]))


def _read_export(folder: Path, size: int) -> tuple[list[bytes], list[bytes]]:
    """The leaf hashes (level-0 tiles) and leaves (entry bundles) of an export of ``size``."""
    hashes: list[bytes] = []
    leaves: list[bytes] = []
    for index in range((size + 255) // 256):
        width = min(256, size - index * 256)
        tile = (folder / tile_path(0, index, width)).read_bytes()
        assert len(tile) == 32 * width
        hashes += [tile[i : i + 32] for i in range(0, len(tile), 32)]
        bundle = (folder / tile_path("entries", index, width)).read_bytes()
        at = 0
        while at < len(bundle):
            (length,) = struct.unpack(">H", bundle[at : at + 2])
            leaves.append(bundle[at + 2 : at + 2 + length])
            at += 2 + length
    return hashes, leaves


def _append(ledger: Ledger, count: int, start: int = 0) -> None:
    for run in ("alpha", "beta"):
        ledger.run(run).append_many([("step", {"i": i}) for i in range(start, start + count)])


def test_tile_paths_are_encoded_as_tlog_tiles_says() -> None:
    assert tile_path(0, 0) == "tile/0/000"
    assert tile_path(1, 7, 3) == "tile/1/007.p/3"
    assert tile_path(0, 1000) == "tile/0/x001/000"
    assert tile_path(2, 1234067) == "tile/2/x001/x234/067"
    assert tile_path("entries", 999_999, 255) == "tile/entries/x999/999.p/255"


def test_an_export_is_the_signed_tree_as_tiles_and_entry_bundles(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    _append(ledger, 300)  # 600 leaves: two full level-0 tiles, one of 88
    folder = tmp_path / "site"
    result = cli("log", "export", str(folder), "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["size"] == 600 and summary["previous_size"] == 0
    assert sorted(summary["written"]) == sorted(
        [
            "tile/0/000",
            "tile/0/001",
            "tile/0/002.p/88",
            "tile/1/000.p/2",
            "tile/entries/000",
            "tile/entries/001",
            "tile/entries/002.p/88",
            "checkpoint",
        ]
    )
    note = (folder / "checkpoint").read_text()
    origin, size, root, blank = note.split("\n")[:4]
    assert (origin, size, blank) == (f"agentledger/v1/ledger/{ledger.id}", "600", "")
    hashes, leaves = _read_export(folder, 600)
    assert [_h(b"\x00" + leaf) for leaf in leaves] == hashes
    assert _mth(hashes) == base64.b64decode(root)
    level1 = (folder / "tile/1/000.p/2").read_bytes()
    assert level1 == _mth(hashes[:256]) + _mth(hashes[256:512])
    first = json.loads(leaves[0])
    assert set(first) == {"entry", "run", "seq"} and (first["run"], first["seq"]) == ("alpha", 0)
    body, _, signature = note.partition("\n\n")
    sig = base64.b64decode(signature.split(" ")[2])
    public = bytes.fromhex(install_public_key(ledger).split(":")[1])
    VerifyKey(public).verify((body + "\n").encode(), sig[4:])


def test_a_second_export_writes_only_what_changed_and_never_rewrites_a_full_tile(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    _append(ledger, 300)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    full = folder / "tile/0/000"
    before = full.stat()
    _append(ledger, 50, start=300)  # 700 leaves
    second = cli("log", "export", str(folder), "--json").json()
    assert second["previous_size"] == 600
    assert sorted(second["written"]) == sorted(
        ["tile/0/002.p/188", "tile/entries/002.p/188", "checkpoint"]
    )
    after = full.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (folder / "tile/0/002.p/88").exists()  # the older checkpoint's tiles stay
    hashes, leaves = _read_export(folder, 700)
    root = (folder / "checkpoint").read_text().split("\n")[2]
    assert _mth([_h(b"\x00" + leaf) for leaf in leaves]) == base64.b64decode(root)
    assert _mth(hashes) == base64.b64decode(root)
    third = cli("log", "export", str(folder), "--json").json()
    assert third["written"] == ["checkpoint"]  # nothing new: the checkpoint only
    since = cli("log", "export", str(tmp_path / "tail"), "--since", "600", "--json").json()
    assert sorted(since["written"]) == sorted(
        ["tile/0/002.p/188", "tile/1/000.p/2", "tile/entries/002.p/188", "checkpoint"]
    )


def test_an_export_folder_of_another_log_is_refused(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    _append(ledger, 3)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    other = tmp_path / "other" / "ledger.db"
    with Ledger.open(other) as second:
        second.run("x").append("step", {})
    refused = cli("log", "export", str(folder), ledger=other)
    assert refused.code == 2
    assert "another log" in refused.err
    note = (folder / "checkpoint").read_text().split("\n")
    note[2] = base64.b64encode(bytes(32)).decode()  # a log this ledger does not extend
    (folder / "checkpoint").write_text("\n".join(note))
    forked = cli("log", "export", str(folder))
    assert forked.code == 2
    assert "do not extend" in forked.err


@pytest.mark.parametrize("where", ["a-file", "no-ledger"])
def test_log_export_refusals_have_their_exit_codes(tmp_path: Path, cli: Any, where: str) -> None:
    if where == "a-file":
        target = tmp_path / "plain"
        target.write_text("x")
        assert cli("log", "export", str(target)).code == 64
    else:
        result = cli("log", "export", str(tmp_path / "site"), ledger=tmp_path / "none.db")
        assert result.code == 1


def test_an_archive_exports_under_its_own_origin_not_into_its_sources_folder(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    _append(ledger, 3)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    archive = tmp_path / "audit.db"
    assert cli("archive", str(archive), "alpha").code == 0
    refused = cli("log", "export", str(folder), ledger=archive)
    assert refused.code == 2 and "another log" in refused.err
    own = tmp_path / "archive-site"
    assert cli("log", "export", str(own), ledger=archive).code == 0
    origin = (own / "checkpoint").read_text().split("\n")[0]
    assert origin.startswith(f"agentledger/v1/ledger/{ledger.id}/archive/")


def test_an_export_never_publishes_over_changed_tiles_nor_leaves_half_of_one(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    """A tile of the folder changed after it was published was kept, and a new checkpoint
    published over it (exit 0). An export of a ledger whose entries no longer match its
    signed tiles stopped with exit 65 and left the tiles it had written."""
    import apsw

    _append(ledger, 300)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    published = (folder / "checkpoint").read_bytes()
    # A published tile the next export writes again (the level-1 tile of the two full
    # level-0 tiles), defaced.
    (folder / "tile/1/000.p/2").write_bytes(bytes(64))
    _append(ledger, 10, start=300)
    refused = cli("log", "export", str(folder))
    assert refused.code == 2 and "tile/1/000.p/2" in refused.err, refused.err
    assert (folder / "checkpoint").read_bytes() == published
    assert not (folder / "tile/0/002.p/108").exists()
    assert cli("log", "export", str(tmp_path / "site2"), "--since", "1000").code == 64
    conn = apsw.Connection(str(ledger_path))  # an entry rewritten with its hash
    raw = conn.execute("SELECT bytes FROM entries WHERE leaf = 5").fetchall()[0][0]
    edited = bytes(raw).replace(b'"i":', b'"j":')
    assert edited != bytes(raw)
    from agentledger import _core

    conn.execute(
        "UPDATE entries SET bytes = ?, hash = ? WHERE leaf = 5",
        (edited, _core.entry_hash(edited)),
    )
    conn.close()
    fresh = tmp_path / "fresh"
    broken = cli("log", "export", str(fresh))
    assert broken.code == 2, broken.err
    assert not fresh.exists() or [p for p in fresh.rglob("*") if p.is_file()] == []


def test_a_fifo_or_a_huge_file_where_a_tile_was_published_is_refused_unread(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    """The check of a tile already in the folder read it whole: a FIFO there hung the
    export, a huge file would fill memory. Each is refused as a changed export."""
    import os

    _append(ledger, 300)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    _append(ledger, 10, start=300)
    tile = folder / "tile/1/000.p/2"  # written again by the next export
    tile.unlink()
    os.mkfifo(tile)
    assert cli("log", "export", str(folder)).code == 2
    tile.unlink()
    with open(tile, "wb") as handle:
        handle.truncate(4 << 30)  # sparse: costs no disk
    refused = cli("log", "export", str(folder))
    assert refused.code == 2 and "tile/1/000.p/2" in refused.err


def test_an_export_publishes_only_a_checkpoint_a_trusted_key_signed_for_this_ledger(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    """The file's newest note is the file's: signed by a key this install does not trust,
    or edited (its signature no longer verifies), it is not published, nor the tiles it
    would vouch for (a tile, once published, never changes: forged ones would block every
    later export of the ledger's own log)."""
    import apsw

    _append(ledger, 3)
    stranger = tmp_path / "stranger"
    stranger.mkdir(mode=0o700)
    trust = stranger / "trusted.keys"
    trust.write_text(f"{install_public_key(ledger)}\n")
    trust.chmod(0o600)
    ledger.close()
    with Ledger.open(ledger_path, key_dir=stranger) as theirs:  # their install appends
        theirs.run("theirs").append("step", {"not": "ours"})
    refused = cli("log", "export", str(tmp_path / "untrusted"))
    assert refused.code == 2, refused.err
    assert not (tmp_path / "untrusted").exists()
    conn = apsw.Connection(str(ledger_path))
    conn.execute("DELETE FROM checkpoints WHERE size = 7")  # back to our own newest note
    conn.close()
    break_newest_signature(ledger_path)
    refused = cli("log", "export", str(tmp_path / "edited"))
    assert refused.code == 2, refused.err
    assert not (tmp_path / "edited").exists()


def test_a_fifo_or_a_huge_file_as_the_folders_checkpoint_is_refused_unread(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    """The folder's ``checkpoint`` was read with a plain open: a FIFO there hung the
    export (as one in place of a tile did). It is read as the tiles are now: only a
    regular file, at most a note's size."""
    import os

    _append(ledger, 3)
    folder = tmp_path / "site"
    assert cli("log", "export", str(folder)).code == 0
    published = folder / "checkpoint"
    published.unlink()
    os.mkfifo(published)
    refused = cli("log", "export", str(folder))
    assert refused.code == 2 and "checkpoint" in refused.err, refused.err
    published.unlink()
    with open(published, "wb") as handle:
        handle.truncate(4 << 30)  # sparse: costs no disk
    refused = cli("log", "export", str(folder))
    assert refused.code == 2 and "checkpoint" in refused.err, refused.err


def test_an_entry_row_of_the_wrong_types_is_refused_not_crashed_on(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    """An entry's hash column holding text (a flipped serial type): the export built its
    leaf from it and exited 70. It is no leaf of the signed tiles: refused, nothing written."""
    build(ledger, runs=1, entries=3)
    ledger.close()
    retype_rows(ledger_path, ("entries",), ("UPDATE entries SET hash = 'text' WHERE seq = 1", ()))
    result = cli("log", "export", str(tmp_path / "site"))
    assert result.code == 2, result.err
    assert "[log-broken]" in result.err
    assert not (tmp_path / "site" / "checkpoint").exists()
