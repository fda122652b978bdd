"""Hubble Relay's flow stream received in a process of its own (ARCHITECTURE §D34).

Receiving a gRPC message costs the interpreter about as much as cpg's own work on the flow,
and one interpreter runs one thread at a time: in one process the two take turns. Here a
child process does the receiving: it connects, follows, resumes a lost stream from the last
flow's time, and hands the raw (undecoded) messages to the capture in batches over a pipe.
The capture's process decodes and aggregates them, so the two share the machine's cores.

The pipe carries records: a kind (one byte), a body length (four bytes, big-endian) and the
body; up to 256 messages travel in one record. The child holds at most 16,384 messages for a
capture that falls behind, then stops reading (the relay's flow control takes over). It
resumes from the time of the last flow it received that protojson can write; the capture
counts each uuid once. The capture decodes a message partially first
(``hubble_convert.PartialResponse``): of a flow only the fields the field mask asks for,
with the two endpoints left as bytes, the endpoint cache's key, so a known endpoint costs no
decoding, and a fault in a field cpg does not read does not make the flow malformed. The
child stops when its standard input closes (the capture halted it, or died), ignores a
terminal's Ctrl-C (the capture acts on it), forwards its log lines and sends the error that
ended the stream pickled; a child that dies is an error of the capture, which keeps what it
took.
"""

from __future__ import annotations

import array
import collections
import contextlib
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs
import cattrs
import grpc

from cpg_core import Message, Setting
from cpg_io.errors import RelayError
from cpg_io.hubble import (
    TLSSettings,
    diagnose,
    flow_filters,
    flows_request,
    open_channel,
    stream_raw_flows,
    timestamp,
    wait_ready,
)

log = logging.getLogger("cpg.live")

MAX_BACKOFF = 30.0
PROBE_EVERY = 1.0
"""How often a back-off asks whether the relay answers again (a connection, no stream)."""

DATA = b"D"
"""Messages: their count (4 bytes), their sizes (4 bytes each, native order), then them."""
CONNECTED = b"C"
RECONNECTING = b"R"
NOTICE = b"N"
"""A log line of the child's: JSON ``{"level": int, "message": str}``."""
FAILED = b"E"
"""The pickled error that ended the stream."""
END = b"X"

_BATCH = 256
"""Messages per record at most; a full batch is written before the tick ends."""
_TICK = 0.005
"""Seconds a received message waits at most in the child before it is handed over."""
_MAX_WAITING = 16384
"""Messages (~12 MB) the child holds for a capture that falls behind before it stops
reading."""
_PIPE_BYTES = 1 << 20


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
    """FORWARDED and REDIRECTED (and AUDIT) flows too (learning, shadow), not only the denied
    ones."""


_SETTINGS = cattrs.Converter()
_SETTINGS.register_unstructure_hook(Path, str)
_SETTINGS.register_structure_hook(Path, lambda value, _: Path(value))


# --- the capture's side ----------------------------------------------------------------------


class ReceivingProcess:
    """The child process of one capture: :meth:`records` until :data:`END`; :meth:`halt`
    from any thread."""

    def __init__(self, settings: StreamSettings) -> None:
        package_root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, [env.get("PYTHONPATH", "")])]
        )
        blob = json.dumps(_SETTINGS.unstructure(settings))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "cpg_io.relay_receiver", blob],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._halted = threading.Event()

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        out = self._process.stdout
        assert out is not None
        while True:
            head = out.read(5)
            if len(head) < 5:
                break
            body = out.read(int.from_bytes(head[1:], "big"))
            yield head[:1], body
            if head[:1] == END:
                return
        code = self._process.wait()
        if not self._halted.is_set():
            raise RelayError(
                f"the process receiving the relay's stream ended unexpectedly (exit code {code})"
            )

    def halt(self) -> None:
        """Ask the child to stop: it hands over what it holds, then ends."""
        self._halted.set()
        stdin = self._process.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.close()

    def close(self) -> None:
        """Halt the child and wait for it. What it still writes is not read any more (a
        capture that ends on an error): closing our end makes its writes fail at once
        instead of waiting for room in the pipe."""
        self.halt()
        if self._process.stdout is not None:
            self._process.stdout.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def messages(body: bytes) -> Iterator[memoryview]:
    """The raw messages of a :data:`DATA` record."""
    count = int.from_bytes(body[:4], "big")
    sizes = array.array("I")
    sizes.frombytes(body[4 : 4 + 4 * count])
    view = memoryview(body)
    at = 4 + 4 * count
    for size in sizes:
        yield view[at : at + size]
        at += size


def failure(body: bytes) -> BaseException:
    """The error a :data:`FAILED` record carries."""
    try:
        error = pickle.loads(body)
    except Exception as exc:  # an error that did not survive the trip
        return RelayError(f"the stream failed ({exc})")
    return error if isinstance(error, BaseException) else RelayError(str(error))


def resume_point(recent: collections.abc.Iterable[bytes]) -> Any | None:
    """The time of the last flow among ``recent`` raw messages (newest last) that has one
    protojson can write: a lost stream resumes from there."""
    from cpg_io._proto.observer import observer_pb2

    for raw in reversed(list(recent)):
        try:
            response = observer_pb2.GetFlowsResponse.FromString(raw)
        except Exception:  # a message that does not decode is skipped, as the capture does
            continue
        if response.WhichOneof("response_types") != "flow" or not response.flow.HasField("time"):
            continue
        if 0 <= response.flow.time.seconds < 253402300800:  # years 1970-9999
            return response.flow.time
    return None


# --- the child -------------------------------------------------------------------------------


class _Outbox:
    """Hands received messages and events to the capture, in order: a writer thread sleeps
    until something arrives, gathers for a tick (less at a full batch) and writes what waits,
    a batch per record. When the
    capture falls behind, receiving waits (the relay's flow control then holds the rest, as
    it would for a capture in one process): what waits here stays small."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._waiting: collections.deque[bytes | tuple[bytes, bytes]] = collections.deque()
        self._arrived = threading.Event()
        """Something waits: the writer, asleep while there is nothing, starts its tick."""
        self._full = threading.Event()
        """A batch is full (or an event waits): the writer does not wait for the tick's end."""
        self._room = threading.Event()
        self._closing = False
        self._writer = threading.Thread(target=self._write_loop, name="cpg-relay-out", daemon=True)
        self._writer.start()

    def message(self, raw: bytes) -> None:
        waiting = self._waiting
        waiting.append(raw)
        count = len(waiting)
        if count == 1:
            self._arrived.set()
        elif count == _BATCH:
            self._full.set()
        elif count >= _MAX_WAITING:
            self._room.clear()
            self._full.set()
            while len(waiting) >= _MAX_WAITING and self._writer.is_alive():
                self._room.wait(_TICK)

    def event(self, kind: bytes, body: bytes = b"") -> None:
        self._waiting.append((kind, body))
        self._arrived.set()
        self._full.set()

    def close(self) -> None:
        self._closing = True
        self._arrived.set()
        self._full.set()
        self._writer.join()
        self._write(END, b"")

    def _write(self, kind: bytes, body: bytes) -> None:
        self._out.write(kind + len(body).to_bytes(4, "big") + body)
        self._out.flush()

    def _write_loop(self) -> None:
        try:
            self._write_all()
        except OSError:  # the capture closed its end: nobody reads any more
            self._room.set()

    def _write_all(self) -> None:
        waiting = self._waiting
        while True:
            self._arrived.wait()  # a quiet stream costs no wake-ups
            self._arrived.clear()
            self._full.wait(_TICK)
            self._full.clear()
            while waiting:
                self._write_next(waiting)
                self._room.set()
            if self._closing and not waiting:
                return

    def _write_next(self, waiting: collections.deque[bytes | tuple[bytes, bytes]]) -> None:
        """One record: an event, or up to a batch of the messages before the next event."""
        if not isinstance(waiting[0], bytes):
            event = waiting.popleft()
            assert not isinstance(event, bytes)
            self._write(*event)
            return
        batch: list[bytes] = []
        while waiting and len(batch) < _BATCH and isinstance(waiting[0], bytes):
            item = waiting.popleft()
            assert isinstance(item, bytes)
            batch.append(item)
        sizes = array.array("I", map(len, batch))
        self._write(DATA, len(batch).to_bytes(4, "big") + sizes.tobytes() + b"".join(batch))


class _NoticeHandler(logging.Handler):
    def __init__(self, outbox: _Outbox) -> None:
        super().__init__()
        self._outbox = outbox

    def emit(self, record: logging.LogRecord) -> None:
        """A message naming settings keeps them as such, for the capture to spell."""
        parts = record.msg.parts if isinstance(record.msg, Message) else (record.getMessage(),)
        encoded = [p if isinstance(p, str) else {"setting": p.name} for p in parts]
        text = json.dumps({"level": record.levelno, "parts": encoded})
        self._outbox.event(NOTICE, text.encode())


def notice_message(body: bytes) -> tuple[int, Message]:
    """A notice of the receiving process: its level and message."""
    notice = json.loads(body)
    parts = [p if isinstance(p, str) else Setting(p["setting"]) for p in notice["parts"]]
    return int(notice["level"]), Message(*parts)


class _Receiver:
    """The child's stream: connect, follow, resume after a lost stream, give up after too
    many failed reconnects (the rules of ARCHITECTURE §D15)."""

    def __init__(self, settings: StreamSettings, outbox: _Outbox) -> None:
        self.settings = settings
        self.outbox = outbox
        self.halt = threading.Event()
        self.received = 0
        self._recent: collections.deque[bytes] = collections.deque(maxlen=64)
        self._since: Any = None
        self._call: Any = None
        self._field_mask = True
        self._retries = 0

    def stop(self) -> None:
        self.halt.set()
        call = self._call
        if call is not None:
            call.cancel()

    def _stream_once(self, first: bool) -> None:
        settings = self.settings
        if first:  # say at once why the relay cannot be reached, when the system knows
            diagnose(settings.server, settings.tls, settings.timeout)
        channel = open_channel(settings.server, settings.tls)
        try:
            wait_ready(channel, settings.server, settings.timeout)
            # every connection, not only the first: readiness and cpg_relay_connected follow
            # the stream back after a relay restart
            self.outbox.event(CONNECTED)
            filters = flow_filters(
                list(settings.namespaces), settings.include_audit, settings.every_verdict
            )
            latest = resume_point(self._recent)
            if latest is not None:
                self._since = latest
            since = self._since
            if since is None and settings.since:
                since = timestamp(settings.since)
            request = flows_request(filters, since, field_mask=self._field_mask)
            call = stream_raw_flows(channel, request)
            self._call = call
            if self.halt.is_set():
                call.cancel()
            if not first:
                log.warning("reconnected to Hubble Relay at %s", settings.server)
            recent, hand_over = self._recent.append, self.outbox.message
            for raw in call:
                recent(raw)
                hand_over(raw)
                self.received += 1
                self._retries = 0
        finally:
            self._call = None
            channel.close()

    def run(self) -> None:
        first = True
        self._retries = 0
        server = self.settings.server
        while not self.halt.is_set():
            try:
                self._stream_once(first)
                reason: tuple[str | Setting, ...] = ("the relay closed the stream",)
            except RelayError as exc:
                if first:
                    raise
                reason = exc.parts
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else None
                details = exc.details() if hasattr(exc, "details") else str(exc)
                if self.halt.is_set():
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
                if first and self.received == 0 and code == grpc.StatusCode.UNAVAILABLE:
                    raise RelayError(
                        f"Hubble Relay at {server} is unavailable ({details})"
                    ) from None
                reason = (f"{code.name if code else 'error'}: {details}",)
            first = False
            if self.halt.is_set():
                return
            self._retries += 1
            if self._retries > self.settings.max_retries:
                raise RelayError(
                    f"gave up after {self.settings.max_retries} reconnects to {server} (",
                    *reason,
                    ")",
                )
            delay = min(MAX_BACKOFF, 0.5 * 2 ** (self._retries - 1))
            self.outbox.event(RECONNECTING)
            log.warning(
                Message("Hubble stream lost (", *reason, f"); reconnecting in {delay:.1f}s")
            )
            self._back_off(delay)

    def _back_off(self, delay: float) -> None:
        """Wait ``delay`` seconds before reconnecting, unless the relay answers sooner: it is
        asked every :data:`PROBE_EVERY` seconds, so a relay back from a restart is streamed
        from again within about a second, whatever the phase of the back-off (a relay that
        came back as a 30 s wait began was read again only after it)."""
        ends = time.monotonic() + delay
        while not self.halt.is_set():
            left = ends - time.monotonic()
            if left <= 0 or self.halt.wait(min(left, PROBE_EVERY)):
                return
            if left > PROBE_EVERY and _answers(self.settings.server, self.settings.tls):
                return


def _answers(server: str, tls: TLSSettings) -> bool:
    """Whether the relay takes a connection now (HTTP/2 up, the channel ready), asked on a
    fresh channel: one that failed before waits out gRPC's own back-off."""
    try:
        channel = open_channel(server, tls)
    except RelayError:
        return False
    try:
        grpc.channel_ready_future(channel).result(timeout=PROBE_EVERY / 2)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def _watch_stdin(receiver: _Receiver) -> None:
    """The capture closes our standard input to stop us (or its death closes it). Read with
    os.read, not sys.stdin: a daemon thread blocked inside a buffered reader holds its lock,
    and the interpreter's shutdown then aborts ("could not acquire lock … at interpreter
    shutdown") when the process ends on its own, as after giving up on the relay."""
    try:
        while os.read(0, 1 << 12):
            pass
    except OSError:
        pass
    receiver.stop()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the capture's to act on
    settings = _SETTINGS.structure(json.loads(argv[0]), StreamSettings)
    out = sys.stdout.buffer
    try:  # a larger pipe: fewer wake-ups on both sides (Linux only; harmless elsewhere)
        import fcntl

        fcntl.fcntl(out.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError):
        pass
    outbox = _Outbox(out)
    handler = _NoticeHandler(outbox)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    receiver = _Receiver(settings, outbox)
    threading.Thread(target=_watch_stdin, args=(receiver,), daemon=True).start()
    try:
        receiver.run()
    except BaseException as exc:  # the capture raises it in its own process
        try:
            body = pickle.dumps(exc)
        except Exception:
            body = pickle.dumps(RelayError(f"the stream failed: {exc}"))
        outbox.event(FAILED, body)
    try:
        outbox.close()
    except (BrokenPipeError, OSError):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
