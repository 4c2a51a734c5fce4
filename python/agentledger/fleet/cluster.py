"""The fleet on Dask distributed: one task per file, on a local or a remote cluster.

The only module of the package that imports ``distributed`` (the optional extra
``agentledger[fleet]``). Dask does the scheduling, the retries and the rescheduling of a
lost worker's tasks; this module submits, gathers, and watches which workers come and go.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from distributed import Client, LocalCluster, as_completed, get_worker
from distributed.comm.addressing import get_address_host_port

from agentledger.errors import ExitCode
from agentledger.fleet import task
from agentledger.fleet.inputs import FleetArgumentError
from agentledger.fleet.summary import UNREADABLE, FleetReport, LedgerSummary
from agentledger.fleet.task import FleetJob

RETRIES = 2
"""Extra attempts of a task that raised (a task that finds a bad file does not raise: it
reports it). A worker lost mid-task is another matter: the scheduler reruns its tasks
elsewhere by itself, up to ``distributed.scheduler.allowed-failures`` times."""

WORKER_POLL_S = 0.5
"""How often the client asks the scheduler which workers it has (one round trip)."""

OnResult = Callable[[LedgerSummary, FleetReport], None]


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    scheduler: str | None = None
    """``tcp://host:port`` of a running scheduler; None starts a local cluster."""
    workers: int | None = None
    """Worker processes of the local cluster (None: one per core)."""
    connect_timeout: float = 10.0
    worker_timeout: float = 60.0
    """How long to wait for the cluster's first worker (a scheduler may have none)."""


def run_task(path: str, job: FleetJob) -> LedgerSummary:
    """What a worker runs: the task, and which worker ran it."""
    summary = task.verify_file(path, job)
    try:
        summary.worker = get_worker().address
    except ValueError:
        summary.worker = None
    return summary


def verify_fleet(
    files: list[str],
    job: FleetJob,
    options: ClusterOptions,
    on_result: OnResult | None = None,
) -> FleetReport:
    """Verify ``files`` on the cluster; one summary per file, in input order."""
    quiet_logs()
    report = FleetReport(inputs=len(files), local_cluster=options.scheduler is None)
    started = time.perf_counter()
    cluster: LocalCluster | None = None
    if options.scheduler is None:
        cluster = LocalCluster(
            n_workers=options.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        address = cluster.scheduler_address
    else:
        address = options.scheduler
    try:
        with connect(address, options.connect_timeout) as client:
            report.scheduler = str(client.scheduler.address)
            wait_for_a_worker(client, address, options.worker_timeout)
            by_path = gather(client, files, job, report, on_result)
    finally:
        if cluster is not None:
            cluster.close()
    report.ledgers = [by_path[path] for path in files if path in by_path]
    report.elapsed_s = time.perf_counter() - started
    return report


def connect(address: str, timeout: float) -> Client:
    try:
        # A malformed address is refused before a Client exists (a half-made one complains
        # again when it is collected).
        get_address_host_port(address)
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise FleetArgumentError(
            f"cannot reach the Dask scheduler at {address}: {message}", code="no-scheduler"
        ) from None


def wait_for_a_worker(client: Client, address: str, timeout: float) -> None:
    """Tasks on a cluster with no worker would wait forever: wait ``timeout`` for one."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise FleetArgumentError(
            f"the Dask scheduler at {address} has no worker (waited {timeout:g}s; "
            "--worker-timeout)",
            code="no-workers",
        ) from None


def gather(
    client: Client,
    files: list[str],
    job: FleetJob,
    report: FleetReport,
    on_result: OnResult | None,
) -> dict[str, LedgerSummary]:
    run = uuid.uuid4().hex[:12]
    # Checkpoints and memories can be many: sent to every worker once, not with every task.
    many = job.checkpoints or job.memory
    shared = client.scatter(job, broadcast=True, hash=False) if many else job
    futures = client.map(
        run_task,
        files,
        job=shared,
        key=[f"agentledger-verify-{run}-{i}" for i in range(len(files))],
        retries=RETRIES,
        pure=False,
    )
    path_of = {future.key: path for future, path in zip(futures, files, strict=True)}
    seen = current_workers(client)
    polled = time.monotonic()
    results: dict[str, LedgerSummary] = {}
    for future in as_completed(futures, loop=client.loop):
        path = path_of[future.key]
        try:
            summary = future.result()
        except Exception as exc:  # a task Dask gave up on (e.g. it killed every worker)
            summary = LedgerSummary(
                path=path,
                status=UNREADABLE,
                code=int(ExitCode.INVALID_INPUT),
                error=f"the task failed on the cluster: {type(exc).__name__}: {exc}",
                error_code="task-failed",
            )
        results[path] = summary
        if time.monotonic() - polled >= WORKER_POLL_S:
            current = current_workers(client)
            polled = time.monotonic()
            seen |= current
            report.workers = len(seen)
            report.workers_lost = len(seen - current)
        if on_result is not None:
            on_result(summary, report)
        future.release()
    current = current_workers(client)
    seen |= current
    report.workers = len(seen)
    report.workers_lost = len(seen - current)
    return results


def current_workers(client: Client) -> set[str]:
    return set(client.scheduler_info(n_workers=-1).get("workers", {}))


def quiet_logs() -> None:
    """Dask's own logs are for operators: the report says what the user needs."""
    for name in ("distributed", "dask"):
        logging.getLogger(name).setLevel(logging.ERROR)
