"""One capture session at a time, each in a private temp dir (mode 0700): a live capture from
Hubble Relay, or the replay of a capture file from a folder the operator allowed."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from cpg_core import CheckRequest, CpgError, RunRequest
from cpg_core.reports import PlanView
from cpg_core.shadow import ShadowRequest
from cpg_core.text import shown
from cpg_io import runs
from cpg_io.clock import now_rfc3339
from cpg_io.engines import InProcess
from cpg_io.errors import Cancelled
from cpg_io.evidence_store import EvidenceStore
from cpg_io.hubble import TLSSettings
from cpg_io.kube import forget_temp_dir
from cpg_io.runs import RelayAccess
from cpg_io.store import PolicyStore
from cpg_mcp.words import in_tool_words

log = logging.getLogger("cpg.mcp")
T = TypeVar("T")
S = TypeVar("S", runs.LiveCapture, runs.ShadowCapture)


class SessionError(CpgError):
    """A session request cannot be served; the message says what to do."""


@attrs.define
class Session:
    id: str
    tmp: Path
    source: str
    started: float = attrs.Factory(time.monotonic)
    stopped: float | None = None
    error: str = ""
    identities: tuple[str, ...] = ()
    """The identity sources the session was started with: its checks take them too."""
    declarations: tuple[str, ...] = ()
    """The sources of the cluster's objects the session was started with (likewise)."""
    host_firewall: bool | None = None
    """The agents' host firewall, as the session was started with (None: as the cluster
    says when a check reads it, else off): its checks take it."""
    dual_stack: bool | None = None
    """The agents' dual stack, likewise."""
    stop_calls: int = 0
    result: runs.RunResult | None = None
    capture: runs.LiveCapture | None = None
    task: asyncio.Task[Any] | None = None
    cancel: threading.Event = attrs.Factory(threading.Event)
    """Set to end a replay early: it stops at its next block, before writing anything."""
    stream: Any = None
    """The live run (a capture or a shadow): its port-forward and credential files are
    closed when it ends."""
    shadow: runs.ShadowCapture | None = None
    """A shadow session's stream: proposed policies judged on live traffic."""
    shadow_plan: PlanView | None = None
    """A stopped shadow session's final plan."""
    plans: dict[tuple[bool, str, int, tuple[str, ...]], Any] = attrs.Factory(dict)
    """get_plan's answers, by (from_cluster, allow_localhost, policy_map_max, the capture
    judged on): the capture is read once."""
    memos: dict[str, tuple[object, Any]] = attrs.Factory(dict)
    """What the read tools derive from the session's files (policy rows, evidence samples,
    health rows, filtered lists): built once for each state of the files — at the stop, and
    again after a flush or anything else changed them — and shared by the calls between."""

    def generation(self) -> object | None:
        """The state of the session's files, as their folders' modification times (cpg
        writes by renaming into them, so every write shows): a few hundred stats, where
        reading the files is thousands of parses. None while a replay is still writing."""
        if self.stopped is None and self.capture is None:
            return None
        return _folder_times(self.tmp)

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """``build()``, or what it gave for this state of the files."""
        generation = self.generation()
        if generation is None:
            return build()
        found = self.memos.get(key)
        if found is not None and found[0] == generation:
            value: T = found[1]
            return value
        value = build()
        self.memos[key] = (generation, value)
        return value

    def stop_stream(self) -> None:
        """Ask a live capture or a shadow session to stop (it flushes and ends)."""
        for stream in (self.capture, self.shadow):
            if stream is not None:
                stream.stop.set()

    def release(self) -> None:
        stream = self.stream
        if stream is not None:
            stream.close()

    @property
    def policy_store(self) -> PolicyStore:
        return PolicyStore(self.policies)

    @property
    def evidence_store(self) -> EvidenceStore:
        return EvidenceStore(self.evidence_root, self.policies)

    @property
    def policies(self) -> Path:
        return self.tmp / "policies"

    @property
    def evidence_root(self) -> Path:
        return self.tmp / "evidence"

    @property
    def state(self) -> Literal["capturing", "stopped"]:
        return "stopped" if self.stopped is not None else "capturing"

    def elapsed(self) -> float:
        return (self.stopped or time.monotonic()) - self.started


def _folder_times(root: Path) -> tuple[tuple[str, int], ...]:
    """Every folder under ``root`` with its modification time (nanoseconds)."""
    found: list[tuple[str, int]] = []
    try:
        found.append((str(root), os.stat(root).st_mtime_ns))
    except OSError:
        return ((str(root), -1),)
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        found.append((entry.path, entry.stat(follow_symlinks=False).st_mtime_ns))
                        pending.append(entry.path)
        except OSError:
            found.append((folder, -1))
    return tuple(sorted(found))


class SessionManager:
    def __init__(
        self,
        allow_replay_dir: Path | None = None,
        on_stopped: Callable[[Session], None] | None = None,
        *,
        allow_tls_dir: Path | None = None,
    ) -> None:
        self.allow_replay_dir = allow_replay_dir.resolve() if allow_replay_dir else None
        self.allow_tls_dir = allow_tls_dir.resolve() if allow_tls_dir else None
        """Where the tls_* arguments may name files (None: they are refused)."""
        self.on_stopped = on_stopped
        """Called in a worker thread once a session has stopped: the read tools build their
        indexes there, not in the first call that needs them."""
        self.current: Session | None = None
        self.closed = threading.Event()
        """Set once :meth:`close` has stopped the session and removed its folder."""
        self._kube_dir: Path | None = None

    def kube_dir(self) -> Path:
        """A private folder (0700) for the Kubernetes client's credential files outside a
        session (the Cilium version check); removed by :meth:`close`."""
        if self._kube_dir is None:
            self._kube_dir = Path(tempfile.mkdtemp(prefix="cpg-mcp-kube-"))
        return self._kube_dir

    def get(self, session_id: str) -> Session:
        session = self.current
        if session is None or not secrets.compare_digest(session.id, session_id):
            raise SessionError(
                f"session {shown(session_id)} not found or expired; call start_session"
            )
        return session

    def replay_path(self, replay_file: str, argument: str = "replay_file") -> Path:
        """The capture file ``replay_file`` names inside the folder the operator allowed;
        SessionError naming ``argument`` otherwise."""
        if self.allow_replay_dir is None:
            raise SessionError(
                f"{argument} is not enabled: the operator must start cpg-mcp with "
                "--allow-replay-dir DIR"
            )
        try:
            if "\x00" in replay_file:
                raise ValueError("it contains a NUL character")
            path = (self.allow_replay_dir / replay_file).resolve()
            is_file = path.is_file()
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SessionError(
                f"{argument} {shown(replay_file)} is not a file name cpg can open ({reason}); "
                f"name a capture file inside {self.allow_replay_dir}"
            ) from None
        if not path.is_relative_to(self.allow_replay_dir) or not is_file:
            raise SessionError(
                f"{argument} must name a file inside {self.allow_replay_dir} (a path relative "
                "to it, or an absolute one inside it)"
            )
        return path

    def tls_path(self, value: str, argument: str) -> Path:
        """The certificate or key file ``value`` names inside the folder the operator allowed
        for them. The answer is the same for a file outside it, missing or not: a client
        learns nothing of the host's files."""
        if self.allow_tls_dir is None:
            raise SessionError(
                f"{argument} is not enabled: the operator must start cpg-mcp with "
                "--allow-tls-dir DIR (the folder holding the relay's certificates)"
            )
        refused = SessionError(
            f"{argument} must name a readable file inside {self.allow_tls_dir} (a path "
            "relative to it, or an absolute one inside it)"
        )
        try:
            if "\x00" in value:
                raise refused
            path = (self.allow_tls_dir / value).resolve()
        except (OSError, ValueError, RuntimeError):
            raise refused from None
        if not path.is_relative_to(self.allow_tls_dir):
            raise refused
        try:
            readable = path.is_file() and os.access(path, os.R_OK)
        except OSError:
            readable = False
        if not readable:
            raise refused
        return path

    def allowed_folder(self, folder: str, argument: str) -> Path:
        """A folder inside the one the operator allowed (proposed policies to shadow)."""
        if self.allow_replay_dir is None:
            raise SessionError(
                f"{argument} is not enabled: the operator must start cpg-mcp with "
                "--allow-replay-dir DIR"
            )
        try:
            if "\x00" in folder:
                raise ValueError("it contains a NUL character")
            path = (self.allow_replay_dir / folder).resolve()
            is_dir = path.is_dir()
        except (OSError, ValueError) as exc:
            raise SessionError(
                f"{argument} {shown(folder)} is not a folder cpg can open ({exc})"
            ) from None
        if not path.is_relative_to(self.allow_replay_dir) or not is_dir:
            raise SessionError(
                f"{argument} must name a folder inside {self.allow_replay_dir} (a path relative "
                "to it, or an absolute one inside it)"
            )
        return path

    async def start(
        self,
        request: RunRequest,
        *,
        replay_file: str | None = None,
        tls: TLSSettings | None = None,
        shadow_policies: str | None = None,
        agent: tuple[bool | None, bool | None] = (None, None),
    ) -> tuple[Session, str | None]:
        """Start a session for ``request``: the replay of ``replay_file``, a shadow of the
        proposed policies in ``shadow_policies`` on live traffic, else a live capture. All go
        through the run layer, as cpg replay, cpg shadow and cpg generate do; the session's
        folders replace the output and evidence folders."""
        old = self.current
        if old is not None and old.state == "capturing":
            raise SessionError(
                f"session {old.id} already running ({old.elapsed():.0f}s); call stop_session first"
            )
        source_path = self.replay_path(replay_file) if replay_file is not None else None
        proposed = (
            self.allowed_folder(shadow_policies, "shadow_policies")
            if shadow_policies is not None
            else None
        )
        now = now_rfc3339()
        if source_path is None:
            request.live_window(now)  # an until in the past is refused before anything starts
        discarded = None
        if old is not None:
            discarded = old.id
            self.discard()
        tmp = Path(tempfile.mkdtemp(prefix="cpg-mcp-"))
        os.chmod(tmp, 0o700)
        session = Session(
            id=f"sess_{secrets.token_hex(16)}",
            tmp=tmp,
            source=str(source_path or request.live.server),
            identities=request.identities,
            declarations=request.declarations,
            host_firewall=agent[0],
            dual_stack=agent[1],
        )
        self.current = session
        if source_path is not None:
            session.task = asyncio.create_task(self._replay(session, source_path, request))
            return session, discarded
        access = RelayAccess(tls=tls or TLSSettings(), temp_dir=session.tmp / "kube")
        if proposed is not None:
            capture = request.capture
            shadow = ShadowRequest(
                check=CheckRequest(
                    inputs=(request.live.server or "hubble-relay",),
                    policies=str(proposed),
                    include_audit=capture.include_audit,
                    agent=attrs.evolve(capture.agent, host_firewall=agent[0], dual_stack=agent[1]),
                    identities=request.identities,
                    declarations=request.declarations,
                ),
                live=request,
            )
            session.shadow = await self._open(
                session,
                lambda: runs.shadow(shadow, access, evidence_dir=session.evidence_root, now=now),
            )
            for problem in session.shadow.problems:
                log.warning("shadow session %s: %s", session.id, problem)
            session.task = asyncio.create_task(self._shadow(session))
            return session, discarded
        session.capture = await self._open(
            session,
            lambda: runs.live(
                request, access, session.policies, evidence_dir=session.evidence_root, now=now
            ),
        )
        session.task = asyncio.create_task(self._live(session))
        return session, discarded

    async def _open(self, session: Session, open_run: Callable[[], S]) -> S:
        """A live run, connected as ``cpg generate`` and ``cpg shadow`` connect (through the
        run layer), with the kubeconfig from the environment only (KUBECONFIG, then
        ~/.kube/config); credentials go with the session's folder. The session is discarded
        when it fails."""

        def opened() -> S:
            run = open_run()
            session.stream = run
            if run.relay is not None:
                session.source = run.relay.description
            return run

        pending = asyncio.get_running_loop().run_in_executor(None, opened)
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            # The call's deadline gave up on a set-up that still runs: whatever port-forward it
            # opens is closed when it ends.
            pending.add_done_callback(lambda _: session.release())
            self.discard()
            raise
        except BaseException:
            self.discard()
            raise

    async def _shadow(self, session: Session) -> None:
        assert session.shadow is not None
        shadow = session.shadow

        async def run() -> None:
            session.shadow_plan = await shadow.run()

        await self._follow(session, shadow, run())

    async def _replay(self, session: Session, path: Path, request: RunRequest) -> None:
        try:
            session.result = await asyncio.to_thread(
                runs.replay,
                request,
                [str(path)],
                session.policies,
                evidence_dir=session.evidence_root,
                engine=InProcess(),
                cancel=session.cancel,
            )
        except Cancelled:
            session.error = "the replay was stopped before it finished; nothing was written"
        except Exception as exc:  # the session ends with its error visible
            session.error = in_tool_words(exc)
            log.warning("session %s failed: %s", session.id, exc)
        finally:
            session.stopped = time.monotonic()
        await self._stopped(session)

    async def _live(self, session: Session) -> None:
        assert session.capture is not None
        capture = session.capture

        async def run() -> None:
            session.result = await capture.run()

        await self._follow(session, capture, run())
        await self._stopped(session)

    async def _stopped(self, session: Session) -> None:
        if self.on_stopped is None or session.error:
            return
        try:
            await asyncio.to_thread(self.on_stopped, session)
        except Exception as exc:  # an index is a shortcut: the tools build it again if asked
            log.warning("session %s: indexing the results failed: %s", session.id, exc)

    @staticmethod
    async def _follow(session: Session, stream: Any, run: Any) -> None:
        """Run a live stream (a capture or a shadow) to its end; the session shows what ended
        it, and its port-forward goes."""
        try:
            await run
            failure = stream.failure
            session.error = in_tool_words(failure) if failure is not None else stream.error
        except Exception as exc:
            session.error = in_tool_words(exc)
            log.warning("session %s failed: %s", session.id, exc)
        finally:
            session.stopped = time.monotonic()
            session.release()

    async def stop(self, session_id: str) -> Session:
        session = self.get(session_id)
        session.stop_calls += 1
        if session.capture is not None or session.shadow is not None:
            session.stop_stream()
        else:
            session.cancel.set()  # an unfinished replay stops now; nothing of it is written
        if session.task is not None:
            await asyncio.shield(session.task)
        return session

    def discard(self) -> None:
        session = self.current
        self.current = None
        if session is not None:
            session.cancel.set()
            session.stop_stream()
            session.release()
            forget_temp_dir(session.tmp / "kube")
            shutil.rmtree(session.tmp, ignore_errors=True)

    async def close(self) -> None:
        """Stop the session (a replay is cancelled, a live capture stops), then remove its
        folder: nothing is left behind, and nothing writes there afterwards."""
        try:
            session = self.current
            if session is not None and session.task is not None and session.state == "capturing":
                session.cancel.set()
                session.stop_stream()
                try:
                    await asyncio.wait_for(asyncio.shield(session.task), 6)
                except TimeoutError:
                    session.task.cancel()
            self.discard()
        finally:
            if self._kube_dir is not None:
                forget_temp_dir(self._kube_dir)
            self.closed.set()
