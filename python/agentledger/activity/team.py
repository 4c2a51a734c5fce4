"""Team manifests: which modality each role runs as.

A manifest is TOML with ``[[roles]]`` entries: ``role`` (required) and ``agent_kind``
(default ``"coding"``, so manifests written before other modalities existed are
unchanged). Loading one records each role's kind in the ledger; the boundary then refuses
an activity whose kind differs from its role's (``kind-mismatch``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from agentledger import _core
from agentledger.activity.result import MODALITIES, STAGE_ID
from agentledger.bookkeeping import TEAM_LOADED, TEAM_RUN
from agentledger.errors import InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.limits import MAX_DOCUMENT_BYTES, read_capped

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

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


def load_manifest(ledger: Ledger, path: str | Path) -> list[Role]:
    """Read a manifest file and record its roles (a later manifest redefines a role)."""
    data = read_capped(Path(path), MAX_DOCUMENT_BYTES, "a team manifest")
    return load_manifest_bytes(ledger, data, str(path))


def load_manifest_bytes(ledger: Ledger, data: bytes, name: str = "manifest") -> list[Role]:
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


def declared_role(conn: apsw.Connection, role: str) -> tuple[str, str] | None:
    """``(agent_kind, manifest hash)`` of ``role`` as loaded; None when no manifest names it."""
    rows = conn.execute(
        "SELECT agent_kind, manifest_hash FROM team_roles WHERE role = ?", (role,)
    ).fetchall()
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


def has_team(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT 1 FROM team_roles LIMIT 1").fetchall())


def roles(ledger: Ledger) -> list[Role]:
    return [
        Role(role, kind)
        for role, kind in ledger.db.conn.execute(
            "SELECT role, agent_kind FROM team_roles ORDER BY role"
        )
    ]
