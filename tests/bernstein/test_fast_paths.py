"""The Rust fast paths of bernstein verify decide exactly as the Python walks they skip.

- ``_core.bernstein_audit_clean`` settles an audit chain only when the exact walk finds
  nothing; on any damage it must answer ``None`` and the Python walk names the problem.
- The files table read once in Rust gives what ``manifest_of`` and SQL give.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import apsw
import pytest

from agentledger import _core
from agentledger.bernstein.audit_chain import AuditChain, hkdf_sha256, verify_audit
from agentledger.bernstein.workdir import DirectoryWorkdir
from agentledger.storage import native

from .bernstein_testkit import SHAPES, SMALL

MASTER = b"0" * 64


def _shape(chain: AuditChain) -> tuple[Any, ...]:
    names = audit_chain_fields()
    return (
        chain.records,
        chain.problems,
        chain.authenticated,
        [
            (
                a.run_id,
                a.stage_id,
                a.journal_index,
                a.segment,
                a.line,
                {n: str(a.details.get(n, "")) for n in names},
            )
            for a in chain.activity
        ],
    )


def audit_chain_fields() -> tuple[str, ...]:
    return (*_core.AUDITED_FIELDS, "journal_event_hash")


def _slow(segments: list[tuple[str, bytes]], master: bytes | None) -> AuditChain:
    with mock.patch.object(_core, "bernstein_audit_clean", lambda *a, **k: None):
        return verify_audit(segments, master)


def _damaged(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    record = json.loads(lines[1])
    out = [
        data[:-1],  # no trailing newline
        b"\n".join([lines[1], lines[0], *lines[2:]]),  # reordered
        b"\n".join([lines[0], *lines[2:]]),  # deleted record
        data.replace(b'"scheme": 2', b'"scheme": 3', 1),
        data.replace(b'"scheme": 2', b'"scheme": true', 1),
        data.replace(b'"scheme": 2', b'"scheme": 2.0', 1),
        data.replace(b", ", b",", 1),  # non-canonical bytes
        data.replace(b'"actor"', b'"actor": "x", "actor"', 1),  # duplicate key
        b"\n".join([lines[0], b"[1]", *lines[1:]]),  # not an object
        b"\n".join([lines[0], b"\xff", *lines[1:]]),  # undecodable
        b"\n".join([lines[0], b"", b"", *lines[1:]]),  # blank lines (still clean)
    ]
    details = record["details"]
    for key, value in [
        ("journal_index", "4"),
        ("journal_index", True),
        ("journal_index", 2**70),
        ("reason_code", 1.5),
        ("prev_chain_digest", "f" * 64),
        ("run_id", None),
    ]:
        edited = {**record, "details": {**details, key: value}}
        out.append(data.replace(lines[1], json.dumps(edited, sort_keys=True).encode(), 1))
    edited = {**record, "details": [1]}
    out.append(data.replace(lines[1], json.dumps(edited, sort_keys=True).encode(), 1))
    edited = {k: v for k, v in record.items() if k != "hmac"}
    out.append(data.replace(lines[1], json.dumps(edited, sort_keys=True).encode(), 1))
    return out


@pytest.mark.parametrize("root", [SMALL, SHAPES], ids=["small", "shapes"])
def test_the_rust_audit_walk_agrees_with_the_python_walk(root: Any) -> None:
    segments = DirectoryWorkdir(root).audit_segments()
    assert segments
    keys = (MASTER, hkdf_sha256(MASTER, b"audit"))
    assert _core.bernstein_audit_clean([d for _, d in segments], keys) is not None
    name, data = segments[-1]
    variants = [segments] + [[*segments[:-1], (name, bad)] for bad in _damaged(data)]
    for variant in variants:
        for master in (None, MASTER, b"1" * 64):
            assert _shape(verify_audit(variant, master)) == _shape(_slow(variant, master))


def test_the_files_scan_gives_manifest_of_each_import_absent_blobs_and_the_index() -> None:
    from agentledger.bernstein.format import content_hash
    from agentledger.bernstein.importer import FORMAT, manifest_of

    rows: list[tuple[str, str, str | None]] = [
        (".sdd", "dir", None),
        (".sdd/cas/" + "a" * 64, "cas", "sha256:" + "b" * 64),
        ('.sdd/runs/q"uo\\te\n/journal.jsonl', "journal", "sha256:" + "c" * 64),
        (".sdd/runs/caf\u00e9-\U0001f600-\u2028\x7f/journal.jsonl", "journal", None),
    ]
    rows.sort()
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE f (path TEXT PRIMARY KEY, kind, digest, import_id, absent)")
    conn.executemany(
        "INSERT INTO f VALUES (?, ?, ?, 1, ?)",
        [(p, k, d, int(k == "journal" and d is not None)) for p, k, d in rows],
    )
    sql = "SELECT * FROM f ORDER BY path"
    files = _core.BernsteinFiles(native.handle(conn), sql, FORMAT, 9)
    assert files.manifest(1) == manifest_of(rows)
    assert files.manifest(2) == manifest_of([])
    for import_id, listed in ((1, rows), (2, [])):
        assert files.manifest_hash(import_id) == content_hash(manifest_of(listed))
    assert files.import_ids == [1]
    assert files.absent == [(p, d) for p, k, d in rows if k == "journal" and d is not None]
    assert files.store_index.get("sha256:" + "a" * 64) == "sha256:" + "b" * 64
    assert len(files.store_index) == 1


def test_the_store_index_keys_the_rows_sqls_substr_rule_would() -> None:
    """Rust keys the store index as ``'sha256:' || substr(path, 10)`` for a ``cas`` row with
    a digest and no ``/`` in that name: SQLite's own answer, on paths that count
    characters and bytes differently."""
    paths = [
        ".sdd/cas/" + "a" * 64,
        ".sdd/cas/" + "A" * 64,
        ".sdd/cas/nested/" + "b" * 64,
        ".sdd/cas/caf\u00e9",
        ".sdd/c\u00e9s/x\U0001f600y",
        "\U0001f600\U0001f600\u00e9.sdd/cas/zz",
        ".sdd/cas",
        ".sdd/cas/",
        "short",
        "",
    ]
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE f (path TEXT PRIMARY KEY, kind, digest)")
    for n, path in enumerate(paths):
        conn.execute("INSERT INTO f VALUES (?, 'cas', ?)", (path, f"sha256:{n}"))
        conn.execute("INSERT INTO f VALUES (?, 'journal', 'd')", (path + "!j",))
    conn.execute("INSERT INTO f VALUES ('.sdd/cas/nodigest', 'cas', NULL)")
    want = dict(
        conn.execute(
            "SELECT 'sha256:' || substr(path, 10), digest FROM f WHERE kind = 'cas' "
            "AND digest IS NOT NULL AND instr(substr(path, 10), '/') = 0"
        ).fetchall()
    )
    index = _core.BernsteinStoreIndex(native.handle(conn), "SELECT path, kind, digest FROM f", 9)
    assert len(index) == len(want) == 5  # five paths share the empty name
    for key, digest in want.items():
        assert index.get(key) == digest, key
