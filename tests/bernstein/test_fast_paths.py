"""The files table read once in Rust (``bernstein_check``) gives what ``manifest_of`` and
SQL give. (The audit walk's agreement with the Python walk: ``test_audit_walk.py``.)"""

from __future__ import annotations

import apsw

from agentledger import _core
from agentledger.storage import native


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
    files = _core.bernstein_check(
        native.handle(conn), [], _core.BernsteinOptions(), files=(sql, FORMAT, 9)
    )
    assert files.manifest(1) == manifest_of(rows)
    assert files.manifest(2) == manifest_of([])
    for import_id, listed in ((1, rows), (2, [])):
        assert files.manifest_hash(import_id) == content_hash(manifest_of(listed))
    assert files.import_ids == [1]
    assert files.absent == [(p, d) for p, k, d in rows if k == "journal" and d is not None]
    # Nothing else was asked for.
    assert (files.audit, files.runs, files.rehashed) == (None, [], None)


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
