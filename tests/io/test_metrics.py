"""``--metrics-addr``: a running ``cpg generate`` scraped as Prometheus would, its values
moving as flows arrive and the stream is resumed, and ``/healthz`` failing while the loop is
stalled (a flush waiting on the output folder's lock) and passing again once it moves."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import CPG, EXAMPLE, cpg, policies, wait_for
from fake_relay import example_responses, fake_relay


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def _samples(base: str) -> dict[str, float]:
    """Every sample of /metrics by name and labels (``name{k="v"}``)."""
    status, text = _get(base + "/metrics")
    if status != 200:
        return {}
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return out


def _flows(samples: dict[str, float]) -> float:
    return sum(v for k, v in samples.items() if k.startswith("cpg_flows_received_total"))


def test_metrics_move_with_the_stream_and_health_follows_the_loop(tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "policies"
    out.mkdir()
    with fake_relay(example_responses(), break_after=30) as (relay, address):
        relay.pause_after = 10
        command = [CPG, "generate", "--server", address, "-d", str(out), "--no-evidence", "-q"]
        proc = subprocess.Popen(
            [*command, "--flush-interval", "0.3s", "--metrics-addr", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert wait_for(lambda: _flows(_samples(base)) >= 10, 30), _get(base + "/metrics")
            first = _samples(base)
            assert first['cpg_flows_received_total{verdict="DROPPED"}'] >= 1
            assert first["cpg_relay_connected"] == 1
            assert first["cpg_relay_reconnects_total"] == 0
            assert wait_for(lambda: _samples(base).get("cpg_policies_written", 0) > 0, 30)
            assert _get(base + "/readyz")[0] == 200
            assert _get(base + "/healthz")[0] == 200
            # The output folder's lock held: the next flush that has something to write
            # waits for it, and the loop stalls.
            fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                relay.resume.set()  # the rest of the capture, with one broken stream
                assert wait_for(lambda: _get(base + "/healthz")[0] == 503, 30)
                assert "no flush finished" in _get(base + "/healthz")[1]
                later = _samples(base)
                assert _flows(later) > _flows(first)
                assert wait_for(lambda: _samples(base)["cpg_relay_reconnects_total"] == 1, 30)
            finally:
                os.close(fd)  # the flush goes on
            assert wait_for(lambda: _get(base + "/healthz")[0] == 200, 30)
            done = _samples(base)
            assert done["cpg_lost_events_total"] == 3  # the example capture reports three
            assert done["cpg_flush_duration_seconds_count"] >= 2
            assert done["cpg_rules_written"] > 0
            # files only grow: what the last flush counted is there, and at least one
            assert 1 <= done["cpg_policies_in_folder"] <= len(list(out.rglob("*.yaml")))
            assert _get(base + "/nothing")[0] == 404
            # every series is in the catalogue the deploy/ alerts and dashboard are held to
            from cpg_io.metrics import exported_names

            names = {key.split("{")[0] for key in done}
            assert names <= exported_names(), names - exported_names()
            assert "cpg_relay_lag_seconds" in names
        finally:
            proc.send_signal(signal.SIGTERM)
            _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert _get(base + "/metrics")[0] == 0  # the server ends with the session


def test_a_bad_metrics_address_is_a_usage_error(tmp_path: Path) -> None:
    from conftest import cpg

    ran = cpg("generate", "--server", "127.0.0.1:1", "-d", str(tmp_path), "--metrics-addr", "9090")
    assert ran.returncode == 2
    assert "--metrics-addr" in ran.stderr and "HOST:PORT" in ran.stderr


def test_ready_again_after_every_relay_restart(tmp_path: Path) -> None:
    """A relay restart breaks the stream; once cpg is connected again, ``/readyz`` and
    ``cpg_relay_connected`` say so, every time (they stayed 503 and 0 after the first)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "policies"
    with fake_relay(example_responses()) as (relay, address):
        command = [CPG, "generate", "--server", address, "-d", str(out), "--no-evidence", "-q"]
        proc = subprocess.Popen(
            [*command, "--flush-interval", "0.2s", "--metrics-addr", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert wait_for(lambda: _get(base + "/readyz")[0] == 200, 30)
            assert wait_for(relay.done.is_set, 30)
            for restart in (1, 2):
                relay.break_now.set()
                assert wait_for(
                    lambda n=restart: _samples(base).get("cpg_relay_reconnects_total") == n, 30
                ), _get(base + "/metrics")
                assert wait_for(lambda: _samples(base).get("cpg_relay_connected") == 1, 30)
                assert wait_for(lambda: _get(base + "/readyz")[0] == 200, 30), _get(
                    base + "/readyz"
                )
                assert len(relay.requests) == restart + 1
        finally:
            proc.send_signal(signal.SIGTERM)
            _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr.decode()[-2000:]


def _answers(url: str) -> bool:
    return _get(url + "/healthz")[0] in (200, 503)


def _server(address: str) -> Any:
    from cpg_io.metrics import MetricsServer, SessionMetrics

    return MetricsServer(address, SessionMetrics(lambda: ()), lambda: True)


def test_the_metrics_address_takes_both_families() -> None:
    """``:PORT`` and ``[::]:PORT`` listen on IPv4 and IPv6 (an IPv6-only or dual-stack pod's
    probes reach it), ``[::1]:PORT`` on IPv6 loopback only, ``0.0.0.0:PORT`` on IPv4 only."""
    for written, v4, v6 in (
        (":0", True, True),
        ("[::]:0", True, True),
        ("[::1]:0", False, True),
        ("0.0.0.0:0", True, False),
        ("127.0.0.1:0", True, False),
    ):
        with _server(written) as server:
            port = server.address[1]
            assert _answers(f"http://127.0.0.1:{port}") is v4, written
            assert _answers(f"http://[::1]:{port}") is v6, written
            assert server.url.endswith(f":{port}")


def test_an_ipv6_address_without_brackets_is_refused_with_the_fix() -> None:
    from cpg_core import LiveRequest, RequestError
    from cpg_io.errors import IoError

    with pytest.raises(IoError, match=r"in brackets, e.g. \[::1\]:9090"):
        _server("::1:9090")
    with pytest.raises(RequestError, match=r"in brackets"):
        LiveRequest.build(metrics_addr="::1:9090")
    assert LiveRequest.build(metrics_addr="[::]:9090").metrics_addr == "[::]:9090"


def test_a_flush_that_cannot_write_says_so_at_once(tmp_path: Path) -> None:
    """A folder where a policy file should go: every flush that has to write it fails. The
    session says so as it happens (an ERROR line naming the file, the failure counter by
    reason, ``/healthz`` naming the problem but 200: a refusing folder is no stuck loop, and
    a restart would throw the retry queue away), and recovers once the path is free."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "policies"
    blocked = out / "shop" / "cart.yaml"
    blocked.mkdir(parents=True)
    with fake_relay(example_responses()) as (_relay, address):
        command = [CPG, "generate", "--server", address, "-d", str(out), "--no-evidence"]
        proc = subprocess.Popen(
            [*command, "--flush-interval", "0.2s", "--metrics-addr", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            failed = 'cpg_write_failures_total{reason="in_the_way"}'
            assert wait_for(lambda: _samples(base).get(failed, 0) >= 1, 30), _get(base + "/metrics")
            health = _get(base + "/healthz")
            assert health[0] == 200 and "cart.yaml" in health[1], health
            assert (out / "shop" / "frontend.yaml").is_file(), "the other files are written"
            blocked.rmdir()  # the path is free again: the next flush writes it
            assert wait_for(lambda: _get(base + "/healthz") == (200, "ok\n"), 30)
            assert (out / "shop" / "cart.yaml").is_file()
        finally:
            proc.send_signal(signal.SIGTERM)
            _stdout, stderr = proc.communicate(timeout=60)
    said = [line for line in stderr.decode().splitlines() if "could not write" in line]
    assert said and "cart.yaml" in said[0], stderr.decode()[-2000:]
    # nothing the failed flushes held was lost: the folder is what a replay writes
    replayed = tmp_path / "replayed"
    assert cpg("replay", str(EXAMPLE), "-d", str(replayed), "--no-evidence").returncode == 0
    assert policies(out) == policies(replayed)


def test_the_metrics_say_the_version_and_the_process() -> None:
    """``cpg_build_info`` names the version that reports; the process collector gives the
    memory and CPU a team watches (and sizes the pod's limit by)."""
    import platform

    from cpg_io.metrics import SessionMetrics, exported_names
    from cpg_io.version import cpg_version

    text = SessionMetrics(lambda: ()).render().decode()
    samples = {
        sample.name: sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    info = samples["cpg_build_info"]
    assert info.value == 1
    assert info.labels == {"version": cpg_version(), "python": platform.python_version()}
    assert samples["process_resident_memory_bytes"].value > 10_000_000
    assert samples["process_cpu_seconds_total"].value > 0
    assert set(samples) <= exported_names()
