"""`agentledger fleet verify` on real clusters: a local one, and `dask scheduler` + workers.

Every file's verdict must equal a plain `agentledger verify --all` of it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agentledger.cli import main

from .fleetkit import (
    DaskCluster,
    Fleet,
    agentledger_command,
    build_ledger,
    cli_env,
    run_cli,
)


def verdicts(report: dict[str, Any]) -> dict[str, int]:
    return {entry["path"]: entry["code"] for entry in report["ledgers"]}


def assert_fleet_report(report: dict[str, Any], fleet: Fleet, plain: dict[str, int]) -> None:
    assert verdicts(report) == plain
    assert [entry["path"] for entry in report["ledgers"]] == sorted(fleet.kinds)
    totals = report["totals"]
    assert totals["files"] == totals["inputs"] == len(fleet.kinds)
    assert totals["lost"] == 0
    assert (totals["clean"], totals["diverged"], totals["unreadable"]) == (4, 1, 1)
    assert totals["by_check"] and totals["bytes_read"] > 0
    by_kind = {fleet.kinds[entry["path"]]: entry for entry in report["ledgers"]}
    assert by_kind["tampered"]["findings"][0]["run"] == "run-1"
    assert by_kind["archive"]["archive"] is True
    assert by_kind["junk"]["error_code"] == "not-a-ledger"
    assert report["code"] == 2


def test_a_local_cluster_verifies_the_fleet_like_plain_verify(
    fleet: Fleet, plain: dict[str, int], empty_home: Path, tmp_path: Path
) -> None:
    html = tmp_path / "fleet.html"
    done = run_cli(
        "fleet", "verify", str(fleet.root), "--workers", "2", "--trust", fleet.public_key,
        "--json", "--html", str(html), home=empty_home,
    )  # fmt: skip
    assert done.code == 2, done.err
    report = done.json()
    assert_fleet_report(report, fleet, plain)
    assert report["cluster"]["local"] is True
    assert report["cluster"]["workers"] == 2
    # The HTML document: what was verified where, then the failing files worst first.
    text = html.read_text()
    assert "Fleet verification report" in text and "(nothing lost)" in text
    assert fleet.public_key in text
    failing = text[text.index("Failing files, worst first (2)") : text.index("Clean files (4)")]
    assert failing.index("status-missing") < failing.index("status-diverged")
    assert 'id="check-entry.hash"' in text  # what the checks mean


def test_a_running_scheduler_and_two_workers_verify_the_fleet(
    fleet: Fleet, plain: dict[str, int], empty_home: Path, external: DaskCluster
) -> None:
    done = run_cli(
        "fleet", "verify", *sorted(fleet.kinds), "--scheduler", external.address,
        "--trust", fleet.public_key, "--json", home=empty_home,
    )  # fmt: skip
    assert done.code == 2, done.err
    report = done.json()
    assert_fleet_report(report, fleet, plain)
    assert report["cluster"] == {
        "scheduler": external.address,
        "local": False,
        "workers": 2,
        "workers_lost": 0,
    }
    workers = [entry["worker"] for entry in report["ledgers"]]
    assert all(worker.startswith("tcp://127.0.0.1:") for worker in workers)


def test_each_ledger_must_extend_its_own_exported_checkpoint(
    fleet: Fleet, tmp_path: Path, empty_home: Path, external: DaskCluster
) -> None:
    home = fleet.home
    extended, rolled_back, without = (tmp_path / name / "ledger.db" for name in "abc")
    for path in (extended, rolled_back, without):
        build_ledger(path, home, runs=2, entries=10)
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "README").write_text("exported checkpoints, one per ledger\n")
    old = tmp_path / "b-old.db"
    shutil.copy(rolled_back, old)
    build_ledger(rolled_back, home, runs=3, entries=10)  # run-2 is new: the log grew
    for name, path in (("a", extended), ("b", rolled_back)):
        code = main(["--ledger", str(path), "--home", str(home), "checkpoint", "--export",
                     str(checkpoints / f"{name}.txt")])  # fmt: skip
        assert code == 0
    build_ledger(extended, home, runs=4, entries=10)  # extends its checkpoint
    shutil.copy(old, rolled_back)  # rolled back behind its checkpoint
    done = run_cli(
        "fleet", "verify", str(extended), str(rolled_back), str(without),
        "--scheduler", external.address, "--trust", fleet.public_key,
        "--checkpoints", str(checkpoints), "--json", home=empty_home,
    )  # fmt: skip
    assert done.code == 2, done.err
    report = {Path(entry["path"]).parent.name: entry for entry in done.json()["ledgers"]}
    assert report["a"]["status"] == "clean"
    assert report["b"]["status"] == "diverged"
    assert "fleet.checkpoint" not in report["b"]["checks"]
    assert report["c"]["checks"] == {"fleet.checkpoint": 1}
    assert any("README" in note for note in done.json()["notes"])


def test_a_scheduler_that_cannot_be_reached_is_one_line(fleet: Fleet, empty_home: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run_cli(
        "fleet", "verify", str(fleet.root), "--scheduler", f"tcp://127.0.0.1:{port}",
        "--connect-timeout", "1", home=empty_home,
    )  # fmt: skip
    assert done.code == 64
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], done.err


def test_workers_judge_a_rollback_with_the_clients_memory(
    fleet: Fleet, tmp_path: Path, external: DaskCluster
) -> None:
    path = tmp_path / "ws" / "ledger.db"
    build_ledger(path, fleet.home, runs=2, entries=10)
    older = tmp_path / "older.db"
    shutil.copy(path, older)
    build_ledger(path, fleet.home, runs=3, entries=10)
    shutil.copy(older, path)  # behind what the signing install remembers
    plain = main(["--ledger", str(path), "--home", str(fleet.home), "verify", "--all"])
    assert plain == 2
    same_install = run_cli(
        "fleet", "verify", str(path), "--scheduler", external.address, "--json", home=fleet.home
    )
    assert same_install.code == 2, same_install.err
    # Every run may have lost its tail: none is certified complete.
    assert same_install.json()["ledgers"][0]["checks"] == {"log.rollback": 1, "log.incomplete": 2}


def test_bad_arguments_exit_64(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before Dask is even imported: in-process is enough.
    assert main(["fleet", "verify", str(tmp_path / "nope")]) == 64
    both = ["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"]
    assert main(["fleet", "verify", str(fleet.root), *both]) == 64
    assert main(["fleet", "verify"]) == 64
    assert main(["fleet", "verify", str(fleet.root), "--checkpoints", str(tmp_path / "no")]) == 64
    assert capsys.readouterr().out == ""


def test_a_scheduler_with_no_worker_is_one_line_after_the_worker_timeout(
    fleet: Fleet, empty_home: Path, tmp_path: Path
) -> None:
    cluster = DaskCluster(tmp_path / "dask")
    try:
        cluster.start(workers=0)
        done = run_cli(
            "fleet", "verify", str(fleet.root), "--scheduler", cluster.address,
            "--worker-timeout", "1", home=empty_home,
        )  # fmt: skip
    finally:
        cluster.stop()
    assert done.code == 64
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "has no worker" in lines[0], done.err


def test_a_worker_killed_mid_task_loses_nothing(
    fleet: Fleet, plain: dict[str, int], tmp_path: Path, empty_home: Path, external: DaskCluster
) -> None:
    # Last in this module: it leaves the cluster one worker short.
    (external.control / "delay").write_text("0.4")
    started = external.control / "started"
    victim = external.workers[0]
    paths = sorted(fleet.kinds)
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("\n".join(paths) + "\n")
    command = subprocess.Popen(
        [*agentledger_command(), "fleet", "verify", "--from", str(inputs),
         "--scheduler", external.address,
         "--trust", fleet.public_key, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(empty_home),
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (
        started.exists() and any(n.startswith(f"{victim.pid}-") for n in os.listdir(started))
    ):
        assert time.monotonic() < deadline and command.poll() is None
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)  # mid-task: it sleeps before verifying
    out, err = command.communicate(timeout=60)
    (external.control / "delay").unlink()
    assert command.returncode == 2, err
    report = json.loads(out)
    assert verdicts(report) == plain
    assert report["totals"]["lost"] == 0
    assert report["cluster"]["workers_lost"] == 1
    assert len({entry["worker"] for entry in report["ledgers"]}) == 1


def test_workers_beyond_four_per_core_are_capped_not_started(
    fleet: Fleet,
    empty_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--workers 100000` started a hundred thousand processes: the command never returned.
    from agentledger.fleet import cluster
    from agentledger.fleet.summary import FleetReport

    asked: list[int | None] = []

    def record(files: list[str], job: Any, options: Any, on_result: Any = None) -> FleetReport:
        asked.append(options.workers)
        return FleetReport(inputs=len(files), local_cluster=True)

    monkeypatch.setattr(cluster, "verify_fleet", record)
    args = ["--home", str(empty_home), "fleet", "verify", str(fleet.root), "--json"]
    main([*args, "--workers", "100000"])
    assert asked == [4 * (os.cpu_count() or 1)]
    assert "--workers 100000 capped" in capsys.readouterr().err
    main([*args, "--workers", "1"])
    assert asked[-1] == 1
