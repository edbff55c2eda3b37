"""The evaluation's worker processes: started from a fork server, one thread each, gone with the main process.

Every process the evaluation starts (the workers that play units, the process that probes the methods, Table 1's
process) comes from :func:`worker_pool`.  A worker ignores SIGINT (the main process stops it), and a watchdog
thread ends it as soon as the main process is gone, so even ``kill -9`` of the evaluation leaves no worker behind.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

PRELOADED = "mara_agents.evaluation.harness"  # what the workers run: imported once, by the fork server


def one_thread() -> None:
    """One torch (and BLAS) thread in this process: ``--jobs N`` means N threads in all."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"
    import torch
    torch.set_num_threads(1)


def _parent_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie — killed, not yet reaped — counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _exit_with(parent: int) -> None:
    """Watchdog thread of a worker: end this process as soon as the evaluation's main process is gone, so a
    killed evaluation (even ``kill -9``) leaves no workers behind."""
    while _parent_alive(parent):
        time.sleep(0.5)
    os._exit(1)


def _init_worker(parent: int, path: list[str]) -> None:
    """Worker set-up: the main process's import path (user policies in the current directory), one thread,
    SIGINT left to the main process (which stops the workers), and the parent watchdog."""
    sys.path[:] = path
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_thread()
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


@contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """``jobs`` worker processes (one thread each, gone with this process), stopped at once if the block fails
    or is interrupted, else shut down when it ends."""
    # forkserver: workers start from a clean process, not a fork of one that already holds torch threads.  The
    # fork server imports the harness (and so torch) once, before any thread starts, and every worker is a fork
    # of it: a worker starts in milliseconds instead of importing torch for a second or two.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOADED])
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker,
                               initargs=(os.getpid(), list(sys.path)))
    try:
        yield pool
    except BaseException:
        stop_workers(pool)
        raise
    pool.shutdown(wait=True)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and terminate the workers now (an interrupted evaluation must not wait for, or
    leave behind, workers in the middle of a unit)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(timeout=5)
