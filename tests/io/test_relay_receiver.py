"""The relay's stream received in a process of its own (issue 28, ARCHITECTURE §D34): what
crosses the pipe arrives whole and in order, a capture that falls behind makes the receiver
wait instead of hoarding, and a receiver that dies ends the capture with a clear error."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path
from typing import Any

import pytest

from cpg_io import relay_receiver
from cpg_io.relay_receiver import (
    CONNECTED,
    DATA,
    END,
    NOTICE,
    _Outbox,
    messages,
)
from fake_relay import example_responses, fake_relay


def _records(data: bytes) -> list[tuple[bytes, bytes]]:
    out, at = [], 0
    while at < len(data):
        kind, size = data[at : at + 1], int.from_bytes(data[at + 1 : at + 5], "big")
        out.append((kind, data[at + 5 : at + 5 + size]))
        at += 5 + size
    return out


def test_the_outbox_hands_over_every_message_in_order_in_bounded_batches() -> None:
    out = io.BytesIO()
    outbox = _Outbox(out)
    sent = [f"message {n}".encode() * (n % 7 + 1) for n in range(1000)]
    outbox.event(CONNECTED)
    for raw in sent[:600]:
        outbox.message(raw)
    outbox.event(NOTICE, b'{"level": 30, "message": "between"}')
    for raw in sent[600:]:
        outbox.message(raw)
    outbox.close()
    records = _records(out.getvalue())
    assert records[0] == (CONNECTED, b"") and records[-1] == (END, b"")
    kinds = [kind for kind, _ in records]
    notice = kinds.index(NOTICE)
    received = [bytes(m) for kind, body in records[:notice] if kind == DATA for m in messages(body)]
    assert received == sent[:600]  # everything before the event arrives before it
    received += [
        bytes(m) for kind, body in records[notice:] if kind == DATA for m in messages(body)
    ]
    assert received == sent
    assert all(len(list(messages(body))) <= 256 for kind, body in records if kind == DATA)


class _StuckPipe(io.RawIOBase):
    """A pipe whose reader does not read until released."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        assert self.released.wait(30)
        self.data += bytes(b)
        return len(b)


def test_a_capture_that_falls_behind_makes_receiving_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay_receiver, "_MAX_WAITING", 40)
    monkeypatch.setattr(relay_receiver, "_BATCH", 8)
    pipe = _StuckPipe()
    outbox = _Outbox(pipe)  # type: ignore[arg-type]
    taken = []

    def receive() -> None:
        for n in range(200):
            outbox.message(b"%d" % n)
            taken.append(n)

    receiver = threading.Thread(target=receive)
    receiver.start()
    receiver.join(timeout=1)
    # the writer is stuck on its first batch; receiving stopped once 40 messages waited
    assert receiver.is_alive()
    assert len(taken) <= 40 + 8
    pipe.released.set()
    receiver.join(timeout=30)
    assert not receiver.is_alive() and len(taken) == 200
    outbox.close()
    records = _records(bytes(pipe.data))
    got = [bytes(m) for kind, body in records if kind == DATA for m in messages(body)]
    assert got == [b"%d" % n for n in range(200)]


def test_a_receiver_that_dies_ends_the_capture_with_a_clear_error(tmp_path: Path) -> None:
    from cpg_core import AggregateOptions
    from cpg_io.runs._live import LiveCapture, LiveSettings

    responses = example_responses()
    with fake_relay(responses) as (relay, address):
        relay.pause_after = 3  # the stream stays open with 3 flows sent
        capture = LiveCapture(
            LiveSettings(server=address, output_dir=tmp_path / "p", options=AggregateOptions())
        )

        def kill_the_receiver() -> None:
            polling = threading.Event()
            while capture.progress.flows < 3 or capture._receiving is None:
                polling.wait(0.01)  # until the three flows are taken
            capture._receiving._process.kill()

        killer = threading.Thread(target=kill_the_receiver, daemon=True)
        killer.start()
        try:
            result = asyncio.run(capture.run())
        finally:
            relay.resume.set()
        killer.join(timeout=30)
    assert "receiving the relay's stream ended unexpectedly" in capture.error
    assert capture.progress.flows == 3
    assert result.files  # what arrived before is written


def test_a_capture_that_fails_stops_a_busy_receiver_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The capture stops reading on an error while the relay still sends: the receiving
    process, its pipe full, ends at once (its writes fail) and says nothing."""
    from cpg_core import AggregateOptions
    from cpg_io.runs._live import LiveCapture, LiveSettings

    def broken(self: object, body: bytes) -> None:
        raise RuntimeError("the capture broke")

    monkeypatch.setattr(LiveCapture, "_take_batch", broken)
    many = example_responses() * 60  # several MB: more than the pipe and a batch hold
    with fake_relay(many) as (_, address):
        capture = LiveCapture(
            LiveSettings(server=address, output_dir=tmp_path / "p", options=AggregateOptions())
        )
        asyncio.run(capture.run())
    assert capture.error == "the capture broke"
    assert "Traceback" not in capfd.readouterr().err


def test_a_receiver_that_gives_up_exits_cleanly_while_its_stdin_is_open() -> None:
    """The receiving process ends on its own (here: nothing listens at the address) while the
    capture still holds its standard input open. Its stdin watcher must not abort the
    interpreter's shutdown ("Fatal Python error: … could not acquire lock"), which it did in
    most of such exits when it read through sys.stdin's buffered reader."""
    import json
    import socket
    import subprocess
    import sys

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings = relay_receiver.StreamSettings(server=f"127.0.0.1:{port}", timeout=1.0)
    blob = json.dumps(relay_receiver._SETTINGS.unstructure(settings))
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "cpg_io.relay_receiver", blob],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(6)
    ]
    for child in children:  # stdin stays open (communicate() would close it: a stop)
        assert child.stdout is not None and child.stderr is not None
        out, err = child.stdout.read(), child.stderr.read()
        child.wait(timeout=60)
        assert child.stdin is not None
        child.stdin.close()
        assert child.returncode == 0, err.decode()  # the failure went to the capture
        assert b"Fatal Python error" not in err
        (body,) = [body for kind, body in _records(out) if kind == relay_receiver.FAILED]
        error = relay_receiver.failure(body)
        assert "connection refused" in str(error)


def test_a_notice_keeps_the_settings_it_names_for_the_capture_to_spell() -> None:
    """A warning from the receiving process (the relay lost, a reason that names a setting)
    reaches the capture with the setting as such: the CLI shows it as its flag."""
    import logging

    from cpg_core import Message, Setting

    sink = io.BytesIO()
    outbox = _Outbox(sink)
    handler = relay_receiver._NoticeHandler(outbox)
    said = Message("cannot connect; check ", Setting("tls_ca_cert"), " and the address")
    handler.emit(logging.LogRecord("cpg", logging.WARNING, __file__, 1, said, None, None))
    handler.emit(logging.LogRecord("cpg", logging.INFO, __file__, 2, "plain %d", (3,), None))
    outbox.close()
    notices = [body for kind, body in _records(sink.getvalue()) if kind == NOTICE]
    (level, message), (info, plain) = map(relay_receiver.notice_message, notices)
    assert level == logging.WARNING and message.parts == said.parts
    assert message.render({"tls_ca_cert": "--tls-ca-cert"}).endswith(
        "--tls-ca-cert and the address"
    )
    assert (info, str(plain)) == (logging.INFO, "plain 3")


def test_a_relay_back_during_a_long_back_off_is_streamed_from_again_at_once() -> None:
    """Issue 67: a relay that came back as a 30 s back-off began was read again only after
    it. The back-off asks whether the relay answers every second and ends when it does."""
    import socket

    from cpg_io.relay_receiver import StreamSettings, _Receiver

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    receiver = _Receiver(StreamSettings(server=f"127.0.0.1:{port}"), _Outbox(io.BytesIO()))
    waiting = threading.Thread(target=receiver._back_off, args=(600.0,))
    waiting.start()
    try:
        with fake_relay(example_responses(), port=port):
            waiting.join(timeout=60)  # a bound for a broken build, far under the 600 s asked
            assert not waiting.is_alive(), "the back-off did not end when the relay answered"
    finally:
        receiver.halt.set()
        waiting.join()
    # and a halt ends a back-off at once, relay or not
    stopped = _Receiver(StreamSettings(server=f"127.0.0.1:{port}"), _Outbox(io.BytesIO()))
    stopped.halt.set()
    stopped._back_off(600.0)
