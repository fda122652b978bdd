"""Live sessions under a flood: a relay that sends something new in every flow (a new
workload, a new peer) cannot grow a session without bound, stall its flushes, or keep it
running past ``--duration`` or a SIGTERM. The caps are counted and said (a warning, the
summary, ``/metrics``), and ``/healthz`` answers all along."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
from prometheus_client.parser import text_string_to_metric_families

from conftest import CPG, wait_for
from fake_relay import fake_relay, flood_responses

FLUSH = 1.0
"""Seconds between flushes in these sessions (the SIGTERM bound is one of them)."""
MAX_RSS_KIB = 600 * 1024
"""A session whose caps hold stays well under this; an uncapped one under the same flood
grows past it within a minute."""


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


def _not_kept(base: str) -> dict[str, float]:
    status, text = _get(base + "/metrics")
    if status != 200:
        return {}
    return {
        sample.labels["cap"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cpg_flows_not_kept_total"
    }


@attrs.define
class _Health:
    """``/healthz`` asked every 50 ms from the session's first answer until it is stopped."""

    base: str
    answers: list[tuple[float, int]] = attrs.Factory(list)
    stop: threading.Event = attrs.Factory(threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            status, _ = _get(self.base + "/healthz")
            if status or self.answers:
                self.answers.append((time.monotonic(), status))
            self.stop.wait(0.05)

    @property
    def first(self) -> float:
        return self.answers[0][0]

    def failures_before(self, moment: float) -> list[tuple[float, int]]:
        return [(t, s) for t, s in self.answers if t < moment and s != 200]


@attrs.frozen
class _Ended:
    code: int
    wall_end: float
    max_rss_kib: int
    stdout: str
    stderr: str


def _reap(proc: subprocess.Popen[str], ended: list[_Ended]) -> None:
    """Read the session's output and wait for it, keeping its own peak memory (wait4: the
    process and the receiving process it waited for, nothing else the tests started)."""
    assert proc.stdout is not None and proc.stderr is not None
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    err = proc.stderr.read()
    reader.join()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    ended.append(_Ended(proc.returncode, time.monotonic(), usage.ru_maxrss, out[0], err))


@contextmanager
def _session(
    kind: str, out: Path, *extra: str, command: str = "generate"
) -> Iterator[tuple[subprocess.Popen[str], _Health, list[_Ended]]]:
    port = _free_port()
    health = _Health(f"http://127.0.0.1:{port}")
    ended: list[_Ended] = []
    flags = {
        "generate": ["--no-evidence", "--flush-interval", f"{FLUSH:g}s"],
        "shadow": ["--flush-interval", f"{FLUSH:g}s"],
        "drift": [],
    }[command]
    with fake_relay(flood_responses(kind)) as (_relay, address):  # type: ignore[arg-type]
        proc = subprocess.Popen(
            [
                CPG,
                command,
                "--server",
                address,
                "-d",
                str(out),
                *flags,
                "-o",
                "json",
                "--metrics-addr",
                f"127.0.0.1:{port}",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        asker = threading.Thread(target=health.run, daemon=True)
        asker.start()
        reaper = threading.Thread(target=_reap, args=(proc, ended), daemon=True)
        reaper.start()
        try:
            yield proc, health, ended
            reaper.join(120)
        finally:
            if not ended:
                proc.kill()
                reaper.join()
            health.stop.set()
            asker.join()


def test_a_flood_of_new_workloads_stops_at_its_duration_with_memory_capped(
    tmp_path: Path,
) -> None:
    duration = 6.0
    caps = ["--max-policies", "300", "--max-rules", "5000"]
    with _session("workloads", tmp_path / "out", "--duration", f"{duration:g}s", *caps) as (
        proc,
        health,
        ended,
    ):
        base = health.base
        assert wait_for(lambda: health.answers, 30), proc.stderr
        # A session that keeps up counts the flows past the cap while the flood goes on.
        assert wait_for(lambda: _not_kept(base).get("policies", 0) > 0, 30)
    end = ended[0]
    assert end.code == 0, end.stderr
    # The timer starts when the relay answers, after /healthz first answers.
    assert end.wall_end - health.first <= duration + 5.0
    assert not health.failures_before(health.first + duration), health.answers
    assert end.max_rss_kib < MAX_RSS_KIB
    report = json.loads(end.stdout)
    assert report["overflow"]["policies"]["cap"] == 300
    assert report["overflow"]["policies"]["flows"] > 0
    written = list((tmp_path / "out").rglob("*.yaml"))
    assert written  # the workloads kept got their rules
    assert "--max-policies 300 reached" in end.stderr
    assert end.stderr.count("--max-policies 300 reached") == 1  # said once


def test_a_flood_of_new_peers_is_capped_per_policy_and_sigterm_ends_it_within_a_flush(
    tmp_path: Path,
) -> None:
    with _session("peers", tmp_path / "out", "--max-peers", "400") as (proc, health, ended):
        base = health.base
        assert wait_for(lambda: health.answers, 30), proc.stderr
        assert wait_for(lambda: _not_kept(base).get("peers", 0) > 1000, 30)
        asked = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
    end = ended[0]
    assert end.code == 0, end.stderr
    assert end.wall_end - asked <= FLUSH + 1.0
    assert not health.failures_before(asked), health.answers
    report = json.loads(end.stdout)
    assert report["overflow"]["peers"]["cap"] == 400
    assert report["overflow"]["peers"]["flows"] > 1000
    policy = (tmp_path / "out" / "ns-0" / "w0.yaml").read_text()
    assert policy.count("    - 52.") == 400  # every peer kept has its rule, and no more
    assert "--max-peers 400 reached by a policy" in end.stderr


def test_a_flood_past_the_session_cap_of_rules_is_counted_as_rules(tmp_path: Path) -> None:
    with _session(
        "peers", tmp_path / "out", "--max-peers", "0", "--max-rules", "250", "--duration", "4s"
    ) as (proc, health, ended):
        assert wait_for(lambda: _not_kept(health.base).get("rules", 0) > 0, 30), proc.stderr
    end = ended[0]
    report = json.loads(end.stdout)
    assert set(report["overflow"]) == {"rules"}
    assert report["overflow"]["rules"]["cap"] == 250
    policy = (tmp_path / "out" / "ns-0" / "w0.yaml").read_text()
    assert policy.count("    - 52.") == 250


_PROPOSAL = """\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: cpg-api
  namespace: shop
  labels:
    app.kubernetes.io/managed-by: cpg
spec:
  endpointSelector:
    matchLabels:
      app: api
  ingress:
  - fromEntities:
    - cluster
    toPorts:
    - ports:
      - port: "8080"
        protocol: TCP
"""


def _proposal(tmp_path: Path) -> Path:
    folder = tmp_path / "proposal" / "shop"
    folder.mkdir(parents=True)
    (folder / "api.yaml").write_text(_PROPOSAL)
    return folder.parent


def test_a_shadow_under_a_flood_of_new_kinds_stops_at_its_duration_and_cannot_say_ok(
    tmp_path: Path,
) -> None:
    duration = 6.0
    with _session(
        "verdicts",
        _proposal(tmp_path),
        "--duration",
        f"{duration:g}s",
        "--max-kinds",
        "3000",
        command="shadow",
    ) as (proc, health, ended):
        assert wait_for(lambda: health.answers, 30), proc.stderr
        assert wait_for(lambda: _not_kept(health.base).get("kinds", 0) > 0, 30)
    end = ended[0]
    assert end.wall_end - health.first <= duration + 5.0
    assert not health.failures_before(health.first + duration), health.answers
    assert end.max_rss_kib < MAX_RSS_KIB
    plan = json.loads(end.stdout)
    assert plan["unjudged_flows"] > 0
    # Flows went unjudged: the verdict cannot be "nothing breaks", and the exit says so.
    assert plan["verdict"] == "cannot_judge"
    assert end.code == 4, end.stderr
    assert "--max-kinds 3000 reached" in end.stderr


def test_a_live_drift_under_a_flood_of_new_kinds_stops_at_its_duration(tmp_path: Path) -> None:
    duration = 5.0
    with _session(
        "verdicts",
        _proposal(tmp_path),
        "--duration",
        f"{duration:g}s",
        "--max-kinds",
        "2000",
        command="drift",
    ) as (proc, health, ended):
        assert wait_for(lambda: health.answers, 30), proc.stderr
        assert wait_for(lambda: _not_kept(health.base).get("kinds", 0) > 0, 30)
    end = ended[0]
    assert end.wall_end - health.first <= duration + 5.0
    assert not health.failures_before(health.first + duration), health.answers
    report = json.loads(end.stdout)
    assert report["max_kinds"] == 2000
    assert report["unjudged_flows"] > 0
    assert "--max-kinds 2000 reached" in end.stderr
