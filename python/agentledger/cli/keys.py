"""`agentledger keys ...`: install key, audit key, trusted signers (never in the ledger)."""

from __future__ import annotations

import click

from agentledger.cli import arguments
from agentledger.cli.console import styled
from agentledger.cli.context import AppContext, AppGroup, emit_json, json_option
from agentledger.errors import NotFound
from agentledger.keys import KeyStore, public_key_text


def _store(app: AppContext) -> KeyStore:
    return KeyStore(app.key_dir)


@click.group(cls=AppGroup)
def keys() -> None:
    """Signing and audit keys, kept outside the ledger (--home / $AGENTLEDGER_HOME).

    \b
    Examples:
      agentledger keys init && agentledger keys show --json
      agentledger keys export > signer.txt          # on the signing machine
      agentledger keys trust signer.txt             # on the reviewer's
    """


@keys.command("init")
@json_option
@click.pass_obj
def keys_init(app: AppContext, as_json: bool) -> None:
    """Create the install signing key and the audit key (mode 0600) if missing.

    \b
    Examples:
      agentledger keys init
      agentledger --home /secure/keys keys init --json
    """
    store = _store(app)
    created = {
        "install_key": not store.install_key_path.exists(),
        "audit_key": not store.audit_key_path.exists(),
    }
    public = public_key_text(bytes(store.signing_key(create=True).verify_key))
    store.audit_key(create=True)
    info = {"home": str(store.home), "public_key": public, "created": created}
    if as_json:
        emit_json(info)
    else:
        app.console.print(styled("keys in [bold]{home}[/]", home=store.home))
        app.console.print(f"install public key: {public}")


@keys.command("show")
@json_option
@click.pass_obj
def keys_show(app: AppContext, as_json: bool) -> None:
    """Where the keys are, the install public key, and the trusted signers (creates nothing).

    \b
    Examples:
      agentledger keys show
      agentledger keys show --json
    """
    store = _store(app)
    own = store.install_public_key()
    info = {
        "home": str(store.home),
        "install_key": str(store.install_key_path) if own else None,
        "public_key": own,
        "audit_key": str(store.audit_key_path) if store.has_audit_key() else None,
        "trusted": store.trusted(),
    }
    if as_json:
        emit_json(info)
        return
    console = app.console
    none = "[yellow]none yet[/]"
    console.print(styled("key folder: [bold]{home}[/]", home=store.home))
    console.print(
        styled("install key: {own}", own=own) if own else
        styled(f"install key: {none} (agentledger keys init)")
    )  # fmt: skip
    audit = info["audit_key"]
    console.print(
        styled("audit key: {audit}", audit=audit) if audit else
        styled(f"audit key: {none} (created when an activity is recorded)")
    )  # fmt: skip
    console.print(styled("trusted signers:" + ("" if info["trusted"] else " [yellow]none[/]")))
    for key in store.trusted():
        mark = "  (this install)" if key == own else ""
        console.print(f"  {key}{mark}")


@keys.command("export")
@click.option(
    "--vkey",
    is_flag=True,
    help="Print the signed-note verifier key of this ledger's checkpoints instead.",
)
@json_option
@click.pass_obj
def keys_export(app: AppContext, vkey: bool, as_json: bool) -> None:
    """Print the install public key as ed25519:<64 hex> (for another machine's --trust).

    With --vkey, the signed-note verifier key <origin>+<key id>+<key> the current ledger's
    checkpoints verify with (an archive's: under its own origin), as C2SP clients (Go's
    sumdb/note, witnesses) take it; --trust accepts it too.

    \b
    Examples:
      agentledger keys export > signer.txt
      agentledger verify --trust "$(agentledger keys export)"
      agentledger --ledger ws.db keys export --vkey --json   # {"key": ..., "vkey": ...}
    """
    own = _store(app).install_public_key()
    if own is None:
        raise NotFound(
            "no install key yet: run `agentledger keys init` (or record a data/ops stage)"
        )
    if not vkey:
        if as_json:
            emit_json({"key": own})
        else:
            click.echo(own)
        return
    from agentledger.archive import archive_seal  # --vkey only
    from agentledger.display import safe
    from agentledger.keys import parse_public_key
    from agentledger.notes import Checkpoint, newest_checkpoint
    from agentledger.notes import vkey as verifier_key

    with app.open_ledger(readonly=True) as ledger, ledger.db.snapshot() as conn:
        # An archive signs under an origin of its own: the archive id its seal names when
        # its newest checkpoint names it too (as verify judges it). The origin is never a
        # note's text: a row added to the file would choose the name the key vouches for.
        newest = newest_checkpoint(conn)
        archive = newest.checkpoint.archive if newest is not None else ""
        if archive and (archive_seal(conn) or {}).get("archive") != archive:
            archive = ""
        origin = Checkpoint(ledger.id, 0, b"", archive=archive).origin
    verifier = verifier_key(origin, parse_public_key(own))
    if as_json:
        emit_json({"key": own, "vkey": verifier})
    else:
        click.echo(safe(verifier))  # the ledger id is the file's: escaped for the terminal


@keys.command("trust")
@click.argument("key", metavar="KEY")
@json_option
@click.pass_obj
def keys_trust(app: AppContext, key: str, as_json: bool) -> None:
    """Trust a signer: KEY is 'ed25519:<64 hex>', a verifier key or a file holding keys.

    \b
    Examples:
      agentledger keys trust ed25519:3b6a…
      agentledger keys trust signers.txt --json
    """
    from pathlib import Path

    from agentledger.keys import is_vkey, public_key_from_vkey, read_trust_file  # only here

    store = _store(app)
    arguments.trust_values([key], "KEY")
    if key.strip().startswith("ed25519:"):
        candidates = [key]
    elif is_vkey(key):
        candidates = [public_key_from_vkey(key)]
    else:
        candidates = read_trust_file(Path(key))
    added = [k for k in candidates if store.add_trust(k)]
    if as_json:
        emit_json({"trust_file": str(store.trust_path), "added": added, "trusted": store.trusted()})
    else:
        for k in candidates:
            app.console.print(f"{'trusted' if k in added else 'already trusted'}: {k}")
