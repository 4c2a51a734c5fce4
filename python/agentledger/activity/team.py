"""Team manifests: which modality each role runs as.

A manifest is TOML with ``[[roles]]`` entries: ``role`` (required) and ``agent_kind``
(default ``"coding"``, so manifests written before other modalities existed are
unchanged). Loading one anchors the manifest in the bookkeeping run ``_team`` (a
``team.loaded`` entry naming its blob and its roles); the boundary then refuses an
activity whose kind differs from its role's (``kind-mismatch``). The team in force is
always read from those entries' verified bytes (``journal_view.py``) and the manifest
blob they pin, re-hashed: the ``team_roles`` table is a listing cache that no decision
reads (verify holds it to the journal, ``team.roles``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from agentledger import _core
from agentledger.activity.result import MODALITIES, STAGE_ID
from agentledger.bookkeeping import TEAM_LOADED, TEAM_RUN
from agentledger.errors import Diverged, InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.journal_view import TAMPERED, VerifiedEntry, read_run
from agentledger.limits import MAX_DOCUMENT_BYTES, read_capped

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle

DEFAULT_KIND = "coding"
ROLE_FIELDS = {"role", "agent_kind"}


class InvalidManifest(InvalidInput):
    code = "invalid-manifest"


@dataclass(frozen=True, slots=True)
class Role:
    role: str
    agent_kind: str = DEFAULT_KIND


def parse_manifest(data: bytes, name: str = "manifest") -> list[Role]:
    """The roles a manifest declares; ``InvalidManifest`` (exit 65) for anything off."""
    import tomllib  # loaded with the first manifest read: a verify reads none

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidManifest(f"{name}: not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidManifest(f"{name}: malformed TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise InvalidManifest(f"{name}: malformed TOML: nested too deeply") from None
    entries = doc.get("roles")
    if not isinstance(entries, list) or not entries:
        raise InvalidManifest(f"{name}: no [[roles]] entries")
    roles: dict[str, Role] = {}
    for number, entry in enumerate(entries, 1):
        where = f"{name}: [[roles]] #{number}"
        if not isinstance(entry, dict):
            raise InvalidManifest(f"{where}: not a table")
        role = entry.get("role")
        if not isinstance(role, str) or not STAGE_ID.fullmatch(role):
            raise InvalidManifest(f"{where}: 'role' must be a name (A-Z a-z 0-9 _ . : -)")
        kind = entry.get("agent_kind", DEFAULT_KIND)
        if kind not in MODALITIES:
            raise InvalidManifest(
                f"{where} ({role}): unknown agent_kind {kind!r}; known: {', '.join(MODALITIES)}"
            )
        if role in roles and roles[role].agent_kind != kind:
            raise InvalidManifest(f"{where}: role {role!r} declared twice with different kinds")
        roles[role] = Role(role, kind)
    return list(roles.values())


def load_manifest(ledger: LedgerHandle, path: str | Path) -> list[Role]:
    """Read a manifest file and record its roles (a later manifest redefines a role)."""
    data = read_capped(Path(path), MAX_DOCUMENT_BYTES, "a team manifest")
    return load_manifest_bytes(ledger, data, str(path))


def load_manifest_bytes(ledger: LedgerHandle, data: bytes, name: str = "manifest") -> list[Role]:
    roles = parse_manifest(data, name)
    manifest_hash = _core.blake3_hex(data)
    loaded_at = utc_timestamp()
    with ledger.db.write() as conn:
        ledger.blobs.put(data)
        # Anchored in the signed log: the table is checked against this journal.
        ledger.run(TEAM_RUN)._append_locked(
            conn,
            [
                (
                    TEAM_LOADED,
                    {
                        "manifest": manifest_hash,
                        "roles": [[r.role, r.agent_kind] for r in roles],
                        "loaded_at": loaded_at,
                    },
                )
            ],
        )
        conn.executemany(
            "INSERT INTO team_roles (role, agent_kind, manifest_hash, loaded_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (role) DO UPDATE SET "
            "agent_kind = excluded.agent_kind, manifest_hash = excluded.manifest_hash, "
            "loaded_at = excluded.loaded_at",
            [(r.role, r.agent_kind, manifest_hash, loaded_at) for r in roles],
        )
    return roles


Declared = dict[str, tuple[str, str]]
"""Role → ``(agent_kind, manifest hash)``: the team in force."""

# As stored (CAST: an edited chunk of another type is never taken for a length to allocate).
_CHUNKS = "SELECT CAST(data AS BLOB) FROM blob_chunks WHERE digest = ? ORDER BY idx"


def team_in_force(entries: Iterable[VerifiedEntry]) -> Declared:
    """The roles the ``team.loaded`` entries among ``entries`` load, in order (a later
    manifest redefines a role; roles it leaves out stay): what ``team_roles`` caches."""
    declared: Declared = {}
    for entry in entries:
        if entry.kind != TEAM_LOADED or not isinstance(entry.body, dict):
            continue
        manifest, pairs = entry.body.get("manifest"), entry.body.get("roles")
        for pair in pairs if isinstance(pairs, list) else []:
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, str) for v in pair):
                declared[pair[0]] = (pair[1], str(manifest))
    return declared


def loaded_team(conn: apsw.Connection, ledger_id: str) -> Declared:
    """The team in force, from the ``_team`` journal's verified bytes (``Diverged``,
    ``journal-tampered``, if any of its rows does not verify)."""
    return team_in_force(read_run(conn, ledger_id, TEAM_RUN).require().entries)


def manifest_roles(conn: apsw.Connection, digest: str) -> dict[str, str] | str:
    """The roles the manifest blob ``digest`` declares, re-hashed and re-parsed; or why it
    cannot be read back."""
    data = b"".join(row[0] or b"" for row in conn.execute(_CHUNKS, (digest,)))
    if not data and not conn.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchall():
        return "absent from the blob store"
    if _core.blake3_hex(data) != digest:
        return "its bytes do not hash to it"
    try:
        return {role.role: role.agent_kind for role in parse_manifest(data, digest)}
    except InvalidManifest as exc:
        return f"not a manifest: {exc.message}"


def confirm_manifest(conn: apsw.Connection, manifest: str, role: str, kind: str) -> None:
    """The manifest blob a ``team.loaded`` entry names must declare ``role`` as ``kind``, as
    the entry says: one that disagrees or does not read back is a forgery."""
    roles = manifest_roles(conn, manifest)
    if isinstance(roles, str) or roles.get(role) != kind:
        why = roles if isinstance(roles, str) else f"it declares {role!r} as {roles.get(role)!r}"
        raise Diverged(
            f"team manifest {manifest}, which loaded role {role!r} as {kind!r}: {why} "
            "(tampered); nothing was written; `agentledger verify` shows what differs",
            code=TAMPERED,
        )


def roles(ledger: LedgerHandle) -> list[Role]:
    """The team in force, from the ``_team`` journal."""
    with ledger.db.snapshot() as conn:
        team = loaded_team(conn, ledger.id)
    return [Role(role, team[role][0]) for role in sorted(team)]
