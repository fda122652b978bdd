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

from prometheus_client.parser import text_string_to_metric_families

from conftest import CPG, wait_for
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
