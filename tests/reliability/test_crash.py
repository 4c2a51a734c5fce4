"""SIGKILL a writer at random moments: the ledger always reopens clean with every ack kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from .crash_harness import archive_kill_points, run_kill_points


def test_writer_killed_at_random_moments_loses_no_acknowledged_write(tmp_path: Path) -> None:
    tally = run_kill_points(tmp_path, 24, seed=8, rotate_every=12)
    assert tally.failures == []
    assert tally.kill_points == 24
    assert tally.acknowledged_entries > 0
    assert tally.mid_operation > 0


@pytest.mark.slow
def test_five_hundred_kill_points_lose_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tally = run_kill_points(tmp_path, 520, seed=20261130, rotate_every=20)
    with capsys.disabled():  # `make reliability` prints the tally
        print(f"\n{tally.summary()}")
    assert tally.failures == []
    assert tally.kill_points == 520


def test_an_archive_killed_midway_leaves_no_file_or_a_complete_one(tmp_path: Path) -> None:
    absent, complete = archive_kill_points(tmp_path, 6, seed=3)
    assert absent + complete == 6
    assert absent > 0


@pytest.mark.slow
def test_forty_archive_kill_points_leave_no_partial_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent, complete = archive_kill_points(tmp_path, 40, seed=41)
    with capsys.disabled():
        print(f"\narchive kill points: 40; no file: {absent}; complete and verified: {complete}")
    assert absent + complete == 40
