"""The schema a ledger must have: exactly the objects its migrations create.

Whoever can write a ledger file can also add to its schema: a trigger on ``entries`` that
rewrites or drops what a writer appends, a view in place of a table that shows a verifier
anything, a missing ``audit_log`` that turns a cross-check off. So the file's
``sqlite_schema`` is compared, object by object and SQL text by SQL text, with a fresh
database migrated to the same version. Anything added, missing or changed is a finding of
verify, and a writer refuses the file (``Database.write``).
"""

from __future__ import annotations

import functools

import apsw

from agentledger.storage.migrations import migrate

SchemaObject = tuple[str, str, str, str | None]
"""``(type, name, tbl_name, sql)`` as ``sqlite_schema`` lists an object."""

# As bytes: the file's schema text need not be UTF-8 (SQLite keeps whatever bytes were
# written), and an object that is not ours must be a finding, not a decoding error.
_OBJECTS = (
    "SELECT CAST(type AS BLOB), CAST(name AS BLOB), CAST(tbl_name AS BLOB), CAST(sql AS BLOB) "
    "FROM sqlite_schema ORDER BY type, name"
)


def objects(conn: apsw.Connection) -> dict[tuple[str, str], SchemaObject]:
    """Every object of the file's schema; text that is not UTF-8 keeps its bytes as
    surrogates (so it differs from ours and shows escaped)."""
    found: dict[tuple[str, str], SchemaObject] = {}
    for row in conn.execute(_OBJECTS):
        kind, name, table, sql = (
            None if value is None else bytes(value).decode("utf-8", "surrogateescape")
            for value in row
        )
        found[(str(kind), str(name))] = (str(kind), str(name), str(table), sql)
    return found


@functools.cache
def expected_objects(version: int) -> dict[tuple[str, str], SchemaObject]:
    """The objects of a ledger of schema ``version``, as a fresh one is migrated."""
    conn = apsw.Connection(":memory:")
    try:
        with conn:
            migrate(conn, 0, version)
        return objects(conn)
    finally:
        conn.close()


def schema_drift(conn: apsw.Connection, version: int) -> list[str]:
    """What differs from the schema agentledger creates at ``version``; empty when none."""
    # Every ledger is written in UTF-8. A copy converted to UTF-16 would differ in every
    # object's text: one finding says why, not one per object.
    (encoding,) = conn.execute("PRAGMA encoding").fetchone()
    if encoding != "UTF-8":
        return [f"text encoding {encoding} (agentledger writes UTF-8)"]
    expected = expected_objects(version)
    actual = objects(conn)
    findings = []
    for key in sorted(actual.keys() - expected.keys()):
        findings.append(f"unexpected {key[0]} {key[1]!r} (on {actual[key][2]!r})")
    for key in sorted(expected.keys() - actual.keys()):
        findings.append(f"missing {key[0]} {key[1]!r}")
    for key in sorted(actual.keys() & expected.keys()):
        if actual[key] != expected[key]:
            findings.append(f"{key[0]} {key[1]!r} is not defined as agentledger defines it")
    return findings
