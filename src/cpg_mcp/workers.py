"""The heavy lane: work that reads a whole capture or folder (a plan, a why, a trace, a
review report) runs in a process of its own, forked from a quiet forkserver that has cpg
already imported, so a call whose deadline expires is ended by killing its process: the
work stops within a poll interval (20 ms), its CPU with it, and nothing it held is left
half-done in the server. A thread only waits for the process; the server's own threads,
and the cheap tools, never wait behind it.

What runs here gets plain values (requests, paths) and gives plain values back; an error
it words for the agent comes back as a message, anything else as a crash the server logs."""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

log = logging.getLogger("cpg.mcp")

POLL_SECONDS = 0.02
"""How often a waiting thread looks at its call's deadline (and so how late a kill can be)."""

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["cpg_mcp.worker_tasks"])
_LIVE: set[Any] = set()
_LIVE_LOCK = threading.Lock()


class WorkerCancelled(Exception):
    """The call's deadline expired: its process was killed."""


class WorkerCrashed(Exception):
    """The work raised what no tool words: the server logs it with the call's trace."""


_STARTED = threading.Event()
_SOCKET_ROOM = 60
"""Characters a temp folder may take before the forkserver's socket path (about 40 more)
would pass the 107 a Unix socket address holds."""


def socket_folder() -> None:
    """Make the folder the forkserver's socket goes in, once, before anything else runs: in
    the temp folder when its path is short enough for a Unix socket, else in /tmp (a long
    TMPDIR would make every heavy call fail with 'AF_UNIX path too long')."""
    from multiprocessing import util

    _STARTED.set()
    base = tempfile.gettempdir()
    if len(base) <= _SOCKET_ROOM or not os.access("/tmp", os.W_OK | os.X_OK):
        util.get_temp_dir()
        return
    saved = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        util.get_temp_dir()  # made once, and kept for the process's life
    finally:
        tempfile.tempdir = saved


def start() -> None:
    """Start the forkserver now (it imports cpg once, ~0.5 s), so the first heavy call does
    not pay for it. Safe to call more than once."""
    from multiprocessing import forkserver

    try:
        forkserver.ensure_running()
    except OSError as exc:  # a heavy call will try again and say what failed
        log.warning("could not start the worker server: %s", exc)


def shutdown() -> None:
    """Leave nothing behind on a hurried exit (a signal: ``os._exit`` runs no clean-up):
    the workers killed, the forkserver's socket folder removed (the forkserver itself ends
    when this process does)."""
    kill_all()
    if _STARTED.is_set():
        from multiprocessing import util

        shutil.rmtree(util.get_temp_dir(), ignore_errors=True)


def running() -> int:
    """Worker processes alive now (a killed one is reaped before its call returns)."""
    with _LIVE_LOCK:
        return sum(1 for proc in _LIVE if proc.is_alive())


def kill_all() -> None:
    """Kill every worker process (the server is leaving: no answer is awaited any more)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        if proc.is_alive():
            proc.kill()


def run(task: str, *args: Any, cancel: threading.Event | None = None, **kwargs: Any) -> Any:
    """The task ``task`` of ``cpg_mcp.worker_tasks`` over ``args`` in a worker process, from
    a thread: the process is killed once ``cancel`` is set (the call's deadline), and
    WorkerCancelled raised. A ToolError the work raised is raised again here with its
    message. (Named, not passed: the server never imports what only workers run.)"""
    if not _STARTED.is_set():
        socket_folder()
    receiving, sending = _CONTEXT.Pipe(duplex=False)
    env = dict(os.environ)
    proc = _CONTEXT.Process(
        target=_work,
        args=(sending, env, os.getcwd(), task, args, kwargs),
        name=f"cpg-mcp worker: {task}",
        daemon=True,
    )
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        proc.start()
        sending.close()
        answer: tuple[str, Any] | None = None
        while answer is None:
            if cancel is not None and cancel.is_set():
                raise WorkerCancelled("the call's deadline expired")
            if receiving.poll(POLL_SECONDS):
                try:
                    answer = receiving.recv()
                except EOFError:  # the process died without an answer
                    raise WorkerCrashed(
                        f"the worker process ended without an answer (exit code {proc.exitcode})"
                    ) from None
            elif not proc.is_alive() and not receiving.poll(0):
                raise WorkerCrashed(
                    f"the worker process ended without an answer (exit code {proc.exitcode})"
                )
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        receiving.close()
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    kind, value = answer
    if kind == "ok":
        return value
    if kind == "error":
        raise ToolError(value)
    raise WorkerCrashed(value)


def _work(
    sending: Connection,
    env: dict[str, str],
    cwd: str,
    task: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """In the worker: the server's environment and folder, stdout away from the JSON-RPC
    channel, the work, its answer."""
    os.dup2(2, 1)  # nothing the work prints may reach the client's channel
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    from cpg_mcp import worker_tasks

    try:
        answer: tuple[str, Any] = ("ok", getattr(worker_tasks, task)(*args, **kwargs))
    except ToolError as exc:
        answer = ("error", str(exc))
    except Exception as exc:
        message = worker_tasks.worded(exc)
        answer = ("error", message) if message else ("crash", traceback.format_exc())
    sending.send(answer)
    sending.close()
