"""A process that has imported agentledger once and forks writers on demand.

Starting an interpreter and importing agentledger costs most of a second; forking a process
that already did costs a millisecond, so hundreds of kill points stay cheap. The server
itself never opens a ledger or starts a thread, so its forks are clean.

Protocol (one JSON line each way): ``{"spawn": "module:function", "args": [...]}`` ->
``{"pid": n}``;
``{"poll": pid}`` -> ``{"exited": bool, "status": n}``; ``{"reap": pid}`` ->
``{"status": n}``. The parent sends SIGKILL to the pid itself.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def serve() -> None:
    # Imported once here, shared by every fork.
    import agentledger.activity  # noqa: F401
    import tests.reliability.concurrent_workers
    import tests.reliability.crash_writer  # noqa: F401

    for line in sys.stdin:
        command = json.loads(line)
        reply: dict[str, Any]
        if "spawn" in command:
            pid = os.fork()
            if pid == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                module, function = command["spawn"].split(":")
                code = 1
                try:
                    getattr(importlib.import_module(module), function)(*command["args"])
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stderr.flush()
                    os._exit(code)
            reply = {"pid": pid}
        elif "poll" in command:
            pid, status = os.waitpid(command["poll"], os.WNOHANG)
            reply = {"exited": pid != 0, "status": status}
        else:
            _, status = os.waitpid(command["reap"], 0)
            reply = {"status": status}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


class ForkServer:
    """The parent's handle on a running fork server."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.fork_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self.reaped: set[int] = set()

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        reply: dict[str, Any] = json.loads(self.process.stdout.readline())
        return reply

    def spawn(self, target: str, *args: object) -> int:
        """Fork a child running ``target`` (``"module:function"``) with ``args``."""
        return int(self._ask({"spawn": target, "args": list(args)})["pid"])

    def wait(self, pid: int) -> int:
        """Wait for a child to exit on its own; its exit code."""
        status = int(self._ask({"reap": pid})["status"])
        self.reaped.add(pid)
        return os.waitstatus_to_exitcode(status)

    def exited(self, pid: int) -> bool:
        if self._ask({"poll": pid})["exited"]:
            self.reaped.add(pid)
            return True
        return False

    def kill(self, pid: int) -> None:
        """SIGKILL the writer and reap it."""
        if pid in self.reaped:
            return
        os.kill(pid, signal.SIGKILL)
        self._ask({"reap": pid})
        self.reaped.add(pid)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


if __name__ == "__main__":
    serve()
