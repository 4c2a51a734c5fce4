"""Sealed workdirs against bernstein itself: seals, checkpoints, witness co-signatures.

bernstein 3.23.0's own code writes, seals, checkpoints and co-signs a workdir
(``data/sealed_workdirs.py``); each case below tampers with one file of a copy. For every
case, ``agentledger bernstein audit-verify`` must exit as bernstein's ``audit verify``
pillars say (with and without ``--witness-key``), and strict ``verify`` must report a
finding wherever bernstein fails, plus the chain-intact tail cut and what bernstein lets
pass. The wheel is fetched like the benches fetch it; without it these tests fail.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import json
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from .bernstein_testkit import import_and_verify, run_script

HERE = Path(__file__).resolve().parent
GENERATOR = HERE / "data" / "sealed_workdirs.py"
BENCHES = HERE.parents[1] / "benches"
AUDIT = Path(".sdd/audit")
LEDGER = AUDIT / "checkpoints" / "checkpoints.jsonl"
POINTER = AUDIT / "checkpoints" / "latest.json"
COSIGNATURES = AUDIT / "checkpoints" / "cosignatures.jsonl"
ANCHORS = AUDIT / "checkpoints" / "anchors.jsonl"
SEALED_FAMILIES = (
    "bernstein.seal.",
    "bernstein.checkpoint.",
    "bernstein.witness.",
    "bernstein.rfc3161.",
    "bernstein.run_receipt.",
    "bernstein.lineage.",
    "bernstein.seal_anchor.",
    "bernstein.tile",
)


def _fetch_wheel() -> None:
    sys.path.insert(0, str(BENCHES))
    try:
        peer: Any = importlib.import_module("bernstein_peer")
        peer.fetch_peer(peer.DEFAULT_CACHE)
    except Exception as exc:  # no network, no wheel: these tests cannot mean anything
        pytest.fail(f"bernstein 3.23.0's wheel could not be had ({exc}); these tests need it")
    finally:
        sys.path.remove(str(BENCHES))


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _fetch_wheel()
    out = tmp_path_factory.mktemp("sealed") / "workdir"
    run_script(GENERATOR, "make", str(out))
    return out


# ---- the tamper cases ----------------------------------------------------------------------


def _day_file(wd: Path) -> Path:
    return sorted((wd / AUDIT).glob("*.jsonl"))[-1]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def bernstein_audits(specs: list[dict[str, str]]) -> list[dict[str, Any]]:
    """bernstein's own audit verify of each spec (its workdir and options), in order, run
    by the generator in one process."""
    return _audit_answers(GENERATOR, [json.dumps(spec) for spec in specs])


def _audit_answers(script: Path, args: list[str]) -> list[dict[str, Any]]:
    """The ``AUDIT`` answers of ``script audit ARGS...``, one per argument, in order."""
    stdout = run_script(script, "audit", *args)
    answers = [json.loads(line[6:]) for line in stdout.splitlines() if line.startswith("AUDIT ")]
    assert len(answers) == len(args)
    return answers


def tampered_copies(
    sealed: Path, root: Path, cases: Mapping[str, Callable[[Path], None]]
) -> dict[str, Path]:
    """A copy of the sealed workdir per case, in ``root``, each tampered by its case."""
    made = {}
    for name, tamper in cases.items():
        shutil.copytree(sealed, root / name)
        tamper(root / name)
        made[name] = root / name
    return made


def cut_last_record(wd: Path) -> None:
    """The headline: the last audit record cut, the HMAC chain still intact."""
    day = _day_file(wd)
    day.write_bytes(b"".join(_lines(day)[:-1]))


def edit_sealed_record(wd: Path) -> None:
    day = _day_file(wd)
    lines = _lines(day)
    lines[0] = lines[0].replace(b'"actor": "activity"', b'"actor": "activitx"', 1)
    day.write_bytes(b"".join(lines))


def add_day_file(wd: Path) -> None:
    (wd / AUDIT / "2099-01-01.jsonl").write_bytes(b"")


def add_day_folder(wd: Path) -> None:
    """A folder named like a day file: bernstein's glob lists it and its read fails."""
    (wd / AUDIT / "2099-01-01.jsonl").mkdir()


def drop_first_checkpoint(wd: Path) -> None:
    path = wd / LEDGER
    path.write_bytes(b"".join(_lines(path)[1:]))


def edit_checkpoint(wd: Path) -> None:
    path = wd / LEDGER
    lines = _lines(path)
    doc = json.loads(lines[-1])
    doc["payload"]["entry_count"] -= 1
    lines[-1] = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def reorder_checkpoints(wd: Path) -> None:
    path = wd / LEDGER
    path.write_bytes(b"".join(reversed(_lines(path))))


def forge_checkpoint(wd: Path) -> None:
    """A further checkpoint, linked right but signed under another key."""
    import hashlib
    import hmac

    path = wd / LEDGER
    last = json.loads(_lines(path)[-1])
    payload = dict(last["payload"], entry_count=last["payload"]["entry_count"] + 5)
    canon = json.dumps(last, sort_keys=True, separators=(",", ":")).encode()
    payload["prev_checkpoint_sha256"] = hashlib.sha256(canon).hexdigest()
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    doc = {"hmac": hmac.new(b"not the key", body, hashlib.sha256).hexdigest(), "payload": payload}
    with path.open("ab") as handle:
        handle.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n")


def cut_checkpoint_ledger(wd: Path) -> None:
    """The ledger cut back over the published pin (latest.json names the cut line)."""
    path = wd / LEDGER
    path.write_bytes(_lines(path)[0])


def stale_pointer(wd: Path) -> None:
    """latest.json republished as the first checkpoint: bernstein accepts it."""
    (wd / POINTER).write_bytes(_lines(wd / LEDGER)[0])


def drop_pointer(wd: Path) -> None:
    (wd / POINTER).unlink()


def edit_seal_root(wd: Path) -> None:
    newest = sorted((wd / AUDIT / "merkle").glob("seal-*.json"))[-1]
    doc = json.loads(newest.read_text())
    doc["root_hash"] = "0" * 64
    newest.write_text(json.dumps(doc, indent=2) + "\n")


def delete_seals(wd: Path) -> None:
    shutil.rmtree(wd / AUDIT / "merkle")


def roll_back_everything(wd: Path) -> None:
    """Chain, seal and checkpoints rolled back together to the first seal; only the
    witness co-signatures remember the longer history."""
    cosignatures = (wd / COSIGNATURES).read_bytes()
    shutil.rmtree(wd / AUDIT)
    shutil.copytree(wd / "first-audit", wd / AUDIT)
    (wd / COSIGNATURES).write_bytes(cosignatures)


def roll_back_under_an_anchor(wd: Path) -> None:
    """The same rollback, co-signatures rolled back too: only the RFC 3161 anchor of the
    second checkpoint remembers the longer history."""
    anchors = (wd / ANCHORS).read_bytes()
    shutil.rmtree(wd / AUDIT)
    shutil.copytree(wd / "first-audit", wd / AUDIT)
    (wd / ANCHORS).write_bytes(anchors)


def anchor_other_bytes(wd: Path) -> None:
    """The anchor's token swapped for one over other bytes."""
    import base64
    import hashlib

    sys.path.insert(0, str(GENERATOR.parent))
    try:
        token = importlib.import_module("sealed_workdirs").timestamp_token(
            hashlib.sha256(b"other").digest()
        )
    finally:
        sys.path.remove(str(GENERATOR.parent))
    doc = json.loads((wd / ANCHORS).read_bytes())
    doc["token_b64"] = base64.b64encode(token).decode()
    (wd / ANCHORS).write_bytes(json.dumps(doc, sort_keys=True).encode() + b"\n")


def corrupt_anchor(wd: Path) -> None:
    (wd / ANCHORS).write_bytes(b"[1]\n")


def corrupt_cosignature(wd: Path) -> None:
    path = wd / COSIGNATURES
    lines = _lines(path)
    lines[0] = b"{not json\n"
    path.write_bytes(b"".join(lines))


def forge_cosignature(wd: Path) -> None:
    import base64

    path = wd / COSIGNATURES
    lines = _lines(path)
    doc = json.loads(lines[-1])
    doc["signature_b64"] = base64.b64encode(b"\x01" * 64).decode()
    lines[-1] = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def _receipted_journal(wd: Path) -> Path:
    return next((wd / ".sdd" / "runs").glob("*/run-receipt.json")).with_name("journal.jsonl")


def cut_receipted_journal(wd: Path) -> None:
    """The last row of the receipted run's journal cut: its chain stays intact, and the
    receipt, read alone, still verifies."""
    journal = _receipted_journal(wd)
    journal.write_bytes(b"".join(_lines(journal)[:-1]))


def _second_run(wd: Path) -> Path:
    return sorted((wd / ".sdd" / "runs").iterdir())[1]


def cut_sealed_journal(wd: Path) -> None:
    """The last row of a journal its lineage spine sealed (no receipt) cut: the chain
    and the spine both stay intact."""
    journal = _second_run(wd) / "journal.jsonl"
    journal.write_bytes(b"".join(_lines(journal)[:-1]))


def anchored_run(wd: Path) -> Path:
    return next((wd / ".sdd" / "runs").glob("*/seal_anchor.json")).parent


def cut_anchored_journal(wd: Path) -> None:
    """The last row of the journal whose head a seal anchor names cut."""
    journal = anchored_run(wd) / "journal.jsonl"
    journal.write_bytes(b"".join(_lines(journal)[:-1]))


def _spine(wd: Path) -> Path:
    return wd / ".sdd" / "lineage" / _second_run(wd).name / "spine.jsonl"


def _edit_spine_entry(wd: Path, **changes: Any) -> None:
    path = _spine(wd)
    lines = _lines(path)
    row = json.loads(lines[0])
    row.update(changes)
    lines[0] = json.dumps(row, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def edit_spine_entry(wd: Path) -> None:
    _edit_spine_entry(wd, actor="someone else")


def edit_spine_tag(wd: Path) -> None:
    _edit_spine_entry(wd, hmac="0" * 64)


def spine_garbage_line(wd: Path) -> None:
    path = _spine(wd)
    path.write_bytes(b"not json\n" + path.read_bytes())


def edit_tile(wd: Path) -> None:
    tile = next((wd / AUDIT / "tiles").glob("*.tile"))
    doc = json.loads(tile.read_bytes())
    doc["content_sha256"] = "0" * 64
    tile.write_bytes((json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())


SPINE_CASES = ("edit_spine_entry", "edit_spine_tag", "spine_garbage_line")


def unsealed(wd: Path) -> None:
    shutil.rmtree(wd / AUDIT / "merkle")
    shutil.rmtree(wd / AUDIT / "checkpoints")


def untouched(wd: Path) -> None:
    pass


CASES: dict[str, Callable[[Path], None]] = {
    f.__name__: f
    for f in (
        untouched,
        cut_last_record,
        edit_sealed_record,
        add_day_file,
        add_day_folder,
        drop_first_checkpoint,
        edit_checkpoint,
        reorder_checkpoints,
        forge_checkpoint,
        cut_checkpoint_ledger,
        stale_pointer,
        drop_pointer,
        edit_seal_root,
        delete_seals,
        roll_back_everything,
        roll_back_under_an_anchor,
        anchor_other_bytes,
        corrupt_anchor,
        corrupt_cosignature,
        forge_cosignature,
        cut_receipted_journal,
        cut_sealed_journal,
        cut_anchored_journal,
        edit_tile,
        edit_spine_entry,
        edit_spine_tag,
        spine_garbage_line,
        unsealed,
    )
}
PASSED_BY_BERNSTEIN_CAUGHT_HERE = {
    "stale_pointer",
    "drop_pointer",
    "roll_back_everything",
    "cut_receipted_journal",
    "cut_sealed_journal",
    "cut_anchored_journal",
    "edit_tile",  # bernstein's verify does not read tiles
    *SPINE_CASES,  # bernstein's audit verify does not read the spine; its spine verify does
}
"""bernstein's audit verify (without --witness-key) passes these; strict finds them."""
NOT_TAMPER = {"untouched", "unsealed"}


@pytest.fixture(scope="module")
def cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("cases"), CASES)


@pytest.fixture(scope="module")
def bernstein_says(cases: dict[str, Path]) -> dict[tuple[str, bool], dict[str, Any]]:
    """bernstein's verdict per (case, with the witness key), from its own code."""
    specs = []
    for name, workdir in cases.items():
        specs.append((name, False, str(workdir)))
        specs.append((name, True, f"{workdir},{(workdir / 'witness.pub').resolve()}"))
    answers = _audit_answers(BENCHES / "bernstein_peer.py", [spec for _, _, spec in specs])
    return {(name, keyed): answer for (name, keyed, _), answer in zip(specs, answers, strict=True)}


def test_the_cases_are_what_they_claim(bernstein_says: dict[tuple[str, bool], Any]) -> None:
    """The generator's workdir passes bernstein, and every tamper case but the listed ones
    fails it: the differential below compares against real verdicts."""
    assert bernstein_says[("untouched", False)]["code"] == 0
    assert bernstein_says[("untouched", True)]["code"] == 0
    assert bernstein_says[("cut_last_record", False)]["pillars"]["_verify_hmac_chain"] is True
    for name in CASES:
        expected = 0 if name in PASSED_BY_BERNSTEIN_CAUGHT_HERE | {"untouched"} else 1
        if name == "forge_cosignature":
            expected = 0  # caught only with --witness-key
        assert bernstein_says[(name, False)]["code"] == expected, name
    assert bernstein_says[("forge_cosignature", True)]["code"] == 1
    assert bernstein_says[("roll_back_everything", True)]["code"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("keyed", [False, True], ids=["no-witness-key", "witness-key"])
def test_compat_exit_code_is_bernsteins(
    name: str,
    keyed: bool,
    cases: dict[str, Path],
    bernstein_says: dict[tuple[str, bool], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    if keyed:
        args += ["--witness-key", str(workdir / "witness.pub")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says[(name, keyed)]
    assert result.code == theirs["code"], (result.out, theirs)
    assert result.json()["code"] == theirs["code"]
    assert result.json()["not_reproduced"] == []


def _witness_trust(workdir: Path) -> str:
    return "ed25519:" + (workdir / "witness.pub").read_bytes().hex()


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_TAMPER))
def test_strict_catches_every_case(name: str, cases: dict[str, Path], tmp_path: Path) -> None:
    """Whatever bernstein fails (with or without the witness key), and what it passes
    in ``PASSED_BY_BERNSTEIN_CAUGHT_HERE``, is a finding of strict verify."""
    workdir = cases[name]
    outcome = import_and_verify(
        workdir,
        tmp_path / "ledger.db",
        key=workdir / "audit.key",
        trust=(_witness_trust(workdir),),
    )
    found = outcome.workspace | {c for checks in outcome.findings.values() for c in checks}
    sealed_findings = {c for c in found if c.startswith(SEALED_FAMILIES)}
    assert sealed_findings, (name, found)


def test_a_cut_receipted_journal_passes_bernstein_and_not_strict(
    cases: dict[str, Path], tmp_path: Path
) -> None:
    """bernstein's verify receipt reads the receipt alone (ok); its journal chain is
    intact; strict compares the receipt's rows with the journal."""
    workdir = cases["cut_receipted_journal"]
    receipt = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json"))
    stdout = run_script(GENERATOR, "receipt-status", str(receipt))
    assert json.loads(stdout)["status"] == "ok"
    run_id = receipt.parent.name
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    assert "bernstein.run_receipt.head" in outcome.findings[run_id]
    assert "bernstein.chain" not in outcome.findings[run_id]
    untouched = import_and_verify(
        cases["untouched"], tmp_path / "clean.db", key=workdir / "audit.key"
    )
    assert "bernstein.run_receipt.head" not in untouched.findings[run_id]
    assert any("run receipt(s) compared" in note for note in untouched.notes)


def test_a_cut_sealed_journal_passes_bernstein_and_not_strict(
    cases: dict[str, Path], tmp_path: Path
) -> None:
    """bernstein's spine verify does not read the journal (its status is unchanged);
    strict compares the journal with the spine's seal of it."""
    workdir = cases["cut_sealed_journal"]
    run_id = _second_run(workdir).name
    stdout = run_script(GENERATOR, "spine-status", str(workdir), run_id)
    assert stdout.split() == ["seal_only"]  # as on the untouched workdir: not tampered
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    assert "bernstein.lineage.journal" in outcome.findings[run_id]
    assert "bernstein.chain" not in outcome.findings[run_id]
    untouched = import_and_verify(
        cases["untouched"], tmp_path / "clean.db", key=workdir / "audit.key"
    )
    assert not any("bernstein.lineage" in c for f in untouched.findings.values() for c in f)
    assert any("lineage-spine seal" in note for note in untouched.notes)


def test_strict_fails_every_spine_bernstein_calls_tampered(
    cases: dict[str, Path], tmp_path: Path
) -> None:
    specs = ["untouched", *SPINE_CASES]
    statuses = {}
    for name in specs:
        run_id = _second_run(cases[name]).name
        stdout = run_script(GENERATOR, "spine-status", str(cases[name]), run_id)
        statuses[name] = stdout.strip()
    assert statuses == {"untouched": "seal_only", **dict.fromkeys(SPINE_CASES, "tampered")}
    for name in specs:
        workdir = cases[name]
        run_id = _second_run(workdir).name
        outcome = import_and_verify(workdir, tmp_path / f"{name}.db", key=workdir / "audit.key")
        caught = "bernstein.lineage.chain" in outcome.findings[run_id]
        assert caught == (name != "untouched"), (name, outcome.findings[run_id])


def test_a_cut_anchored_journal_is_named(cases: dict[str, Path], tmp_path: Path) -> None:
    workdir = cases["cut_anchored_journal"]
    run_id = anchored_run(workdir).name
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    assert "bernstein.seal_anchor.head" in outcome.findings[run_id]
    assert "bernstein.seal_anchor.token" not in outcome.findings[run_id]
    untouched = import_and_verify(
        cases["untouched"], tmp_path / "clean.db", key=workdir / "audit.key"
    )
    assert not any("seal_anchor" in c for f in untouched.findings.values() for c in f)
    assert any("seal anchor(s) compared" in note for note in untouched.notes)


def test_strict_names_the_cut_tail(cases: dict[str, Path], tmp_path: Path) -> None:
    workdir = cases["cut_last_record"]
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    expected = {"bernstein.seal.truncated", "bernstein.checkpoint.extension", "bernstein.tile"}
    assert expected <= outcome.workspace
    assert "bernstein.audit.chain" not in outcome.workspace  # the chain itself is intact


def test_strict_is_clean_on_the_sealed_workdir(cases: dict[str, Path], tmp_path: Path) -> None:
    workdir = cases["untouched"]
    outcome = import_and_verify(
        workdir,
        tmp_path / "ledger.db",
        key=workdir / "audit.key",
        trust=(_witness_trust(workdir),),
    )
    assert not {c for c in outcome.workspace if c.startswith(SEALED_FAMILIES)}
    assert not any("not sealed" in note for note in outcome.notes)


def test_an_unsealed_chain_says_a_cut_tail_is_undetectable(
    cases: dict[str, Path], tmp_path: Path
) -> None:
    workdir = cases["unsealed"]
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    assert not {c for c in outcome.workspace if c.startswith(SEALED_FAMILIES)}
    assert any(
        "not sealed" in note and "checkpoints.jsonl" in note and "undetectable" in note
        for note in outcome.notes
    ), outcome.notes


def test_without_the_audit_key_checkpoints_are_named_unauthenticated(
    cases: dict[str, Path], tmp_path: Path
) -> None:
    outcome = import_and_verify(cases["cut_last_record"], tmp_path / "ledger.db")
    assert "bernstein.seal.truncated" in outcome.workspace  # the seal needs no key
    assert any("not authenticated (give --audit-key)" in note for note in outcome.notes)


def test_a_sealed_workdir_round_trips_byte_for_byte(sealed: Path, cli: Any, tmp_path: Path) -> None:
    """Every file of .sdd, the lineage spine, seals and checkpoints included."""
    workdir = tmp_path / "workdir"
    shutil.copytree(sealed, workdir)
    spine = workdir / ".sdd" / "lineage" / "runs" / "r1"
    spine.mkdir(parents=True)
    (spine / "spine.jsonl").write_bytes(b'{"head": "abc"}\n')
    first_run = sorted((workdir / ".sdd" / "runs").iterdir())[0]
    (first_run / "run-receipt.json").write_bytes(b"{}\n")
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    out = tmp_path / "out"
    assert cli("export", "bernstein", str(out), ledger=ledger).code == 0

    def files(root: Path) -> dict[str, bytes]:
        sdd = root / ".sdd"
        return {
            p.relative_to(sdd).as_posix(): p.read_bytes() for p in sdd.rglob("*") if p.is_file()
        }

    assert files(out) == files(workdir)
    assert "lineage/runs/r1/spine.jsonl" in files(out)


# ---- RFC 3161 anchors authenticated with a trust bundle ------------------------------------

TSA_VARIANTS = (
    "good",
    "intermediate_ec",
    "untrusted",
    "expired",
    "expired_since",
    "no_timestamping_usage",
    "tampered_imprint",
)
"""``data/sealed_workdirs.py``'s anchors files (``OUT/tsa/<variant>.jsonl``); the
untouched workdir's own anchor is a token with no certificate and no real signature."""
FAILS_WITH_THE_BUNDLE = {"untouched", "untrusted", "expired", "tampered_imprint"}
"""What bernstein's anchor pillar fails once given the bundle (it passes them all without)."""


@pytest.fixture(scope="module")
def tsa_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tsa")
    made = {"untouched": root / "untouched"}
    shutil.copytree(sealed, made["untouched"])
    for variant in TSA_VARIANTS:
        target = root / variant
        shutil.copytree(sealed, target)
        shutil.copyfile(sealed / "tsa" / f"{variant}.jsonl", target / ANCHORS)
        made[variant] = target
    return made


@pytest.fixture(scope="module")
def bernstein_says_tsa(tsa_cases: dict[str, Path]) -> dict[tuple[str, bool], dict[str, Any]]:
    """bernstein's audit verify per (case, with --rfc3161-trusted-tsa-bundle)."""
    specs = []
    for name, workdir in tsa_cases.items():
        bundle = str((workdir / "tsa" / "bundle.pem").resolve())
        specs.append((name, False, {"workdir": str(workdir)}))
        specs.append((name, True, {"workdir": str(workdir), "tsa_bundle": bundle}))
    answers = bernstein_audits([spec for _, _, spec in specs])
    return {(name, bundled): a for (name, bundled, _), a in zip(specs, answers, strict=True)}


def test_the_tsa_cases_are_what_they_claim(
    bernstein_says_tsa: dict[tuple[str, bool], Any],
) -> None:
    for name in ("untouched", *TSA_VARIANTS):
        assert bernstein_says_tsa[(name, False)]["code"] == 0, name
        expected = 1 if name in FAILS_WITH_THE_BUNDLE else 0
        assert bernstein_says_tsa[(name, True)]["code"] == expected, name
        anchors_ok = bernstein_says_tsa[(name, True)]["pillars"]["_verify_anchors"]
        assert anchors_ok is (name not in FAILS_WITH_THE_BUNDLE), name


@pytest.mark.parametrize("name", ["untouched", *TSA_VARIANTS])
@pytest.mark.parametrize("bundled", [False, True], ids=["no-bundle", "tsa-bundle"])
def test_compat_exit_code_with_a_tsa_bundle_is_bernsteins(
    name: str,
    bundled: bool,
    tsa_cases: dict[str, Path],
    bernstein_says_tsa: dict[tuple[str, bool], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = tsa_cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    if bundled:
        args += ["--tsa-bundle", str(workdir / "tsa" / "bundle.pem")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_tsa[(name, bundled)]
    assert result.code == theirs["code"], (result.out, theirs)
    anchors = next(p for p in result.json()["pillars"] if p["name"] == "External Anchors")
    assert anchors["ok"] is theirs["pillars"]["_verify_anchors"], anchors


@pytest.mark.parametrize("name", ["untouched", *TSA_VARIANTS])
def test_strict_authenticates_anchors_with_a_tsa_bundle(
    name: str, tsa_cases: dict[str, Path], tmp_path: Path
) -> None:
    """Strict fails what bernstein fails with the bundle, and a signer certificate not
    marked for timestamping (RFC 3161 §2.3), which bernstein accepts."""
    workdir = tsa_cases[name]
    key = workdir / "audit.key"
    bundled = import_and_verify(
        workdir, tmp_path / "bundled.db", key=key, tsa_bundle=workdir / "tsa" / "bundle.pem"
    )
    caught = "bernstein.rfc3161.tsa" in bundled.workspace
    assert caught == (name in FAILS_WITH_THE_BUNDLE | {"no_timestamping_usage"}), bundled.workspace
    assert "bernstein.rfc3161.token" not in bundled.workspace
    assert not any("TSAs that signed them were not" in note for note in bundled.notes)
    assert any("their TSAs against the trust bundle" in note for note in bundled.notes)
    plain = import_and_verify(workdir, tmp_path / "plain.db", key=key)
    assert not {c for c in plain.workspace if c.startswith("bernstein.rfc3161")}
    assert any("not authenticated (give --tsa-bundle)" in note for note in plain.notes)


def test_a_tsa_bundle_that_holds_no_certificate_is_a_usage_error(
    tsa_cases: dict[str, Path], cli: Any, tmp_path: Path
) -> None:
    workdir = tsa_cases["good"]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    bad = tmp_path / "bundle.pem"
    bad.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    for args in (
        ["bernstein", "audit-verify", "--tsa-bundle", str(bad)],
        ["verify", "--tsa-bundle", str(bad)],
        ["verify", "--tsa-bundle", str(tmp_path / "absent.pem")],
    ):
        result = cli(*args, ledger=ledger)
        assert result.code == 64, (args, result.out, result.err)
        assert "--tsa-bundle" in result.err


# ---- the witness's own state (--witness-state) ---------------------------------------------


def roll_back_with_the_cosignatures(wd: Path) -> None:
    """Chain, seal, checkpoints and co-signatures rolled back together to the first seal:
    only the witness's own state (outside the workdir) remembers the longer history."""
    shutil.rmtree(wd / AUDIT)
    shutil.copytree(wd / "first-audit", wd / AUDIT)


def _edit_pins(wd: Path, **changes: Any) -> None:
    for pin in (wd / "witness-state").glob("*.json"):
        doc = json.loads(pin.read_bytes())
        doc.update(changes)
        pin.write_text(json.dumps(doc) + "\n")


def unreadable_pin_count(wd: Path) -> None:
    """A pin whose count bernstein's reader cannot turn into an integer: it raises."""
    _edit_pins(wd, entry_count="many")


def roll_back_under_a_pin_of_another_version(wd: Path) -> None:
    """The rollback, but the witness's pin is of a version bernstein does not read."""
    roll_back_with_the_cosignatures(wd)
    _edit_pins(wd, version=2)


STATE_CASES: dict[str, Callable[[Path], None]] = {
    f.__name__: f
    for f in (
        untouched,
        roll_back_everything,
        roll_back_with_the_cosignatures,
        unreadable_pin_count,
        roll_back_under_a_pin_of_another_version,
    )
}
FAILS_WITH_THE_STATE = {
    "roll_back_everything",
    "roll_back_with_the_cosignatures",
    "unreadable_pin_count",
}


@pytest.fixture(scope="module")
def state_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("state"), STATE_CASES)


@pytest.fixture(scope="module")
def bernstein_says_state(state_cases: dict[str, Path]) -> dict[tuple[str, bool], dict[str, Any]]:
    """bernstein's audit verify --witness-key per (case, with --witness-state)."""
    specs = []
    for name, workdir in state_cases.items():
        spec = {"workdir": str(workdir), "witness_key": str((workdir / "witness.pub").resolve())}
        specs.append((name, False, spec))
        specs.append((name, True, {**spec, "witness_state": str(workdir / "witness-state")}))
    answers = bernstein_audits([spec for _, _, spec in specs])
    return {(name, stated): a for (name, stated, _), a in zip(specs, answers, strict=True)}


def test_the_state_cases_are_what_they_claim(
    bernstein_says_state: dict[tuple[str, bool], Any],
) -> None:
    for name in STATE_CASES:
        without = 1 if name == "roll_back_everything" else 0
        assert bernstein_says_state[(name, False)]["code"] == without, name
        with_state = 1 if name in FAILS_WITH_THE_STATE else 0
        assert bernstein_says_state[(name, True)]["code"] == with_state, name
    raised = bernstein_says_state[("unreadable_pin_count", True)]["pillars"]["_verify_witness"]
    assert raised == "raises ValueError"


@pytest.mark.parametrize("name", sorted(STATE_CASES))
@pytest.mark.parametrize("stated", [False, True], ids=["no-state", "witness-state"])
def test_compat_exit_code_with_the_witness_state_is_bernsteins(
    name: str,
    stated: bool,
    state_cases: dict[str, Path],
    bernstein_says_state: dict[tuple[str, bool], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = state_cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    args += ["--witness-key", str(workdir / "witness.pub")]
    if stated:
        args += ["--witness-state", str(workdir / "witness-state")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_state[(name, stated)]
    assert result.code == theirs["code"], (result.out, theirs)
    witness = next(p for p in result.json()["pillars"] if p["name"] == "Witness Co-signatures")
    assert witness["ok"] is (theirs["pillars"]["_verify_witness"] is True), witness


def _strict_witness_findings(
    workdir: Path, ledger: Path, state: Path | None
) -> tuple[set[tuple[str, str | None]], list[str]]:
    """Strict verify's witness findings ``(check, subject)`` (the witness's key trusted),
    and its notes, with the witness state ``state`` or without."""
    outcome = import_and_verify(
        workdir,
        ledger,
        key=workdir / "audit.key",
        trust=(_witness_trust(workdir),),
        witness_state=state,
    )
    found = {f for fields in outcome.fields.values() for f in fields}
    witness = {(check, subject) for _, check, subject in found if "witness" in check}
    witness |= {
        (check, subject) for check, subject in outcome.workspace_fields if "witness" in check
    }
    return witness, outcome.notes


# What strict says with the state of what bernstein fails with it (FAILS_WITH_THE_STATE).
STATE_FINDINGS = {
    "roll_back_everything": "bernstein.witness.contradiction",
    "roll_back_with_the_cosignatures": "bernstein.witness.contradiction",
    "unreadable_pin_count": "bernstein.witness.state",
}


@pytest.mark.parametrize("name", sorted(STATE_CASES))
def test_strict_holds_the_history_to_the_witness_state(
    name: str, state_cases: dict[str, Path], tmp_path: Path
) -> None:
    """Strict verify --witness-state fails whatever bernstein's audit verify fails with the
    state, naming the state; a rollback that took the co-signatures with it is found only
    with it."""
    workdir = state_cases[name]
    state = workdir / "witness-state"
    with_state, notes = _strict_witness_findings(workdir, tmp_path / "with.db", state)
    without, _ = _strict_witness_findings(workdir, tmp_path / "without.db", None)
    from_state = {check for check, subject in with_state if subject == "--witness-state"}
    if name in FAILS_WITH_THE_STATE:
        assert from_state == {STATE_FINDINGS[name]}, with_state
    else:
        assert not from_state, with_state
    assert not {c for c, s in without if s == "--witness-state"}
    if name == "roll_back_with_the_cosignatures":
        assert not without, "found without the state: the case proves nothing"
    if name == "roll_back_under_a_pin_of_another_version":
        assert any("holds no pin" in note for note in notes), notes


def test_the_witness_state_is_for_the_strict_verdict(
    state_cases: dict[str, Path], cli: Any, tmp_path: Path
) -> None:
    workdir = state_cases["roll_back_with_the_cosignatures"]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    state = str(workdir / "witness-state")
    result = cli("verify", "--compat", "bernstein", "--witness-state", state, ledger=ledger)
    assert result.code == 64 and "strict" in result.err, result.err
    result = cli("verify", "--witness-state", str(tmp_path / "absent"), ledger=ledger)
    assert result.code == 64 and "no such folder" in result.err, result.err
    trust = _witness_trust(workdir)
    key = str(workdir / "audit.key")
    strict = ["verify", "--audit-key", key, "--trust", trust, "--json"]
    result = cli(*strict, "--witness-state", state, ledger=ledger)
    assert result.code == 2, result.out
    found = [
        d for d in result.json()["workspace"] if d["check"] == "bernstein.witness.contradiction"
    ]
    assert found and found[0]["subject"] == "--witness-state", result.json()["workspace"]


# ---- the lineage store's activity ----------------------------------------------------------

LINEAGE_LOG = Path(".sdd/lineage/log.jsonl")


def _lineage_log(wd: Path, name: str) -> None:
    shutil.copyfile(wd / "lineage-store" / f"{name}.jsonl", wd / LINEAGE_LOG)


def lineage_active(wd: Path) -> None:
    _lineage_log(wd, "active")


def lineage_orphan(wd: Path) -> None:
    _lineage_log(wd, "orphan")


def lineage_revoked(wd: Path) -> None:
    """The first entry revoked by a record the audit chain holds (appended after the seal)."""
    _lineage_log(wd, "active")
    shutil.rmtree(wd / AUDIT)
    shutil.copytree(wd / "lineage-store" / "revoked-audit", wd / AUDIT)


def lineage_unparsable(wd: Path) -> None:
    _lineage_log(wd, "active")
    with (wd / LINEAGE_LOG).open("ab") as handle:
        handle.write(b"{not json\n")


def lineage_refused_kind(wd: Path) -> None:
    """An entry bernstein's constructor refuses (an unknown artefact kind): it raises."""
    lines = (wd / "lineage-store" / "active.jsonl").read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"artefact_kind":"file"', b'"artefact_kind":"folder"')
    (wd / LINEAGE_LOG).write_bytes(b"".join(lines))


def lineage_edited_parent(wd: Path) -> None:
    """The first entry edited: the second's parent no longer names an entry of the log."""
    lines = (wd / "lineage-store" / "active.jsonl").read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b"call-first", b"call-forged")
    (wd / LINEAGE_LOG).write_bytes(b"".join(lines))


def lineage_store_folder_a_file(wd: Path) -> None:
    """``LineageStore(.sdd/lineage)`` makes its ``tips`` folder: a file there raises
    ``FileExistsError`` (the pillar reports a failed read)."""
    _lineage_log(wd, "active")
    (wd / LINEAGE_LOG).with_name("tips").write_bytes(b"")


def lineage_store_folder_a_file_without_log(wd: Path) -> None:
    """The store is opened before the log is read: it fails with no log at all."""
    (wd / LINEAGE_LOG).with_name("signatures").write_bytes(b"")


def _first_signature(wd: Path) -> Path:
    """Where ``LineageStore.read_log`` reads the first entry's signature (if it exists)."""
    entry = json.loads((wd / LINEAGE_LOG).read_bytes().splitlines()[0])
    canonical = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    stem = hashlib.sha256(canonical.encode()).hexdigest()
    full = hashlib.sha256(entry["artefact_path"].encode()).hexdigest()
    path = (wd / LINEAGE_LOG).with_name("signatures") / full[:2] / full / f"{stem}.jws"
    path.parent.mkdir(parents=True)
    return path


def lineage_signature_a_folder(wd: Path) -> None:
    _lineage_log(wd, "active")
    _first_signature(wd).mkdir()


def lineage_signature_not_utf8(wd: Path) -> None:
    _lineage_log(wd, "active")
    _first_signature(wd).write_bytes(b"\xff.sig")


def lineage_signature_read(wd: Path) -> None:
    """A signature that reads: bernstein does not check it here."""
    _lineage_log(wd, "active")
    _first_signature(wd).write_bytes(b"not.a.jws")


LINEAGE_CASES: dict[str, Callable[[Path], None]] = {
    f.__name__: f
    for f in (
        lineage_active,
        lineage_orphan,
        lineage_revoked,
        lineage_unparsable,
        lineage_refused_kind,
        lineage_edited_parent,
        lineage_store_folder_a_file,
        lineage_store_folder_a_file_without_log,
        lineage_signature_a_folder,
        lineage_signature_not_utf8,
        lineage_signature_read,
    )
}
UNREADABLE_LINEAGE_STORES = {
    "lineage_store_folder_a_file",
    "lineage_store_folder_a_file_without_log",
    "lineage_signature_a_folder",
    "lineage_signature_not_utf8",
}


@pytest.fixture(scope="module")
def lineage_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("lineage"), LINEAGE_CASES)


@pytest.fixture(scope="module")
def bernstein_says_lineage(lineage_cases: dict[str, Path]) -> dict[str, dict[str, Any]]:
    names = list(lineage_cases)
    answers = bernstein_audits([{"workdir": str(lineage_cases[name])} for name in names])
    return dict(zip(names, answers, strict=True))


def test_the_lineage_cases_are_what_they_claim(
    bernstein_says_lineage: dict[str, dict[str, Any]],
) -> None:
    pillars = {name: a["pillars"] for name, a in bernstein_says_lineage.items()}
    assert pillars["lineage_active"]["_verify_lineage_active_set"] is True
    assert bernstein_says_lineage["lineage_active"]["code"] == 0
    for name in ("lineage_orphan", "lineage_revoked", "lineage_edited_parent"):
        assert pillars[name]["_verify_lineage_active_set"] is False, name
    for name in ("lineage_unparsable", "lineage_refused_kind", "lineage_signature_not_utf8"):
        assert str(pillars[name]["_verify_lineage_active_set"]).startswith("raises"), name
    for name in UNREADABLE_LINEAGE_STORES - {"lineage_signature_not_utf8"}:
        assert pillars[name]["_verify_lineage_active_set"] is False, name
    assert pillars["lineage_signature_read"]["_verify_lineage_active_set"] is True
    # Only the lineage pillar differs from the untouched workdir's verdict.
    others = {k: v for k, v in pillars["lineage_revoked"].items() if "lineage" not in k}
    assert all(v is True for v in others.values()), others


@pytest.mark.parametrize("name", sorted(LINEAGE_CASES))
def test_compat_lineage_activity_is_bernsteins(
    name: str,
    lineage_cases: dict[str, Path],
    bernstein_says_lineage: dict[str, dict[str, Any]],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = lineage_cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_lineage[name]
    assert result.code == theirs["code"], (result.out, theirs)
    assert result.json()["not_reproduced"] == []
    lineage = next(p for p in result.json()["pillars"] if p["name"] == "Lineage Activity")
    assert lineage["ok"] is (theirs["pillars"]["_verify_lineage_active_set"] is True), lineage


# ---- tears and their acknowledgements ------------------------------------------------------

TEAR_VARIANTS = ("torn", "torn_sealed", "torn_acknowledged", "torn_acknowledged_elsewhere")
"""``data/sealed_workdirs.py``'s ``OUT/tears/<variant>`` audit folders."""


@pytest.fixture(scope="module")
def tear_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tears")
    made = {}
    for variant in TEAR_VARIANTS:
        shutil.copytree(sealed, root / variant)
        shutil.rmtree(root / variant / AUDIT)
        shutil.copytree(sealed / "tears" / variant, root / variant / AUDIT)
        made[variant] = root / variant
    return made


@pytest.fixture(scope="module")
def bernstein_says_tears(tear_cases: dict[str, Path]) -> dict[str, dict[str, Any]]:
    names = list(tear_cases)
    answers = bernstein_audits([{"workdir": str(tear_cases[name])} for name in names])
    return dict(zip(names, answers, strict=True))


def test_the_tear_cases_are_what_they_claim(bernstein_says_tears: dict[str, Any]) -> None:
    hmac = {name: a["pillars"]["_verify_hmac_chain"] for name, a in bernstein_says_tears.items()}
    assert hmac == {
        "torn": False,
        "torn_sealed": False,
        "torn_acknowledged": True,
        "torn_acknowledged_elsewhere": False,
    }
    assert bernstein_says_tears["torn_acknowledged"]["code"] == 0


@pytest.mark.parametrize("name", TEAR_VARIANTS)
def test_compat_tears_are_bernsteins(
    name: str,
    tear_cases: dict[str, Path],
    bernstein_says_tears: dict[str, dict[str, Any]],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = tear_cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_tears[name]
    assert result.code == theirs["code"], (result.out, theirs)
    hmac = next(p for p in result.json()["pillars"] if p["name"] == "HMAC Chain")
    assert hmac["ok"] is theirs["pillars"]["_verify_hmac_chain"], hmac


@pytest.mark.parametrize("name", TEAR_VARIANTS)
def test_strict_reports_every_tear_even_acknowledged(
    name: str, tear_cases: dict[str, Path], tmp_path: Path
) -> None:
    """An acknowledgement says an operator looked; the records are still lost or damaged,
    so strict keeps the finding."""
    workdir = tear_cases[name]
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    assert "bernstein.audit.chain" in outcome.workspace, outcome.workspace


# ---- seal anchors: bernstein seal verify ----------------------------------------------------


def _install_seal_anchor(wd: Path, name: str) -> None:
    shutil.copyfile(wd / "tsa" / f"seal-{name}.json", anchored_run(wd) / "seal_anchor.json")


def trusted_seal_anchor(wd: Path) -> None:
    _install_seal_anchor(wd, "good")


def untrusted_seal_anchor(wd: Path) -> None:
    _install_seal_anchor(wd, "untrusted")


def trusted_seal_anchor_cut_journal(wd: Path) -> None:
    _install_seal_anchor(wd, "good")
    cut_anchored_journal(wd)


def unreadable_seal_anchor(wd: Path) -> None:
    (anchored_run(wd) / "seal_anchor.json").write_bytes(b"[1]\n")


SEAL_CASES: dict[str, Callable[[Path], None]] = {
    "fake_token": untouched,
    "trusted": trusted_seal_anchor,
    "untrusted": untrusted_seal_anchor,
    "trusted_cut_journal": trusted_seal_anchor_cut_journal,
    "unreadable": unreadable_seal_anchor,
}


@pytest.fixture(scope="module")
def seal_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("seal-anchors"), SEAL_CASES)


def _seal_specs(seal_cases: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(case, run, with the bundle); ``missing`` asks for a run without an anchor."""
    specs = []
    for name, workdir in seal_cases.items():
        for bundled in (False, True):
            specs.append((name, anchored_run(workdir).name, bundled))
    untouched_wd = seal_cases["fake_token"]
    specs += [("missing", _second_run(untouched_wd).name, b) for b in (False, True)]
    return specs


@pytest.fixture(scope="module")
def bernstein_says_seal(seal_cases: dict[str, Path]) -> dict[tuple[str, bool], dict[str, Any]]:
    specs = _seal_specs(seal_cases)
    raw = []
    for name, run, bundled in specs:
        workdir = seal_cases.get(name, seal_cases["fake_token"])
        spec = {"workdir": str(workdir), "run": run}
        if bundled:
            spec["tsa_bundle"] = str(workdir / "tsa" / "bundle.pem")
        raw.append(json.dumps(spec))
    stdout = run_script(GENERATOR, "seal-status", *raw)
    answers = [json.loads(line) for line in stdout.splitlines()]
    assert len(answers) == len(specs)
    return {(name, b): a for (name, _, b), a in zip(specs, answers, strict=True)}


def test_the_seal_cases_are_what_they_claim(
    bernstein_says_seal: dict[tuple[str, bool], dict[str, Any]],
) -> None:
    statuses = {key: answer["status"] for key, answer in bernstein_says_seal.items()}
    assert statuses == {
        ("fake_token", False): "unverifiable",
        ("fake_token", True): "invalid",
        ("trusted", False): "unverifiable",
        ("trusted", True): "verified",
        ("untrusted", False): "unverifiable",
        ("untrusted", True): "invalid",
        ("trusted_cut_journal", False): "mismatched",
        ("trusted_cut_journal", True): "mismatched",
        ("unreadable", False): "unreadable",
        ("unreadable", True): "unreadable",
        ("missing", False): "missing",
        ("missing", True): "missing",
    }


@pytest.mark.parametrize("name", [*SEAL_CASES, "missing"])
@pytest.mark.parametrize("bundled", [False, True], ids=["no-bundle", "tsa-bundle"])
def test_seal_verify_is_bernsteins(
    name: str,
    bundled: bool,
    seal_cases: dict[str, Path],
    bernstein_says_seal: dict[tuple[str, bool], dict[str, Any]],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = seal_cases.get(name, seal_cases["fake_token"])
    run = _second_run(workdir).name if name == "missing" else anchored_run(workdir).name
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "seal-verify", run, "--json"]
    if bundled:
        args += ["--tsa-bundle", str(workdir / "tsa" / "bundle.pem")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_seal[(name, bundled)]
    assert result.code == theirs["code"], (result.out, theirs)
    assert result.json()["status"] == theirs["status"]


@pytest.mark.parametrize("name", sorted(SEAL_CASES))
def test_strict_authenticates_seal_anchors_with_a_tsa_bundle(
    name: str,
    seal_cases: dict[str, Path],
    bernstein_says_seal: dict[tuple[str, bool], dict[str, Any]],
    tmp_path: Path,
) -> None:
    """Strict finds a seal anchor bernstein's seal verify does not verify with the bundle
    (strict's own head and token checks name the mismatched and unreadable ones)."""
    workdir = seal_cases[name]
    run_id = anchored_run(workdir).name
    outcome = import_and_verify(
        workdir,
        tmp_path / "ledger.db",
        key=workdir / "audit.key",
        tsa_bundle=workdir / "tsa" / "bundle.pem",
    )
    found = {c for c in outcome.findings[run_id] if c.startswith("bernstein.seal_anchor")}
    verified = bernstein_says_seal[(name, True)]["status"] == "verified"
    assert (not found) is verified, found
    if bernstein_says_seal[(name, True)]["status"] == "invalid":
        assert found == {"bernstein.seal_anchor.tsa"}


# ---- the journal against its seal: bernstein replay --verify --------------------------------


def discarded_line(wd: Path) -> None:
    """A line bernstein's reader discards appended to the second run's journal."""
    with (_second_run(wd) / "journal.jsonl").open("ab") as handle:
        handle.write(b"not json\n")


def edited_journal_row(wd: Path) -> None:
    journal = _second_run(wd) / "journal.jsonl"
    lines = _lines(journal)
    lines[1] = lines[1].replace(b'"event": "', b'"event": "x', 1)
    journal.write_bytes(b"".join(lines))


def cut_journal_under_a_tampered_spine(wd: Path) -> None:
    """A cut tail whose spine also fails its verify: bernstein then trusts no seal."""
    cut_sealed_journal(wd)
    edit_spine_entry(wd)


REPLAY_CASES: dict[str, Callable[[Path], None]] = {
    f.__name__: f
    for f in (
        untouched,
        cut_sealed_journal,
        discarded_line,
        edited_journal_row,
        cut_journal_under_a_tampered_spine,
    )
}


@pytest.fixture(scope="module")
def replay_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("replay"), REPLAY_CASES)


@pytest.fixture(scope="module")
def bernstein_says_replay(replay_cases: dict[str, Path]) -> dict[tuple[str, bool], Any]:
    specs = [
        (name, keyed, {"workdir": str(wd), "run": _second_run(wd).name, "keyed": keyed})
        for name, wd in replay_cases.items()
        for keyed in (False, True)
    ]
    specs.append(("no_such_run", True, {"workdir": str(replay_cases["untouched"]), "run": "r9"}))
    stdout = run_script(GENERATOR, "replay-status", *(json.dumps(s) for _, _, s in specs))
    answers = [json.loads(line) for line in stdout.splitlines()]
    assert len(answers) == len(specs)
    return {(name, keyed): a for (name, keyed, _), a in zip(specs, answers, strict=True)}


def test_the_replay_cases_are_what_they_claim(bernstein_says_replay: dict[Any, Any]) -> None:
    statuses = {key: answer["status"] for key, answer in bernstein_says_replay.items()}
    assert statuses == {
        ("untouched", False): "unverifiable",
        ("untouched", True): "verified",
        ("cut_sealed_journal", False): "unverifiable",
        ("cut_sealed_journal", True): "mismatched",
        ("discarded_line", False): "diverged",
        ("discarded_line", True): "diverged",
        ("edited_journal_row", False): "diverged",
        ("edited_journal_row", True): "diverged",
        ("cut_journal_under_a_tampered_spine", False): "unverifiable",
        ("cut_journal_under_a_tampered_spine", True): "unverifiable",
        ("no_such_run", True): "missing",
    }


@pytest.mark.parametrize(
    ("name", "keyed"),
    [(name, keyed) for name in REPLAY_CASES for keyed in (False, True)] + [("no_such_run", True)],
)
def test_replay_verify_is_bernsteins(
    name: str,
    keyed: bool,
    replay_cases: dict[str, Path],
    bernstein_says_replay: dict[tuple[str, bool], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = replay_cases.get(name, replay_cases["untouched"])
    run = "r9" if name == "no_such_run" else _second_run(workdir).name
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "replay-verify", run, "--json"]
    if keyed:
        args += ["--audit-key", str(workdir / "audit.key")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_replay[(name, keyed)]
    assert result.code == theirs["code"], (result.out, theirs)
    assert result.json()["status"] == theirs["status"]


@pytest.mark.parametrize("name", sorted(LINEAGE_CASES))
def test_strict_fails_every_lineage_log_bernstein_fails(
    name: str,
    lineage_cases: dict[str, Path],
    bernstein_says_lineage: dict[str, dict[str, Any]],
    tmp_path: Path,
) -> None:
    workdir = lineage_cases[name]
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=workdir / "audit.key")
    passed = bernstein_says_lineage[name]["pillars"]["_verify_lineage_active_set"] is True
    assert ("bernstein.lineage.activity" in outcome.workspace) is not passed, outcome.workspace


# ---- hostile shapes: a folder where bernstein reads a file, and the like --------------------

PILLARS = {
    "HMAC Chain": "_verify_hmac_chain",
    "Merkle Tree": "_verify_merkle_tree",
    "Checkpoints": "_verify_checkpoints",
    "External Anchors": "_verify_anchors",
    "Witness Co-signatures": "_verify_witness",
    "Lineage Activity": "_verify_lineage_active_set",
}
"""Our pillars by bernstein's functions' names."""


def _a_folder(path: Path) -> None:
    if path.exists():
        path.unlink()
    path.mkdir(parents=True)


def anchors_a_folder(wd: Path) -> None:
    _a_folder(wd / ANCHORS)


def cosignatures_a_folder(wd: Path) -> None:
    _a_folder(wd / COSIGNATURES)


def checkpoint_ledger_a_folder(wd: Path) -> None:
    """bernstein's checkpoint pillar fails to read it; its anchor and witness pillars then
    check no roots (``_known_checkpoint_roots`` is None), and pass."""
    _a_folder(wd / LEDGER)


def checkpoint_ledger_a_folder_without_pointer(wd: Path) -> None:
    _a_folder(wd / LEDGER)
    (wd / POINTER).unlink()


HUGE_INTEGER = b"9" * 5_000
"""Past Python's 4,300 digits: ``json.loads`` raises ``ValueError``, not the
``JSONDecodeError`` bernstein's readers catch."""
NESTED_DEEP = b"[" * 100_000 + b"]" * 100_000


def _with_huge_integer(document: bytes) -> bytes:
    return b'{"x":' + HUGE_INTEGER + b"," + document.lstrip()[1:]


def pointer_huge_integer(wd: Path) -> None:
    (wd / POINTER).write_bytes(_with_huge_integer((wd / POINTER).read_bytes()))


def pointer_nested_deep(wd: Path) -> None:
    (wd / POINTER).write_bytes(NESTED_DEEP + b"\n")


def pointer_hmac_not_ascii(wd: Path) -> None:
    """bernstein's ``compare_digest`` raises ``TypeError`` on a non-ASCII string."""
    doc = json.loads((wd / POINTER).read_bytes())
    doc["hmac"] = "\u00e9" + doc["hmac"][1:]
    (wd / POINTER).write_bytes(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def ledger_last_line_huge_integer(wd: Path) -> None:
    """A committed last line bernstein's reader raises on (not a torn append it skips)."""
    with (wd / LEDGER).open("ab") as handle:
        handle.write(b'{"x":' + HUGE_INTEGER + b"}\n")


def ledger_last_line_nested_deep(wd: Path) -> None:
    with (wd / LEDGER).open("ab") as handle:
        handle.write(NESTED_DEEP + b"\n")


def ledger_hmac_not_ascii(wd: Path) -> None:
    path = wd / LEDGER
    lines = _lines(path)
    doc = json.loads(lines[0])
    doc["hmac"] = "\u00e9" + doc["hmac"][1:]
    lines[0] = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def newest_seal_a_folder(wd: Path) -> None:
    """A folder named after every seal: bernstein reads it as the newest seal, and raises."""
    (wd / AUDIT / "merkle" / "seal-99991231T235959Z.json").mkdir()


def lineage_log_a_folder(wd: Path) -> None:
    """``LineageStore.read_log`` finds the log (``exists``) and its read raises
    ``IsADirectoryError``: the lineage pillar reports a failed read."""
    (wd / LINEAGE_LOG).mkdir()


def checkpoints_folder_a_file(wd: Path) -> None:
    """Every read under it raises ``NotADirectoryError``: the checkpoint, anchor and
    witness pillars fail (the pointer is ignored)."""
    shutil.rmtree(wd / LEDGER.parent)
    (wd / LEDGER.parent).write_bytes(b"")


def archive_a_folder(wd: Path) -> None:
    """bernstein's archive glob lists it, and its read fails: the HMAC pillar reports an
    unreadable archived segment (the chain snapshot skips it)."""
    (wd / AUDIT / "archive" / "2025-12-31.jsonl.gz").mkdir(parents=True)


def pin_huge_integer(wd: Path) -> None:
    """The witness's pin (read with --witness-state): bernstein's ``load_witness_pin``
    catches only ``JSONDecodeError``, so its witness pillar raises."""
    for pin in (wd / "witness-state").glob("*.json"):
        pin.write_bytes(_with_huge_integer(pin.read_bytes()))


def pin_nested_deep(wd: Path) -> None:
    for pin in (wd / "witness-state").glob("*.json"):
        pin.write_bytes(NESTED_DEEP)


def anchors_torn_line_huge_integer(wd: Path) -> None:
    """A torn last line (no newline) is skipped only when its parse fails as bernstein's
    reader catches it: the integer raises past it, and the anchor pillar with it."""
    with (wd / ANCHORS).open("ab") as handle:
        handle.write(b'{"x":' + HUGE_INTEGER)


def cosignatures_torn_line_nested_deep(wd: Path) -> None:
    with (wd / COSIGNATURES).open("ab") as handle:
        handle.write(b"[" * 100_000)


def archive_in_a_subfolder(wd: Path) -> None:
    """bernstein's ``archive/*.jsonl.gz`` glob does not recurse: an archive one folder
    down is not a segment of its chain."""
    folder = wd / AUDIT / "archive" / "old"
    folder.mkdir(parents=True)
    (folder / "2000-01-01.jsonl.gz").write_bytes(gzip.compress(_day_file(wd).read_bytes()))


def only_an_archive_folder(wd: Path) -> None:
    """No day file left, and a folder named like an archive: the chain's only segment is
    one bernstein cannot read."""
    for day in (wd / AUDIT).glob("*.jsonl"):
        day.unlink()
    archive_a_folder(wd)


def only_an_archive_not_gzip(wd: Path) -> None:
    for day in (wd / AUDIT).glob("*.jsonl"):
        day.unlink()
    (wd / AUDIT / "archive").mkdir(parents=True, exist_ok=True)
    (wd / AUDIT / "archive" / "2025-12-31.jsonl.gz").write_bytes(b"not gzip\n")


# Bad lines in the audit segments themselves. bernstein's HMAC walk and its checkpoints'
# snapshot (``_canonical_records``, read by the checkpoint, anchor and witness pillars)
# catch only ``JSONDecodeError`` and ``UnicodeDecodeError`` from ``json.loads``.

HUGE_INTEGER_LINE = b'{"x": ' + HUGE_INTEGER + b"}"
NOT_FINITE_LINE = b'{"x": NaN, "y": -Infinity}'
LONE_SURROGATE_LINE = b'{"x": "\\ud800"}'
NOT_UTF8_LINE = b'{"x": "\xff"}'
NOT_OBJECT_LINE = b"[1, 2]"
BOM_LINE = b'\xef\xbb\xbf{"x": 1}'
"""``json.loads`` of bytes decodes a BOM away (``utf-8-sig``); of text it refuses it."""
OLDER_DAY = "2025-12-31.jsonl"
"""A day file before every live one: the first segment of the chain."""


def _append_to_day(wd: Path, data: bytes) -> None:
    with _day_file(wd).open("ab") as handle:
        handle.write(data)


def _older_day(wd: Path, data: bytes) -> None:
    (wd / AUDIT / OLDER_DAY).write_bytes(data)


def _archived_with(wd: Path, data: bytes) -> None:
    """Retention archived the newest day file (its live copy gone), ``data`` after it."""
    day = _day_file(wd)
    archive = wd / AUDIT / "archive"
    archive.mkdir(exist_ok=True)
    (archive / f"{day.name}.gz").write_bytes(gzip.compress(day.read_bytes() + data))
    day.unlink()


def day_line_huge_integer(wd: Path) -> None:
    _append_to_day(wd, HUGE_INTEGER_LINE + b"\n")


def day_line_nested_deep(wd: Path) -> None:
    _append_to_day(wd, NESTED_DEEP + b"\n")


def day_line_not_finite(wd: Path) -> None:
    _append_to_day(wd, NOT_FINITE_LINE + b"\n")


def day_line_lone_surrogate(wd: Path) -> None:
    _append_to_day(wd, LONE_SURROGATE_LINE + b"\n")


def day_line_not_utf8(wd: Path) -> None:
    _append_to_day(wd, NOT_UTF8_LINE + b"\n")


def day_line_not_object(wd: Path) -> None:
    _append_to_day(wd, NOT_OBJECT_LINE + b"\n")


def day_line_bom(wd: Path) -> None:
    _append_to_day(wd, BOM_LINE + b"\n")


def day_line_utf16_huge_integer(wd: Path) -> None:
    """``json.loads`` of bytes reads a line whose second byte is NUL as UTF-16."""
    _append_to_day(wd, HUGE_INTEGER_LINE.decode().encode("utf-16-le") + b"\n")


def day_torn_line_huge_integer(wd: Path) -> None:
    """The newest day file's torn last line (no final newline): a tear to bernstein's
    walk, once its parse does not raise."""
    _append_to_day(wd, HUGE_INTEGER_LINE)


def day_torn_line_nested_deep(wd: Path) -> None:
    _append_to_day(wd, NESTED_DEEP)


def day_torn_line_not_utf8(wd: Path) -> None:
    _append_to_day(wd, NOT_UTF8_LINE)


def older_day_line_huge_integer(wd: Path) -> None:
    _older_day(wd, HUGE_INTEGER_LINE + b"\n")


def older_day_torn_line_huge_integer(wd: Path) -> None:
    _older_day(wd, HUGE_INTEGER_LINE)


def older_day_torn_line_nested_deep(wd: Path) -> None:
    _older_day(wd, NESTED_DEEP)


def older_day_line_not_object(wd: Path) -> None:
    _older_day(wd, NOT_OBJECT_LINE + b"\n")


def archive_line_huge_integer(wd: Path) -> None:
    _archived_with(wd, HUGE_INTEGER_LINE + b"\n")


def archive_line_nested_deep(wd: Path) -> None:
    _archived_with(wd, NESTED_DEEP + b"\n")


def archive_line_not_finite(wd: Path) -> None:
    _archived_with(wd, NOT_FINITE_LINE + b"\n")


def archive_line_not_utf8(wd: Path) -> None:
    _archived_with(wd, NOT_UTF8_LINE + b"\n")


def archive_line_bom(wd: Path) -> None:
    _archived_with(wd, BOM_LINE + b"\n")


def archive_torn_line_huge_integer(wd: Path) -> None:
    _archived_with(wd, HUGE_INTEGER_LINE)


def archive_torn_line_nested_deep(wd: Path) -> None:
    _archived_with(wd, NESTED_DEEP)


# The same lines beside a lineage store's log: bernstein's lineage pillar then reads
# revocations, opening the audit log (its tail recovery reads the newest lines back) and
# querying the live day files (``str.splitlines``; only ``JSONDecodeError`` skipped, and
# ``.get`` called on what parses); whatever raises fails the pillar.


def beside_lineage(tamper: Callable[[Path], None]) -> Callable[[Path], None]:
    """``tamper``, a lineage store's log beside it (the case ``lineage_<tamper>``)."""

    def case(wd: Path) -> None:
        lineage_active(wd)
        tamper(wd)

    case.__name__ = f"lineage_{tamper.__name__}"
    return case


def lineage_day_line_split_to_a_list(wd: Path) -> None:
    """An object whose string holds raw U+2028: ``str.splitlines`` cuts ``[1]`` out of it."""
    lineage_active(wd)
    _append_to_day(wd, '{"x": "\u2028[1]\u2028"}\n'.encode())


def lineage_day_line_hmac_not_ascii(wd: Path) -> None:
    """A canonical last line whose ``hmac`` is not ASCII: the tail recovery's
    ``compare_digest`` raises ``TypeError``."""
    lineage_active(wd)
    _append_to_day(wd, json.dumps({"hmac": "\u00e9"}, sort_keys=True).encode() + b"\n")


def lineage_day_line_prev_hmac_lone_surrogate(wd: Path) -> None:
    """The tail recovery encodes the stated ``prev_hmac`` as UTF-8: a lone surrogate raises."""
    lineage_active(wd)
    line = json.dumps({"hmac": "0" * 64, "prev_hmac": "\ud800"}, sort_keys=True)
    _append_to_day(wd, line.encode() + b"\n")


def _unwitnessed(wd: Path) -> None:
    """No co-signature and no pin: with --witness-state, bernstein's witness pillar reads
    only the chain's origin (``compute_origin``), and has no claim to hold it to."""
    (wd / COSIGNATURES).unlink()
    for pin in (wd / "witness-state").glob("*.json"):
        pin.unlink()


def unwitnessed_later_day_line_huge_integer(wd: Path) -> None:
    """The line in a day file after the one holding the origin: ``compute_origin`` stops
    before it, and the witness pillar passes."""
    _unwitnessed(wd)
    (wd / AUDIT / "2099-01-01.jsonl").write_bytes(HUGE_INTEGER_LINE + b"\n")


def unwitnessed_older_day_line_huge_integer(wd: Path) -> None:
    """The line before the origin: ``compute_origin`` raises on it."""
    _unwitnessed(wd)
    older_day_line_huge_integer(wd)


def legacy_seal_over_a_huge_integer_line(wd: Path) -> None:
    """A newer seal of scheme 1 (anyone can write one: no key), binding the day file
    whose last line holds a 5,000-digit integer by ``H(bytes)``, the leaf scheme 1 takes
    when the last line is no record: bernstein's ``_legacy_file_leaf_hash`` suppresses only
    ``JSONDecodeError``, ``KeyError`` and ``UnicodeDecodeError``, so its Merkle pillar
    raises."""
    day_line_huge_integer(wd)
    day = _day_file(wd)
    leaf = hashlib.sha256(day.read_bytes()).hexdigest()
    seal = {
        "root_hash": leaf,
        "algorithm": "sha256",
        "scheme": 1,
        "leaf_count": 1,
        "leaves": [{"file": day.name, "hash": leaf}],
        "sealed_at": 253402300799.0,
        "sealed_at_iso": "9999-12-31T23:59:59Z",
    }
    seal_path = wd / AUDIT / "merkle" / "seal-99991231T235959Z.json"
    seal_path.write_text(json.dumps(seal, indent=2) + "\n")


def _unsigned_ack(wd: Path) -> bytes:
    """A ``chain.tear_acknowledged`` line naming the last checkpoint's root and the day
    file, without an ``hmac``: the HMAC walk rejects it."""
    root = json.loads(_lines(wd / LEDGER)[-1])["payload"]["root_hash"]
    details = {"checkpoint_root": root, "segment": _day_file(wd).name}
    ack = {"details": details, "event_type": "chain.tear_acknowledged"}
    return json.dumps(ack, sort_keys=True).encode() + b"\n"


def cut_under_an_unsigned_ack(wd: Path) -> None:
    """The sealed day file cut, and an unsigned acknowledgement of it appended: bernstein's
    ``find_divergence_acks`` queries the log, which neither checks MACs nor canonical
    form."""
    ack = _unsigned_ack(wd)
    cut_last_record(wd)
    _append_to_day(wd, ack)


def _long_tear_acknowledged(wd: Path) -> Path:
    """The audit folder of a tear bernstein's ``AuditLog`` acknowledged (its partial record
    a long string); returns its day file."""
    shutil.rmtree(wd / AUDIT)
    shutil.copytree(wd / "tears" / "torn_long_acknowledged", wd / AUDIT)
    return _day_file(wd)


LONG_TORN = b'{"actor": "' + b"9" * 5_000
"""The generator's long partial record (``sealed_workdirs.LONG_TORN``)."""


def _rewrite_long_tear(wd: Path, line: bytes) -> None:
    """The acknowledged partial record rewritten in place (same length, same offsets)."""
    assert len(line) == len(LONG_TORN)
    day = _long_tear_acknowledged(wd)
    day.write_bytes(day.read_bytes().replace(LONG_TORN, line, 1))


def acknowledged_tear_huge_integer(wd: Path) -> None:
    """bernstein's HMAC walk raises on the integer, acknowledged or not."""
    _rewrite_long_tear(wd, b'{"actor": ' + b"9" * 5_001)


def acknowledged_tear_prev_hmac_not_ascii(wd: Path) -> None:
    """A canonical record stating a non-ASCII ``prev_hmac``, its ``hmac`` the head before
    the tear (so the head stays put and the tear stays one): the walk's
    ``compare_digest`` raises ``TypeError``, acknowledged or not."""
    lines = _lines(_long_tear_acknowledged(wd))
    torn = next(n for n, line in enumerate(lines) if line.startswith(LONG_TORN))
    head = json.loads(lines[torn - 1])["hmac"]

    def record(filler: str) -> bytes:
        return json.dumps(
            {"hmac": head, "prev_hmac": "\u00e9", "x": filler}, sort_keys=True
        ).encode()

    _rewrite_long_tear(wd, record("9" * (len(LONG_TORN) - len(record("")))))


def cut_under_an_unsigned_ack_then_hmac_not_ascii(wd: Path) -> None:
    """As ``cut_under_an_unsigned_ack``, then a canonical line whose ``hmac`` is not ASCII:
    ``find_divergence_acks`` opens the log first, and its tail recovery raises on it."""
    cut_under_an_unsigned_ack(wd)
    _append_to_day(wd, json.dumps({"hmac": "\u00e9"}, sort_keys=True).encode() + b"\n")


SHAPE_CASES: dict[str, Callable[[Path], None]] = {
    f.__name__: f
    for f in (
        untouched,
        anchors_a_folder,
        cosignatures_a_folder,
        checkpoint_ledger_a_folder,
        checkpoint_ledger_a_folder_without_pointer,
        pointer_huge_integer,
        pointer_nested_deep,
        pointer_hmac_not_ascii,
        ledger_last_line_huge_integer,
        ledger_last_line_nested_deep,
        ledger_hmac_not_ascii,
        newest_seal_a_folder,
        lineage_log_a_folder,
        checkpoints_folder_a_file,
        archive_a_folder,
        pin_huge_integer,
        pin_nested_deep,
        anchors_torn_line_huge_integer,
        cosignatures_torn_line_nested_deep,
        archive_in_a_subfolder,
        only_an_archive_folder,
        only_an_archive_not_gzip,
        day_line_huge_integer,
        day_line_nested_deep,
        day_line_not_finite,
        day_line_lone_surrogate,
        day_line_not_utf8,
        day_line_not_object,
        day_line_bom,
        day_line_utf16_huge_integer,
        day_torn_line_huge_integer,
        day_torn_line_nested_deep,
        day_torn_line_not_utf8,
        older_day_line_huge_integer,
        older_day_torn_line_huge_integer,
        older_day_torn_line_nested_deep,
        older_day_line_not_object,
        archive_line_huge_integer,
        archive_line_nested_deep,
        archive_line_not_finite,
        archive_line_not_utf8,
        archive_line_bom,
        archive_torn_line_huge_integer,
        archive_torn_line_nested_deep,
        *map(
            beside_lineage,
            (
                day_line_huge_integer,
                day_line_nested_deep,
                day_line_not_object,
                day_line_not_utf8,
                day_line_bom,
                # No live day file left: the tail recovery reads the archive, meets the line.
                archive_line_huge_integer,
            ),
        ),
        lineage_day_line_split_to_a_list,
        lineage_day_line_hmac_not_ascii,
        lineage_day_line_prev_hmac_lone_surrogate,
        cut_under_an_unsigned_ack,
        acknowledged_tear_huge_integer,
        acknowledged_tear_prev_hmac_not_ascii,
        unwitnessed_later_day_line_huge_integer,
        unwitnessed_older_day_line_huge_integer,
        legacy_seal_over_a_huge_integer_line,
        cut_under_an_unsigned_ack_then_hmac_not_ascii,
    )
}


def _shape_spec(workdir: Path, witnessed: bool) -> dict[str, str]:
    spec = {"workdir": str(workdir)}
    if witnessed:
        spec["witness_key"] = str((workdir / "witness.pub").resolve())
        spec["witness_state"] = str(workdir / "witness-state")
    return spec


@pytest.fixture(scope="module")
def shape_cases(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tampered_copies(sealed, tmp_path_factory.mktemp("shapes"), SHAPE_CASES)


@pytest.fixture(scope="module")
def bernstein_says_shapes(shape_cases: dict[str, Path]) -> dict[tuple[str, bool], dict[str, Any]]:
    """bernstein's audit verify per (case, with --witness-key and --witness-state)."""
    specs = [(name, w) for name in shape_cases for w in (False, True)]
    answers = bernstein_audits([_shape_spec(shape_cases[name], w) for name, w in specs])
    return dict(zip(specs, answers, strict=True))


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
@pytest.mark.parametrize("witnessed", [False, True], ids=["plain", "witness-state"])
def test_compat_pillars_on_hostile_shapes_are_bernsteins(
    name: str,
    witnessed: bool,
    shape_cases: dict[str, Path],
    bernstein_says_shapes: dict[tuple[str, bool], dict[str, Any]],
    cli: Any,
    tmp_path: Path,
) -> None:
    """Every pillar, not only the exit code: a pillar that fails for the wrong reason
    hides the next tamper of the same workdir."""
    workdir = shape_cases[name]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "audit-verify", "--audit-key", str(workdir / "audit.key"), "--json"]
    if witnessed:
        args += ["--witness-key", str(workdir / "witness.pub")]
        args += ["--witness-state", str(workdir / "witness-state")]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_shapes[(name, witnessed)]
    assert result.code == theirs["code"], (result.out, result.err[-2000:], theirs)
    ours = {PILLARS[p["name"]]: p["ok"] for p in result.json()["pillars"]}
    assert ours == {k: v is True for k, v in theirs["pillars"].items()}, (ours, theirs)


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
@pytest.mark.parametrize("witnessed", [False, True], ids=["plain", "witness-state"])
def test_strict_names_what_bernstein_fails_on_hostile_shapes(
    name: str,
    witnessed: bool,
    shape_cases: dict[str, Path],
    bernstein_says_shapes: dict[tuple[str, bool], dict[str, Any]],
    tmp_path: Path,
) -> None:
    """Strict (the witness's key trusted; with its state, as bernstein is given it) has a
    finding exactly where bernstein's audit verify exits 1."""
    workdir = shape_cases[name]
    outcome = import_and_verify(
        workdir,
        tmp_path / "ledger.db",
        key=workdir / "audit.key",
        trust=(_witness_trust(workdir),),
        witness_state=workdir / "witness-state" if witnessed else None,
    )
    found = {c for c in outcome.workspace if c.startswith("bernstein.")}
    assert bool(found) is (bernstein_says_shapes[(name, witnessed)]["code"] == 1), found
