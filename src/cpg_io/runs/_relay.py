"""Reading Hubble Relay's flow stream for as long as a session lasts: connect, follow, resume
after a lost stream from the last flow's time (never counting a flow twice), give up after
too many failed reconnects. ``cpg generate`` and ``cpg shadow`` differ only in what they do
with each flow and at each flush."""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import attrs
import grpc

from cpg_core import FlowParseError, LostEvents, RunRequest, Setting
from cpg_core.reading import MAX_REPORTED
from cpg_io.errors import RelayError
from cpg_io.hubble import (
    TLSSettings,
    diagnose,
    flow_filters,
    flows_request,
    open_channel,
    stream_flows,
    timestamp,
    wait_ready,
)
from cpg_io.hubble_convert import ProtoConverter
from cpg_io.sources import ReadStats

log = logging.getLogger("cpg.live")

MAX_BACKOFF = 30.0
UUID_MEMORY = 200_000


@attrs.frozen
class StreamSettings:
    """Where the flows come from and which ones are asked for."""

    server: str
    namespaces: tuple[str, ...] = ()
    tls: TLSSettings = attrs.Factory(TLSSettings)
    timeout: float = 10.0
    since: str = ""
    """A time key: ask the relay for its buffered flows from then on (``--since``)."""
    max_retries: int = 10
    """Consecutive failed reconnects before giving up."""
    include_audit: bool = False
    every_verdict: bool = False
    """FORWARDED and REDIRECTED flows too (learning, shadow), not only the denied ones."""


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
        self._converter = ProtoConverter()
        self._uuids: collections.deque[str] = collections.deque()
        self._seen: set[str] = set()
        self._since: Any = None
        self._lock = threading.Lock()
        """Held by the stream for each flow; taken to hand what was received on."""
        self._halt = threading.Event()
        self._call: Any = None
        self._retries = 0
        self._field_mask = True

    def _take_flow(self, f: Any, response: Any) -> None:
        raise NotImplementedError

    # --- stream ------------------------------------------------------------------------------

    def _take(self, response: Any) -> None:
        try:
            self._take_one(response)
        except (FlowParseError, ValueError, OverflowError) as exc:
            # One bad flow is malformed, as a bad line of a replay is: the capture goes on.
            stats = self.stats
            stats.malformed += 1
            if len(stats.malformed_examples) < MAX_REPORTED:
                stats.malformed_examples.append((stats.lines_read, str(exc)))
                log.warning("skipped a malformed flow from the relay: %s", exc)

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
            if f.HasField("time"):  # a flow that converted: a resume starts from its time
                self._since = f.time
            self.progress.flows += 1
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

    # The stream is read by the blocking gRPC client in a thread: Python's asyncio gRPC costs
    # about three times as much per message. A lock hands what was received to the flusher.

    def _stream_once(self, first: bool) -> None:
        stream = self.stream
        if first:  # say at once why the relay cannot be reached, when the system knows
            diagnose(stream.server, stream.tls, stream.timeout)
        channel = open_channel(stream.server, stream.tls)
        try:
            wait_ready(channel, stream.server, stream.timeout)
            self.connected = True
            filters = flow_filters(
                list(stream.namespaces), stream.include_audit, stream.every_verdict
            )
            since = self._since
            if since is None and stream.since:
                since = timestamp(stream.since)
            call = stream_flows(channel, flows_request(filters, since, field_mask=self._field_mask))
            self._call = call
            if self._halt.is_set():
                call.cancel()
            if not first:
                log.warning("reconnected to Hubble Relay at %s", stream.server)
            lock = self._lock
            for response in call:
                with lock:
                    self._take(response)
                self._retries = 0
        finally:
            self._call = None
            channel.close()

    def _stream(self) -> None:
        first = True
        self._retries = 0
        server = self.stream.server
        while not self._halt.is_set():
            try:
                self._stream_once(first)
                reason = "the relay closed the stream"
            except RelayError as exc:
                if first:
                    raise
                reason = str(exc)
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                details = exc.details() if hasattr(exc, "details") else str(exc)
                if self._halt.is_set():
                    return
                if (
                    self._field_mask
                    and code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED)
                    and "mask" in (details or "").lower()
                ):  # a relay that refuses the field mask: ask again for whole flows
                    log.info(
                        "Hubble Relay refused the field mask (%s); asking for whole flows", details
                    )
                    self._field_mask = False
                    continue
                if code == grpc.StatusCode.UNIMPLEMENTED:  # permanent: retrying cannot help
                    raise RelayError(
                        f"{server} answers gRPC but is not Hubble Relay: it has "
                        f"no observer.Observer/GetFlows ({details}); check ",
                        Setting("server"),
                        " (a port-forward to hubble-ui or hubble-peer instead of hubble-relay?)",
                    ) from None
                if first and self.progress.flows == 0 and code == grpc.StatusCode.UNAVAILABLE:
                    raise RelayError(
                        f"Hubble Relay at {server} is unavailable ({details})"
                    ) from None
                reason = f"{code.name if code else 'error'}: {details}"
            first = False
            if self._halt.is_set():
                return
            self._retries += 1
            if self._retries > self.stream.max_retries:
                raise RelayError(
                    f"gave up after {self.stream.max_retries} reconnects to {server} ({reason})"
                )
            delay = min(MAX_BACKOFF, 0.5 * 2 ** (self._retries - 1))
            self.progress.reconnects += 1
            log.warning("Hubble stream lost (%s); reconnecting in %.1fs", reason, delay)
            self._halt.wait(delay)

    def _halt_stream(self) -> None:
        self._halt.set()
        call = self._call
        if call is not None:
            call.cancel()

    # --- the session -------------------------------------------------------------------------

    async def _follow(
        self,
        flush: Callable[[], None],
        interval: float,
        duration: float | None,
        has_output: Callable[[], bool],
    ) -> None:
        """Stream until stopped, a ``duration`` or an error, calling ``flush`` in a thread
        every ``interval`` seconds. A relay error before anything was received (and nothing
        was written: ``has_output``) is raised; a later one is kept in ``error``."""
        stream = asyncio.create_task(asyncio.to_thread(self._stream))
        helpers = [asyncio.create_task(self._flusher(flush, interval))]
        if duration is not None:
            helpers.append(asyncio.create_task(self._timer(duration)))
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

    @staticmethod
    def _flusher(flush: Callable[[], None], interval: float) -> Coroutine[Any, Any, None]:
        async def every_interval() -> None:
            while True:
                await asyncio.sleep(interval)
                await asyncio.to_thread(flush)

        return every_interval()

    async def _timer(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.stop.set()
