"""Reading Hubble Relay's flow stream for as long as a session lasts: connect, follow, resume
after a lost stream from the last flow's time (never counting a flow twice), give up after
too many failed reconnects. ``cpg generate`` and ``cpg shadow`` differ only in what they do
with each flow and at each flush."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import attrs
from google.protobuf.message import DecodeError
from prometheus_client.core import Metric

from cpg_core import FlowParseError, LostEvents, RunRequest
from cpg_core.identities import IdentityBook
from cpg_core.reading import MAX_REPORTED
from cpg_io._proto.flow import flow_pb2
from cpg_io._proto.observer import observer_pb2
from cpg_io.errors import RelayError
from cpg_io.hubble import TLSSettings
from cpg_io.hubble_convert import PartialResponse, ProtoConverter
from cpg_io.identities import IdentityRefresh
from cpg_io.kube import RelayConnection
from cpg_io.metrics import MetricsServer, SessionMetrics, family
from cpg_io.relay_receiver import (
    CONNECTED,
    DATA,
    FAILED,
    NOTICE,
    RECONNECTING,
    ReceivingProcess,
    StreamSettings,
    failure,
    messages,
    notice_message,
)
from cpg_io.sources import ReadStats

log = logging.getLogger("cpg.live")

UUID_MEMORY = 200_000


def _verdict_name(number: int) -> str:
    try:
        return str(flow_pb2.Verdict.Name(number))
    except ValueError:
        return str(number)


def every_verdict_stream(
    live: RunRequest, server: str, *, since: str, tls: TLSSettings | None, include_audit: bool
) -> StreamSettings:
    """The stream of every verdict a live ``shadow`` or ``drift`` judges, from the request."""
    return StreamSettings(
        server=server,
        namespaces=live.capture.namespaces,
        tls=tls or TLSSettings(),
        timeout=live.live.timeout,
        since=since,
        include_audit=include_audit,
        every_verdict=True,
    )


@attrs.define
class Progress:
    flows: int = 0
    policies_written: int = 0
    started: float = attrs.Factory(time.monotonic)
    reconnects: int = 0
    flushing: int = 0
    """Policies the flush under way is merging and writing (0 between flushes)."""
    verdicts: dict[int, int] = attrs.Factory(dict)
    """Flows received by Hubble verdict number."""
    newest: int = 0
    """The newest flow's time (Unix seconds; 0: none yet)."""


class RelayReader:
    """One session's stream. A subclass takes each flow (:meth:`_take_flow`, called with
    ``_lock`` held) and flushes; ``stop`` ends the session (signals, ``--duration``, an MCP
    call)."""

    def __init__(self, stream: StreamSettings) -> None:
        self.stream = stream
        self.stop = asyncio.Event()
        self.stats = ReadStats()
        self.progress = Progress()
        self.error = ""
        self.failure: BaseException | None = None
        """What ended the stream, when an error did (each root words it its own way)."""
        self.connected = False
        self._on_connected: Callable[[], None] = lambda: None
        self._converter = ProtoConverter()
        self._uuids: collections.deque[str] = collections.deque()
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        """Held by the stream for each flow; taken to hand what was received on."""
        self._halt = threading.Event()
        self._receiving: ReceivingProcess | None = None
        self.relay: RelayConnection | None = None
        """The way to the relay the run set up (a port-forward, credential files)."""
        self.identity_refresh: IdentityRefresh | None = None
        """How the cluster's identities are read again while the session runs (None: they
        come from files, or not at all)."""
        self.identity_readings = 0
        """How often the identities were read again (the first reading not counted)."""
        self.receiving = False
        """Connected to the relay and not reconnecting (``/readyz``)."""
        self.metrics = SessionMetrics(self.metric_families)
        self.metrics_addr = ""
        """Where ``/metrics``, ``/healthz`` and ``/readyz`` are served ("": not at all)."""
        self._timed = 0
        self._warned_caps: set[str] = set()

    def close(self) -> None:
        """Release what the run set up to reach the relay: the port-forward, credential
        files (idempotent; call it whatever happened)."""
        if self.relay is not None:
            self.relay.close()

    def _take_flow(self, f: Any, response: Any) -> None:
        raise NotImplementedError

    def _use_identities(self, book: IdentityBook | None) -> None:
        """Judge the flows from now on with ``book`` (called with ``_lock`` held)."""
        raise NotImplementedError

    def flows_not_kept(self) -> dict[str, int]:
        """Flows not kept because a memory cap was reached, by cap (called with ``_lock``
        held; a session without caps keeps everything)."""
        return {}

    def cap_warning(self, cap: str) -> str:
        """What to say, once, when the cap ``cap`` is first reached."""
        return f"a memory cap ({cap}) was reached: new flows of that kind are counted, not kept"

    def _warn_caps(self) -> None:
        """Say once per cap that it was reached (checked at each flush: at most one flush
        interval late, and nothing paid per flow)."""
        with self._lock:
            counts = self.flows_not_kept()
        for cap, flows in sorted(counts.items()):
            if flows and cap not in self._warned_caps:
                self._warned_caps.add(cap)
                log.warning(self.cap_warning(cap))

    # --- stream ------------------------------------------------------------------------------

    def _take(self, response: Any) -> None:
        try:
            self._take_one(response)
        except (FlowParseError, ValueError, OverflowError, DecodeError) as exc:
            # One bad flow is malformed, as a bad line of a replay is: the capture goes on.
            self._malformed(str(exc))

    def _malformed(self, why: str) -> None:
        stats = self.stats
        stats.malformed += 1
        if len(stats.malformed_examples) < MAX_REPORTED:
            stats.malformed_examples.append((stats.lines_read, why))
            log.warning("skipped a malformed flow from the relay: %s", why)

    def _take_one(self, response: Any) -> None:
        self.stats.lines_read += 1
        if response.WhichOneof("response_types") == "flow":
            f = response.flow
            uuid = f.uuid
            if uuid:
                if uuid in self._seen:  # re-sent after a reconnect
                    return
                self._seen.add(uuid)
                self._uuids.append(uuid)
                if len(self._uuids) > UUID_MEMORY:
                    self._seen.discard(self._uuids.popleft())
            self._take_flow(f, response)
            progress = self.progress
            progress.flows += 1
            verdict = f.verdict
            progress.verdicts[verdict] = progress.verdicts.get(verdict, 0) + 1
            seconds = f.time.seconds
            if seconds > progress.newest:
                progress.newest = seconds
            return
        record = self._converter.record(response)
        if type(record) is LostEvents:
            self.stats.lost_events += record.count
            log.warning(
                "Hubble lost %d events (%s): the capture is incomplete; consider a larger "
                "Hubble buffer",
                record.count,
                record.source or "unknown source",
            )
        else:
            self.stats.other_records += 1

    # The stream is received in a process of its own (cpg_io.relay_receiver) and decoded
    # and taken here, in a thread; a lock hands what was taken to the flusher.

    def _stream(self) -> None:
        receiving = ReceivingProcess(self.stream)
        self._receiving = receiving
        if self._halt.is_set():
            receiving.halt()
        try:
            for kind, body in receiving.records():
                if kind == DATA:
                    self._take_batch(body)
                elif kind == CONNECTED:
                    self.connected = self.receiving = True
                    self._on_connected()
                elif kind == RECONNECTING:
                    self.receiving = False
                    self.progress.reconnects += 1
                elif kind == NOTICE:
                    level, message = notice_message(body)
                    log.log(level, message)
                elif kind == FAILED:
                    raise failure(body)
        finally:
            self.receiving = False
            self._receiving = None
            receiving.close()

    def _take_batch(self, body: bytes) -> None:
        decode, lock, take = PartialResponse.FromString, self._lock, self._take
        for raw in messages(body):
            try:
                response = decode(raw)
                if response.WhichOneof("response_types") != "flow":
                    response = observer_pb2.GetFlowsResponse.FromString(raw)
            except DecodeError as exc:
                with lock:
                    self.stats.lines_read += 1
                    self._malformed(f"the relay sent a message that does not decode ({exc})")
                continue
            with lock:
                take(response)

    def _halt_stream(self) -> None:
        self._halt.set()
        receiving = self._receiving
        if receiving is not None:
            receiving.halt()

    # --- the session -------------------------------------------------------------------------

    async def _follow(
        self,
        flush: Callable[[], None],
        interval: float,
        duration: float | None,
        has_output: Callable[[], bool],
        deadline: float | None = None,
    ) -> None:
        """Stream until stopped, ``duration`` seconds after the relay answered, ``deadline``
        seconds from now, or an error, calling ``flush`` in a thread
        every ``interval`` seconds. A relay error before anything was received (and nothing
        was written: ``has_output``) is raised; a later one is kept in ``error``."""
        self.metrics.interval = interval
        with contextlib.ExitStack() as serving:
            if self.metrics_addr:
                serving.enter_context(
                    MetricsServer(self.metrics_addr, self.metrics, lambda: self.receiving)
                )
            await self._follow_stream(flush, interval, duration, has_output, deadline)
        self._warn_caps()  # a cap reached since the last flush is said before the last one

    async def _follow_stream(
        self,
        flush: Callable[[], None],
        interval: float,
        duration: float | None,
        has_output: Callable[[], bool],
        deadline: float | None,
    ) -> None:
        helpers = [asyncio.create_task(self._flusher(self._timed_flush(flush), interval))]
        if self.identity_refresh is not None:
            helpers.append(asyncio.create_task(self._refresher(self.identity_refresh)))
        if duration is not None or deadline is not None:
            loop = asyncio.get_running_loop()
            connected = asyncio.Event()

            def on_connected() -> None:  # called in the stream's thread
                loop.call_soon_threadsafe(connected.set)

            self._on_connected = on_connected
            if self.connected:
                connected.set()
            helpers.append(asyncio.create_task(self._timer(connected, duration, deadline)))
        stream = asyncio.create_task(asyncio.to_thread(self._stream))
        stopper = asyncio.create_task(self.stop.wait())
        try:
            done, _ = await asyncio.wait({stream, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stream in done and stream.exception() is not None:
                exc = stream.exception()
                self.error = str(exc)
                self.failure = exc
                if isinstance(exc, RelayError) and self.progress.flows == 0 and not has_output():
                    raise exc
        finally:
            self._halt_stream()
            for task in (stopper, *helpers):
                task.cancel()
            await asyncio.gather(stream, stopper, *helpers, return_exceptions=True)
        if not self.connected and not self.error:
            self.error = (
                f"stopped before a connection to Hubble Relay at {self.stream.server} was made"
            )

    def _timed_flush(self, flush: Callable[[], None]) -> Callable[[], None]:
        def timed() -> None:
            began = time.perf_counter()
            self._warn_caps()
            flush()
            self.metrics.flushed(time.perf_counter() - began)

        return timed

    def _judge(self, judge: Callable[[Any], None], flow: Any) -> None:
        """``judge(flow)``, one flow in 16 timed (``cpg_evaluation_duration_seconds``)."""
        self._timed += 1
        if self._timed & 15:
            judge(flow)
            return
        began = time.perf_counter()
        judge(flow)
        self.metrics.evaluation_seconds.observe(time.perf_counter() - began)

    def metric_families(self) -> Iterator[Metric]:
        """What ``/metrics`` shows of the session (a subclass adds its own)."""
        progress, stats = self.progress, self.stats
        flows = family("cpg_flows_received", ["verdict"])
        for number, count in sorted(progress.verdicts.items()):
            flows.add_metric([_verdict_name(number)], count)
        yield flows
        lag = family("cpg_relay_lag_seconds")
        if progress.newest:
            lag.add_metric([], max(0.0, time.time() - progress.newest))
        yield lag
        yield family("cpg_relay_connected", value=int(self.receiving))
        yield family("cpg_relay_reconnects", value=progress.reconnects)
        yield family("cpg_lost_events", value=stats.lost_events)
        yield family("cpg_malformed_flows", value=stats.malformed)
        with self._lock:
            not_kept = self.flows_not_kept()
        dropped = family("cpg_flows_not_kept", ["cap"])
        for cap, count in sorted(not_kept.items()):
            dropped.add_metric([cap], count)
        yield dropped
        failures = family("cpg_write_failures", ["reason"])
        for reason, count in sorted(self.metrics.write_failures.items()):
            failures.add_metric([reason], count)
        yield failures
        last = self.metrics.last_flush
        if last is not None:
            wall = time.time() - (time.monotonic() - last)
            yield family("cpg_last_flush_timestamp_seconds", value=wall)

    @staticmethod
    def _flusher(flush: Callable[[], None], interval: float) -> Coroutine[Any, Any, None]:
        async def every_interval() -> None:
            while True:
                await asyncio.sleep(interval)
                await asyncio.to_thread(flush)

        return every_interval()

    async def _refresher(self, refresh: IdentityRefresh) -> None:
        """Read the cluster's identities again every ``refresh.interval`` seconds; a reading
        that fails keeps the book the session has (said once per distinct failure)."""
        said = ""
        while True:
            await asyncio.sleep(refresh.interval)
            book, problem = await asyncio.to_thread(refresh.read)
            if problem:
                if problem != said:
                    log.warning("identities not read again (%s); kept those read before", problem)
                said = problem
                continue
            said = ""
            with self._lock:
                self._use_identities(book)
                self.identity_readings += 1

    async def _timer(
        self, connected: asyncio.Event, duration: float | None, deadline: float | None
    ) -> None:
        """Stop ``duration`` seconds after the relay answered, or ``deadline`` seconds from
        now (``--until``), whichever comes first."""
        loop = asyncio.get_running_loop()
        end = None if deadline is None else loop.time() + deadline
        if duration is not None:
            try:
                wait = None if end is None else max(0.0, end - loop.time())
                await asyncio.wait_for(connected.wait(), wait)
                end = (
                    min(end, loop.time() + duration) if end is not None else loop.time() + duration
                )
            except TimeoutError:
                pass  # the deadline came first
        if end is not None:
            await asyncio.sleep(max(0.0, end - loop.time()))
            self.stop.set()
