"""Sealed bernstein workdirs, written and judged by bernstein 3.23.0's own code.

    python sealed_workdirs.py make OUT
    python sealed_workdirs.py verdict WORKDIR[,WITNESS_KEY]...

Run as a child process: the wheel (fetched into the bench cache by
``benches/bernstein_peer.py``) is imported through that script's shim, which must not
leak into the test process.

``make`` writes a small workdir with bernstein's writers (``bernstein_peer.generate``),
then does what the orchestrator's shutdown does: ``compute_seal``, ``save_seal``,
``record_checkpoint`` (the key is the workdir's ``audit.key``). A witness co-signs that
checkpoint (``cosign_checkpoint``, ``record_cosignature``). One more audit record is
then logged (``AuditLog.log``), a second seal and checkpoint are written and co-signed.
``OUT/first-audit`` keeps a copy of ``.sdd/audit`` as it was after the first seal (a
rollback target); ``OUT/witness.pub`` is the witness's raw public key and
``OUT/stranger.pub`` another key.

``verdict`` runs, for each workdir (with ``--witness-key`` when a key follows its name),
the pillars of ``bernstein audit verify`` that read the audit folder (HMAC chain, Merkle
tree, checkpoints, external anchors, witness co-signatures), with bernstein's own
functions, from the workdir, and prints one ``{"code", "pillars"}`` line per workdir:
code 1 when one fails, 0 otherwise, as the command exits. The command's other pillars
read files these workdirs do not have (they pass); the command itself cannot be run on
this Python (a later pillar's module has 3.12-only syntax).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import os
import shutil
import sys
import time
import types
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parents[3] / "benches"
WITNESS_SEED = hashlib.sha256(b"witness").digest()
STRANGER_SEED = hashlib.sha256(b"stranger").digest()
PILLARS = (
    "_verify_hmac_chain",
    "_verify_merkle_tree",
    "_verify_checkpoints",
    "_verify_anchors",
    "_verify_witness",
)
RUNS, ROWS, SEED = 6, 12, 20261202


def _load(name: str) -> Any:
    """A module of the wheel (or of the benches), imported by name: none is installed in
    this virtualenv, so none is known to the type checker."""
    return importlib.import_module(name)


def _peer() -> Any:
    sys.path.insert(0, str(BENCHES))
    return _load("bernstein_peer")


def _shim(peer: Any) -> None:
    """The bench's shim, plus what ``audit_cmd`` needs: its package ``__init__``s import
    every command (and packages absent here), and its console comes from a helper
    module that imports an HTTP client; a plain rich console stands in for it."""
    code = peer.peer_dirs(peer.DEFAULT_CACHE)
    peer.install_shim(code)
    for name in ("bernstein.cli", "bernstein.cli.commands"):
        package = types.ModuleType(name)
        package.__path__ = [str(code.code.joinpath(*name.split(".")))]
        sys.modules[name] = package
    import rich.console

    helpers = types.ModuleType("bernstein.cli.helpers")
    helpers.console = rich.console.Console(file=io.StringIO(), width=200)  # type: ignore[attr-defined]
    sys.modules["bernstein.cli.helpers"] = helpers


def _raw_public(seed: bytes) -> bytes:
    from nacl.signing import SigningKey

    return bytes(SigningKey(seed).verify_key)


def _seal_and_cosign(audit: Path, key: bytes, witness_state: Path) -> None:
    from nacl.signing import SigningKey

    merkle = _load("bernstein.core.persistence.merkle")
    checkpoints = _load("bernstein.core.persistence.chain_checkpoint")
    witness = _load("bernstein.core.persistence.checkpoint_witness")
    signers = _load("bernstein.core.persistence.lineage_signer")
    _tree, seal = merkle.compute_seal(audit, key=key)
    merkle.save_seal(seal, audit / "merkle")
    checkpoint = checkpoints.record_checkpoint(audit, seal, key=key)
    private = SigningKey(WITNESS_SEED)
    signer = types.SimpleNamespace(sign=lambda payload: private.sign(payload).signature)
    result = witness.cosign_checkpoint(witness_state, checkpoint, signer, witness_id="test-witness")
    verifier = signers.Ed25519PublicKeyVerifier.from_raw(_raw_public(WITNESS_SEED))
    witness.record_cosignature(audit, result.cosignature, verifier)


def make(out: Path) -> None:
    peer = _peer()
    peer.generate(out, RUNS, ROWS, SEED, "wheel", peer.DEFAULT_CACHE)
    _shim(peer)
    audit_log = _load("bernstein.core.security.audit").AuditLog
    audit = out / ".sdd" / "audit"
    key = (out / "audit.key").read_bytes().strip()
    witness_state = out / "witness-state"
    _seal_and_cosign(audit, key, witness_state)
    shutil.copytree(audit, out / "first-audit")
    audit_log(audit, key=key).log("run.closed", "orchestrator", "run", "r-extra", {"n": 1})
    time.sleep(1.1)  # seal files are named to the second
    _seal_and_cosign(audit, key, witness_state)
    (out / "witness.pub").write_bytes(_raw_public(WITNESS_SEED))
    (out / "stranger.pub").write_bytes(_raw_public(STRANGER_SEED))


def verdict(workdir: Path, witness_key: str | None) -> dict[str, Any]:
    key_file = workdir / "audit.key"
    os.chmod(key_file, 0o600)  # bernstein refuses a key others can read
    os.environ["BERNSTEIN_AUDIT_KEY_PATH"] = str(key_file.resolve())
    os.chdir(workdir)  # the command reads .sdd/audit from the working directory
    audit_cmd = _load("bernstein.cli.commands.audit_cmd")
    pillars: dict[str, Any] = {}
    for name in PILLARS:
        function = getattr(audit_cmd, name)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if name == "_verify_witness":
                    passed = function(witness_key, None)
                elif name == "_verify_anchors":
                    passed = function(None)
                else:
                    passed = function()
            pillars[name] = bool(passed)
        except Exception as exc:  # the command dies on it: exit 1
            pillars[name] = f"raises {type(exc).__name__}"
    code = 0 if all(value is True for value in pillars.values()) else 1
    return {"code": code, "pillars": pillars}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make").add_argument("out", type=Path)
    sub.add_parser("verdict").add_argument("specs", nargs="+")
    args = parser.parse_args()
    if args.command == "make":
        make(args.out)
        return
    _shim(_peer())
    for spec in args.specs:
        workdir, _, key = spec.partition(",")
        print(json.dumps(verdict(Path(workdir).resolve(), key or None)), flush=True)


if __name__ == "__main__":
    main()
