"""The live path at cluster speed (issue 17): the field mask, and a stream read without
grpcio's helper thread that can still be cancelled from another thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import grpc
import pytest

from conftest import EXAMPLE, cpg, policies
from cpg_io.hubble import TLSSettings, flows_request, open_channel, stream_raw_flows
from cpg_io.hubble_convert import FLOW_FIELDS
from cpg_io.relay_receiver import resume_point
from fake_relay import example_responses, fake_relay


@pytest.mark.parametrize("refuse", [False, True], ids=["mask-honoured", "mask-refused"])
def test_the_field_mask_asks_for_what_cpg_reads(tmp_path: Path, refuse: bool) -> None:
    replayed = tmp_path / "replayed"
    assert cpg("replay", str(EXAMPLE), "-d", str(replayed), "--no-evidence").returncode == 0
    with fake_relay(example_responses()) as (relay, address):
        relay.refuse_mask = refuse
        live = tmp_path / "live"
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(live),
            "--no-evidence",
            "--duration",
            "1.5s",
        )
        assert ran.returncode == 0, ran.stderr
        first = relay.requests[0]
        assert list(first.field_mask.paths) == list(FLOW_FIELDS)
        if refuse:  # asked again, for whole flows
            assert len(relay.requests) >= 2 and not relay.requests[1].HasField("field_mask")
    # the masked flows make exactly the policies the whole ones do
    assert policies(live) == policies(replayed)


def test_the_single_threaded_stream_is_cancelled_cleanly_from_another_thread() -> None:
    with fake_relay(example_responses()) as (relay, address):
        channel = open_channel(address, TLSSettings())
        call = stream_raw_flows(channel, flows_request([], None))
        received: list[object] = []
        ended: list[BaseException] = []
        all_in = threading.Event()

        def read() -> None:
            try:
                for response in call:
                    received.append(response)
                    if len(received) == len(relay.responses):
                        all_in.set()
            except grpc.RpcError as exc:
                ended.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        assert all_in.wait(10), "every flow arrived; the stream stays open (follow)"
        call.cancel()
        reader.join(timeout=5)
        channel.close()
    assert not reader.is_alive(), "the reading thread ended"
    assert ended and ended[0].code() == grpc.StatusCode.CANCELLED
    assert len(received) == len(relay.responses)


def _again(responses: list[object], start: int) -> list[object]:
    """The candidate flows of ``responses`` once more, as new flows (new uuids)."""
    from cpg_io._proto.observer import observer_pb2

    out = []
    for n, response in enumerate(responses):
        if not response.HasField("flow") or response.flow.verdict != 2:  # DROPPED
            continue
        copy = observer_pb2.GetFlowsResponse()
        copy.CopyFrom(response)
        copy.flow.uuid = f"again-{start + n}"
        out.append(copy)
    return out


def _evidence_flows(root: Path) -> int:
    import json

    return sum(
        rule["flow_count"]
        for path in root.rglob("*.json")
        if path.name != "cluster-health.json"
        for rule in json.loads(path.read_text())["rules"]
    )


def test_a_flush_with_no_new_rule_touches_no_policy_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cpg_core import AggregateOptions
    from cpg_io import store
    from cpg_io.runs._live import LiveCapture, LiveSettings
    from cpg_io.runs._output import EvidenceSettings

    responses = example_responses()
    capture = LiveCapture(
        LiveSettings(
            server="127.0.0.1:9",
            output_dir=tmp_path / "policies",
            options=AggregateOptions(),
            evidence=EvidenceSettings(root=tmp_path / "evidence"),
            evidence_interval=3600,
        )
    )
    for response in responses:
        capture._take(response)
    capture.flush()
    first_flows = _evidence_flows(tmp_path / "evidence")
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "policies").rglob("*.yaml")}
    assert files and first_flows > 0
    reads: list[object] = []
    writes: list[object] = []
    real_read = store.PolicyStore.read
    monkeypatch.setattr(
        store.PolicyStore, "read", lambda self, path: reads.append(path) or real_read(self, path)
    )
    monkeypatch.setattr(store.PolicyStore, "write", lambda *a, **k: writes.append(a))
    for response in _again(responses, 0):
        capture._take(response)
    capture.flush()  # the same rules again: no policy file read or written, evidence waits
    assert reads == [] and writes == []
    assert _evidence_flows(tmp_path / "evidence") == first_flows
    capture.flush(final=True)  # the last flush writes the waiting evidence, still no policy
    assert reads == [] and writes == []
    assert _evidence_flows(tmp_path / "evidence") == 2 * first_flows
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "policies").rglob("*.yaml")} == files


def test_sigterm_during_the_evidence_interval_writes_all_evidence(tmp_path: Path) -> None:
    """The second batch repeats the first's rules: its evidence waits in memory (interval
    1h) until SIGTERM, whose last flush writes it."""
    import os
    import pty
    import signal
    import subprocess

    from conftest import CPG

    responses = example_responses()
    more = _again(responses, 0)
    total = sum(1 for r in responses + more if r.HasField("flow"))
    replayed = tmp_path / "replayed-evidence"
    assert (
        cpg(
            "replay", str(EXAMPLE), "-d", str(tmp_path / "r"), "--evidence-dir", str(replayed)
        ).returncode
        == 0
    )
    once = _evidence_flows(replayed)  # the evidence of one pass over the example
    out, evidence = tmp_path / "policies", tmp_path / "evidence"
    with fake_relay(responses + more) as (relay, address):
        relay.pause_after = len(responses)
        primary, secondary = pty.openpty()
        proc = subprocess.Popen(
            [
                CPG,
                "generate",
                "--server",
                address,
                "-d",
                str(out),
                "--evidence-dir",
                str(evidence),
                "--flush-interval",
                "0.2s",
                "--evidence-interval",
                "1h",
            ],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "200"},
        )
        os.close(secondary)
        seen, before_stop, stopped = b"", 0, False
        try:
            while True:
                try:
                    data = os.read(primary, 65536)
                except OSError:
                    break
                if not data:
                    break
                seen += data
                if not relay.resume.is_set() and _evidence_flows(evidence) == once:
                    relay.resume.set()  # the first pass is written: send the same rules again
                if not stopped and f"cpg: {total:,} flows".encode() in seen:
                    before_stop = _evidence_flows(evidence)
                    proc.send_signal(signal.SIGTERM)  # every flow is in; the interval is 1h
                    stopped = True
        finally:
            relay.resume.set()
            proc.wait(timeout=60)
            os.close(primary)
    assert stopped and proc.returncode == 0, seen.decode(errors="replace")[-2000:]
    assert before_stop < 2 * once, "the repeated rules' evidence was waiting in memory"
    assert _evidence_flows(evidence) == 2 * once, "nothing lost on a clean stop"


def test_a_flow_past_year_9999_is_malformed_and_the_capture_goes_on(tmp_path: Path) -> None:
    from cpg_core import AggregateOptions
    from cpg_io.runs._live import LiveCapture, LiveSettings

    responses = example_responses()
    bad = type(responses[0])()
    bad.CopyFrom(responses[0])
    bad.flow.time.seconds = 253402300800 + 3600  # year 10000
    bad.flow.uuid = "from-the-future"
    capture = LiveCapture(
        LiveSettings(server="127.0.0.1:9", output_dir=tmp_path / "p", options=AggregateOptions())
    )
    for response in [responses[0], bad, *responses[1:]]:
        capture._take(response)
    assert capture.stats.malformed == 1
    assert "time" in capture.stats.malformed_examples[0][1]
    flows = sum(1 for r in responses if r.WhichOneof("response_types") == "flow")
    assert capture.progress.flows == flows  # every other flow was taken
    capture.flush()
    assert list((tmp_path / "p").rglob("*.yaml"))
    # a lost stream resumes from the last flow whose time can be written, not from year 10000
    encoded = [responses[0].SerializeToString(), bad.SerializeToString()]
    resume = resume_point(encoded)
    assert resume is not None and resume == responses[0].flow.time
    assert resume_point([bad.SerializeToString(), b"\xff not protobuf"]) is None


def _capture(tmp_path: Path, **settings: object) -> object:
    from cpg_core import AggregateOptions
    from cpg_io.runs._live import LiveCapture, LiveSettings
    from cpg_io.runs._output import EvidenceSettings

    return LiveCapture(
        LiveSettings(
            server="127.0.0.1:9",
            output_dir=tmp_path / "policies",
            options=AggregateOptions(),
            evidence=EvidenceSettings(root=tmp_path / "evidence"),
            **settings,  # type: ignore[arg-type]
        )
    )


def test_a_flush_with_no_new_rule_copies_plans_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: a quiet flush costs a constant. No entry is copied, moved, parsed, folded
    or planned, whatever the number of policies, and the write stage is not entered."""
    from cpg_core import Aggregator
    from cpg_core._flows.attribution import RuleStats
    from cpg_io.runs import _live

    capture: Any = _capture(tmp_path, evidence_interval=3600)
    responses = example_responses()
    for response in responses:
        capture._take(response)
    capture.flush()
    calls: list[str] = []

    def counting(owner: type, name: str) -> None:
        real = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    for name in ("copy", "take", "absorb", "absorb_counted", "_settle"):
        counting(RuleStats, name)
    for name in ("plans", "resolved", "state", "drain", "busy_targets", "absorb", "fold_some"):
        counting(Aggregator, name)
    counting(_live, "write_outputs")  # type: ignore[arg-type]
    more = _again(responses, 0)
    for response in more:
        with capture._lock:
            capture._take(response)
    assert capture.progress.flows == len(more) + sum(1 for r in responses if r.HasField("flow"))
    capture.flush()
    assert calls == []
    capture.flush(final=True)  # the evidence interval's work: every policy with flows
    assert "write_outputs" in calls and "drain" in calls


def test_the_evidence_interval_writes_only_the_policies_that_saw_flows(tmp_path: Path) -> None:
    capture: Any = _capture(tmp_path, evidence_interval=0)
    responses = example_responses()
    for response in responses:
        capture._take(response)
    capture.flush()
    evidence = tmp_path / "evidence"
    files = sorted(p for p in evidence.rglob("*.json") if p.name != "cluster-health.json")
    assert len(files) >= 3
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    policies = {p: p.stat().st_mtime_ns for p in (tmp_path / "policies").rglob("*.yaml")}
    one = next(r for r in _again(responses, 0) if r.flow.traffic_direction == 1)  # INGRESS
    capture._take(one)
    capture.flush()  # the interval is 0: due at every flush
    changed = [p for p in files if (p.stat().st_mtime_ns, p.read_bytes()) != before[p]]
    assert [p.stem for p in changed] == [one.flow.destination.labels[0].split("=", 1)[1]]
    assert _evidence_flows(evidence) == 1 + sum(
        rule["flow_count"]
        for p, (_, text) in before.items()
        for rule in __import__("json").loads(text)["rules"]
    )
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "policies").rglob("*.yaml")} == policies


def test_the_stream_takes_flows_while_a_flush_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receive path never waits on a flush's writing: only moving entries out holds
    the lock, a few policies at a time. Flows taken meanwhile are written by the next flush."""
    from cpg_io.runs import _live

    capture: Any = _capture(tmp_path, evidence_interval=3600)
    responses = example_responses()
    for response in responses:
        capture._take(response)
    writing, release = threading.Event(), threading.Event()
    real = _live.write_outputs

    def held_write(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(_live, "write_outputs", held_write)
    flusher = threading.Thread(target=capture.flush)
    flusher.start()
    try:
        assert writing.wait(30)
        more = _again(responses, 0)

        def stream() -> None:
            for response in more:
                with capture._lock:  # as the stream takes each flow
                    capture._take(response)

        streamer = threading.Thread(target=stream)
        streamer.start()
        streamer.join(30)
        assert not streamer.is_alive(), "the stream waited for the flush to finish writing"
        assert not release.is_set()
    finally:
        release.set()
        flusher.join(30)
    monkeypatch.setattr(_live, "write_outputs", real)
    capture.flush(final=True)
    reference: Any = _capture(tmp_path / "reference")
    for response in responses:
        reference._take(response)
    reference.flush(final=True)
    once = _evidence_flows(tmp_path / "reference" / "evidence")
    assert once > 0 and _evidence_flows(tmp_path / "evidence") == 2 * once
