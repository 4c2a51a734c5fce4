"""The hostile-input corpus: documents, run ids, hashes and broken ledger files."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import apsw

from agentledger import Ledger
from agentledger.storage.migrations import SCHEMA_VERSION

DEPTH = 100_000

JSON_DOCUMENTS: dict[str, bytes] = {
    "truncated": b'{"kind": "research", "artifact": [1, 2',
    "truncated-string": b'{"kind": "resea',
    "nan": b'{"a": NaN}',
    "infinity": b'{"a": -Infinity}',
    "lone-surrogate": b'{"a": "\\ud800"}',
    "lone-surrogate-key": b'{"\\udfff": 1}',
    "duplicate-keys": b'{"kind": "research", "kind": "coding"}',
    "deep-arrays": b"[" * DEPTH + b"]" * DEPTH,
    "deep-objects": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "unclosed-deep": b"[" * DEPTH,
    "huge-string": b'{"a": "' + b"x" * (16 << 20) + b'"}',
    "huge-integer": b'{"a": ' + b"9" * 5000 + b"}",
    "nul-in-key": b'{"a\x00": 1}',
    "invalid-utf8": b'{"a": "\xff\xfe"}',
    "utf16-bom": b"\xff\xfe{\x00}\x00",
    "empty": b"",
    "whitespace": b" \n\t ",
    "not-an-object": b"[1, 2, 3]",
    "scalar": b"42",
    "trailing-garbage": b'{"a": 1} {"b": 2}',
}

DOCUMENT_COMMANDS: dict[str, list[str]] = {
    "phase compile": ["phase", "compile"],
    "phase verify-evidence": ["phase", "verify-evidence"],
    "activity record": ["activity", "record", "r", "stage-x"],
    "verify-proof": ["verify-proof"],
    "team load": ["team", "load"],
}

RUN_IDS = [
    "../../etc/passwd",
    "..",
    ".",
    "a/b",
    "/abs",
    "a\\b",
    "a\x00b",
    "x" * 65,
    "x" * 100_000,
    "",
    "r\n",
    "ümlaut",
    "\ud800",
    "r'; DROP TABLE entries; --",
    "r%s",
]

RUN_ID_COMMANDS = [
    ["show"],
    ["verify"],
    ["archive", "{out}", "{run}"],
    ["activity", "verify"],
    ["prove", "{run}", "0"],
    ["phase", "show"],
]

MALFORMED_HASHES = [
    "blake3:xyz",
    "sha256:" + "G" * 64,
    "BLAKE3:" + "a" * 64,
    "blake3:" + "A" * 64,
    "blake3:" + "a" * 63,
    "blake3:" + "a" * 64 + "\x00",
    "md5:" + "a" * 32,
    "blake3:" + "a" * 100_000,
]


def file_state(path: Path) -> tuple[str | None, ...]:
    """Hashes of the ledger file and its WAL/journal companions (None when absent or empty:
    SQLite reads an empty -wal as no WAL, and a read-only reader may leave one)."""

    def digest(p: Path) -> str | None:
        data = p.read_bytes() if p.is_file() else b""
        return hashlib.sha256(data).hexdigest() if data or p.name == path.name else None

    return tuple(digest(Path(f"{path}{suffix}")) for suffix in ("", "-wal", "-journal"))


def make_ledger(path: Path, key_home: Path) -> Path:
    with Ledger.open(path, key_dir=key_home) as ledger:
        run = ledger.run("r")
        run.append_many([("step", {"i": i, "pad": "p" * 100}) for i in range(300)])
        ledger.blobs.put(os.urandom(50_000))
    return path


def broken_ledgers(folder: Path, good: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, the error code every command must give)."""
    folder.mkdir(parents=True, exist_ok=True)
    raw = good.read_bytes()
    made: dict[str, tuple[Path, str]] = {}

    def write(name: str, data: bytes, code: str) -> None:
        path = folder / name
        path.write_bytes(data)
        made[name] = (path, code)

    write("text.db", b"hello, this is not a ledger\n", "not-a-ledger")
    write("random.db", os.urandom(8192), "not-a-ledger")
    write("empty.db", b"", "not-a-ledger")
    write("truncated-header.db", raw[:50], "ledger-corrupt")
    write("truncated-half.db", raw[: len(raw) // 2], "ledger-corrupt")
    write("truncated-pages.db", raw[: 4096 * 3 + 100], "ledger-corrupt")
    corrupt = bytearray(raw)
    for offset in range(4096 * 2, len(corrupt), 4096):
        corrupt[offset + 10 : offset + 60] = os.urandom(50)
    write("corrupt-pages.db", bytes(corrupt), "ledger-corrupt")
    magic = bytearray(raw)
    magic[:16] = b"SQLite format 4\x00"
    write("corrupt-magic.db", bytes(magic), "not-a-ledger")
    other = folder / "other-app.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')")
    conn.close()
    made["other-app.db"] = (other, "not-a-ledger")
    newer = folder / "newer-schema.db"
    shutil.copy(good, newer)
    conn = apsw.Connection(str(newer))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    made["newer-schema.db"] = (newer, "ledger-too-new")
    return made
