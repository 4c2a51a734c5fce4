"""A schema that loops: no command runs the file's SQL, and every statement has a bound.

Whoever writes the ledger file can drop ``ledger_meta`` and create a view of that name
whose recursive query never ends. Every command used to read the ledger id from it first
and hang, Ctrl-C included. The schema is compared before any other SQL runs (then every
statement but reading ``sqlite_schema`` is refused), and every statement runs under a
progress handler that honours Ctrl-C and a step budget.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentledger import Ledger
from agentledger.errors import Diverged, LedgerError
from agentledger.storage import Database, native, statement_bound
from tests.log.logkit import build, raw

AGENTLEDGER = Path(sys.executable).parent / "agentledger"
LOOPING_VIEW = (
    "CREATE VIEW ledger_meta (key, value) AS "
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
    "SELECT 'ledger_id', x FROM n WHERE x < 0"
)
HANG_GUARD_S = 120
"""Not a timing assertion: a run still going after this long is a hang, reported as one."""


@pytest.fixture
def looping(ledger: Ledger, ledger_path: Path) -> Path:
    build(ledger, runs=1, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("DROP TABLE ledger_meta")
        conn.execute(LOOPING_VIEW)
    return ledger_path


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["verify", "--all"], 2),
        (["verify", "run-0"], 2),
        (["runs"], 2),
        (["show", "run-0"], 2),
        (["fsck"], 2),
        (["append", "run-0", "step", "{}"], 2),
        (["fleet", "verify", "{ledger}", "--workers", "1"], 2),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_a_looping_view_in_place_of_a_table_hangs_no_command(
    looping: Path, tmp_path: Path, args: list[str], code: int
) -> None:
    before = looping.read_bytes()
    argv = [a.replace("{ledger}", str(looping)) for a in args]
    env = {**os.environ, "AGENTLEDGER_HOME": str(tmp_path / "keys")}
    try:
        done = subprocess.run(
            [str(AGENTLEDGER), "--ledger", str(looping), *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=HANG_GUARD_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`agentledger {' '.join(args)}` hung on a looping view")
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert looping.read_bytes() == before


def test_no_sql_of_an_altered_schema_runs_through_the_api(looping: Path) -> None:
    with Ledger.open(looping, readonly=True) as ledger:
        assert ledger.db.schema_findings
        with pytest.raises(Diverged, match="schema"):
            ledger.runs()
        report = ledger.verify()
    assert report.code == 2
    assert {d.check for d in report.workspace} == {"schema.altered"}


LOOP = (
    "WITH RECURSIVE n(x) AS (SELECT started() UNION ALL SELECT x + 1 FROM n{until}) "
    "SELECT count(*) FROM n"
)


def _loop_forever(db: Database) -> None:
    db.conn.execute(LOOP.format(until="")).fetchall()


def _loop_in_rust(db: Database) -> None:
    # Rust steps it with the GIL held (native.rows). Not forever: were it unbounded, it
    # would end (in about 30 s) and the test fail, rather than hang the suite.
    native.rows(db.conn, LOOP.format(until=" WHERE x < 300000000"))


LOOPS = pytest.mark.parametrize("loop", [_loop_forever, _loop_in_rust], ids=["apsw", "rust"])


@LOOPS
def test_ctrl_c_ends_a_statement_that_never_ends(
    ledger: Ledger, loop: Callable[[Database], None]
) -> None:
    began = threading.Event()

    def started() -> int:
        began.set()
        return 1

    ledger.db.conn.create_scalar_function("started", started)

    def interrupt() -> None:
        began.wait()  # the statement is running inside SQLite: only its handler sees this
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as caught:
        loop(ledger.db)
    # Raised by the bound's handler inside the statement, not after it ended.
    assert "_progress" in [entry.name for entry in caught.traceback]
    assert ledger.run("r").append("step", {}).seq == 0  # the handle is still usable


@LOOPS
def test_a_statement_past_its_budget_is_stopped_with_a_typed_error(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch, loop: Callable[[Database], None]
) -> None:
    monkeypatch.setattr(statement_bound, "MIN_STEPS", 5 * statement_bound.PROGRESS_STEPS)
    monkeypatch.setattr(statement_bound, "STEPS_PER_PAGE", 1)
    with Ledger.open(ledger_path) as ledger:
        ledger.db.conn.create_scalar_function("started", lambda: 1)
        with pytest.raises(LedgerError) as caught:
            loop(ledger.db)
        assert caught.value.code == "statement-bound"
        # Statements of honest size still run: each starts its count afresh.
        ledger.run("r").append_many([("step", {"i": i}) for i in range(50)])
