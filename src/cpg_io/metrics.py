"""A live session's Prometheus metrics and health endpoints.

``/metrics`` is read from the session when Prometheus scrapes it (a collector over the
counters the session keeps anyway, plus two histograms), so the stream pays nothing per
flow for it. ``/healthz`` says the session's loop is alive: a flush finished within three
flush intervals (a flush that hangs on a disk or a lock makes it fail, and the kubelet
restarts the pod); a flush that finished but could not write is not a stuck loop (the
failure counter and the log say it, and the next flush tries again). ``/readyz`` says the session is receiving: connected to the relay and
not reconnecting."""

from __future__ import annotations

import contextlib
import logging
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cpg_io.errors import IoError

log = logging.getLogger("cpg.metrics")

HEALTHY_FLUSHES = 3
"""/healthz fails when no flush finished for this many flush intervals, plus as many again
(at most half a minute) for a flush that has much to write."""
MAX_GRACE_SECONDS = 30.0
FLUSH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
EVALUATION_BUCKETS = (1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05)


CATALOGUE: dict[str, tuple[str, str]] = {
    "cpg_flows_received": ("counter", "Flows received from Hubble Relay, by verdict."),
    "cpg_relay_lag_seconds": (
        "gauge",
        "Now minus the newest flow's time (how far the session is behind the relay).",
    ),
    "cpg_relay_connected": ("gauge", "1 while connected to the relay and not reconnecting."),
    "cpg_relay_reconnects": ("counter", "Times the stream was lost and resumed."),
    "cpg_lost_events": ("counter", "Events Hubble reported lost (its buffer overflowed)."),
    "cpg_malformed_flows": ("counter", "Messages from the relay that were not usable flows."),
    "cpg_flows_not_kept": (
        "counter",
        "Flows a session counted but did not keep because a memory cap was reached, by cap "
        "(policies, peers, kinds).",
    ),
    "cpg_last_flush_timestamp_seconds": ("gauge", "When the last flush finished (Unix time)."),
    "cpg_build_info": (
        "gauge",
        "1, labelled with the cpg version and the Python it runs on (join it to a series to "
        "see which version reported it).",
    ),
    "cpg_policies_in_folder": (
        "gauge",
        "Policy files in the output folder after the last flush that wrote (every session's).",
    ),
    "cpg_write_failures": (
        "counter",
        "Policy and evidence files a flush could not write, by reason (no_space, permission, "
        "in_the_way, other); each is tried again at the next flush.",
    ),
    "cpg_flush_duration_seconds": (
        "histogram",
        "Time a flush took (merging and writing policies, judging the plan so far).",
    ),
    "cpg_evaluation_duration_seconds": (
        "histogram",
        "Time judging one flow took (shadow and drift; one flow in 16 is timed).",
    ),
    "cpg_policies_written": ("gauge", "Policy files this session created or updated."),
    "cpg_rules_written": ("gauge", "Allow entries in the policies this session wrote."),
    "cpg_policies_waiting": (
        "gauge",
        "Changed policies held back until they went a while without a new rule.",
    ),
    "cpg_shadow_would_break": (
        "gauge",
        "Kinds of traffic that works today and the proposal would drop, at the last flush.",
    ),
    "cpg_shadow_would_break_flows": (
        "gauge",
        "Flows that work today and the proposal would drop, by the proposed policy that would "
        "drop them, at the last flush.",
    ),
    "cpg_drift_findings": ("gauge", "Drift of the applied policies by kind, at the last count."),
}
"""Every metric a session exports, declared once: name, type and help. The deploy/ alerts
and dashboard are checked against it."""


PROCESS_SERIES = frozenset(
    {
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
    }
)
"""The process collector's series (Linux): memory, CPU, start time, file descriptors."""


def exported_names() -> set[str]:
    """The sample names Prometheus stores for the catalogue (``_total`` for counters, the
    three series of a histogram), and the process collector's."""
    names = set(PROCESS_SERIES)
    for name, (kind, _help) in CATALOGUE.items():
        if kind == "counter":
            names.add(name + "_total")
        elif kind == "histogram":
            names |= {name + suffix for suffix in ("_bucket", "_sum", "_count", "_created")}
        else:
            names.add(name)
    return names


def family(
    name: str, labels: Iterable[str] = (), value: float | None = None
) -> CounterMetricFamily | GaugeMetricFamily:
    """The catalogue's counter or gauge ``name`` (with one sample ``value`` when given)."""
    kind, help_text = CATALOGUE[name]
    make = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return make(name, help_text, value=value, labels=list(labels) or None)


class _Families(Collector):
    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()


def _build_info() -> Iterator[Metric]:
    from cpg_io.version import cpg_version

    info = family("cpg_build_info", ["version", "python"])
    info.add_metric([cpg_version(), platform.python_version()], 1)
    yield info


class SessionMetrics:
    """The histograms a session observes and the registry ``/metrics`` renders; the rest of
    the families come from ``families`` (the session's own counters, read at scrape)."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.flush_seconds = Histogram(
            "cpg_flush_duration_seconds",
            CATALOGUE["cpg_flush_duration_seconds"][1],
            buckets=FLUSH_BUCKETS,
            registry=self.registry,
        )
        self.evaluation_seconds = Histogram(
            "cpg_evaluation_duration_seconds",
            CATALOGUE["cpg_evaluation_duration_seconds"][1],
            buckets=EVALUATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Families(families))
        ProcessCollector(registry=self.registry)  # memory and CPU of this process
        self.registry.register(_Families(_build_info))
        self.started = time.monotonic()
        self.last_flush: float | None = None
        self.interval = 5.0
        # every reason exported from the start, at 0: a counter born at its first failure
        # hides that failure from increase(), and the first failing flush would not alert
        self.write_failures: dict[str, int] = dict.fromkeys(WRITE_FAILURE_REASONS, 0)
        self.failing = ""

    def flushed(self, seconds: float) -> None:
        self.flush_seconds.observe(seconds)
        self.last_flush = time.monotonic()

    def wrote(self, failures: Mapping[str, int], problem: str = "") -> None:
        """What a flush that had files to write could not write: counts by reason, and the
        problem ``/healthz`` names (still 200) until a flush writes everything it has to."""
        for reason, count in failures.items():
            self.write_failures[reason] = self.write_failures.get(reason, 0) + count
        self.failing = problem if failures else ""

    def healthy(self, now: float | None = None) -> tuple[bool, str]:
        """Whether the loop is alive: a flush finished lately. A folder that refuses writes
        is no reason to restart cpg (its retry queue would go with it): it is said here,
        counted (``cpg_write_failures_total``: the alert) and logged, never a 503."""
        now = time.monotonic() if now is None else now
        since = self.last_flush if self.last_flush is not None else self.started
        allowed = HEALTHY_FLUSHES * self.interval + min(
            MAX_GRACE_SECONDS, HEALTHY_FLUSHES * self.interval
        )
        quiet = now - since
        if quiet > allowed:
            return False, f"no flush finished for {quiet:.0f} s (allowed: {allowed:.0f} s)"
        if self.failing:
            return True, f"ok; the last flush could not write everything: {self.failing}"
        return True, "ok"

    def render(self) -> bytes:
        return generate_latest(self.registry)


WRITE_FAILURE_REASONS = ("no_space", "permission", "in_the_way", "other")
"""The reasons of ``cpg_write_failures_total`` (see :func:`failure_reason`)."""


def failure_reason(problem: str) -> str:
    """The reason label of a write that failed, from its message: a full volume, no
    permission, something else at the path (a folder, a link out), or other."""
    text = problem.lower()
    if "no space left" in text or "disk quota" in text:
        return "no_space"
    if "permission denied" in text or "read-only file system" in text:
        return "permission"
    if any(
        word in text
        for word in (
            "is a folder",
            "is a directory",
            "not a directory",
            "symbolic link",
            "stands where",
        )
    ):
        return "in_the_way"
    return "other"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every address of both families) or ``[IPv6]:PORT`` as a
    bind address (host "" for every address); IoError names what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise IoError(f"metrics address {text!r}: give HOST:PORT, e.g. 0.0.0.0:9090 or :9090")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise IoError(
            f"metrics address {text!r}: write an IPv6 address in brackets, e.g. [::1]:9090"
        )
    return host, int(port)


class _DualStackServer(ThreadingHTTPServer):
    """Every address of both families: an IPv6 socket that takes IPv4 too (as ``:PORT``
    means to Go programs and kubelet alike), for IPv4-only, IPv6-only and dual-stack pods."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _listen(host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A server on ``host`` (every address when "" or ``::``; IPv4 only when ``0.0.0.0``),
    in the family the host is written or resolves in."""
    if host in ("", "::"):
        if socket.has_ipv6:
            try:
                return _DualStackServer(("::", port), handler)
            except OSError:
                if host == "::":
                    raise
        return ThreadingHTTPServer(("0.0.0.0", port), handler)  # no IPv6 on this node
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = _IPv6Server if family == socket.AF_INET6 else ThreadingHTTPServer
    return server_class((host, port), handler)


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` over HTTP in a daemon thread."""

    def __init__(self, address: str, metrics: SessionMetrics, ready: Callable[[], bool]) -> None:
        host, port = parse_address(address)
        handler = _handler(metrics, ready)
        try:
            self._server = _listen(host, port, handler)
        except socket.gaierror as exc:
            raise IoError(
                f"metrics address {address}: cannot resolve {host} ({exc.strerror}); give an "
                "address of this pod, :PORT for every address, or [::1]:PORT"
            ) from None
        except OSError as exc:
            raise IoError(
                f"metrics address {address}: cannot listen there ({exc.strerror})"
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="cpg-metrics", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def __enter__(self) -> MetricsServer:
        self._thread.start()
        log.info("metrics on %s/metrics (health: /healthz, /readyz)", self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(metrics: SessionMetrics, ready: Callable[[], bool]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok, why = metrics.healthy()
                self._send(200 if ok else 503, (why + "\n").encode())
            elif path == "/readyz":
                ok = ready()
                self._send(200 if ok else 503, b"receiving\n" if ok else b"not receiving\n")
            else:
                self._send(404, b"not found: /metrics, /healthz, /readyz\n")

        def _send(self, code: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a scrape every few seconds is not news

    return Handler
