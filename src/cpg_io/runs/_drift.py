"""``cpg drift``: the applied policies against what the cluster does now, from a capture or a
live stream. Read-only: it reads the folder, its evidence and the flows, and writes nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import attrs
from prometheus_client.core import Metric

from cpg_core import Message, Setting
from cpg_core.identities import IdentityBook
from cpg_core.reports import DriftView
from cpg_core.shadow import DriftJudge, DriftRequest
from cpg_core.sharing import evidence_by_policy
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.identities import check_identities, identity_refresh
from cpg_io.metrics import family
from cpg_io.policy_files import load_policies
from cpg_io.relay_receiver import StreamSettings
from cpg_io.runs._access import RelayAccess, open_relay
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.runs._relay import RelayReader, every_verdict_stream
from cpg_io.runs._session import rfc3339, utc_now
from cpg_io.sources import CaptureFlows


@attrs.frozen
class DriftRun:
    view: DriftView
    problems: list[str]
    stream_error: str = ""


def drift_judge(
    request: DriftRequest, evidence_dir: Path | None = None, not_after: str = ""
) -> tuple[DriftJudge, list[str]]:
    """The applied policies (``-d``) and their evidence, read once; flows stamped after
    ``not_after`` (RFC 3339) are set aside."""
    check = request.check
    folder = Path(check.policies or "policies")
    policies = load_policies(folder) if folder.exists() or check.policies else []
    problems: list[str] = []
    if not policies:
        problems.append(f"{folder}: no CiliumNetworkPolicy in it; nothing can drift")
    store = EvidenceStore(evidence_dir or default_evidence_root(folder), folder)
    evidence = evidence_by_policy(
        ((namespace, doc) for namespace, _workload, doc in store.read_all(problems.append, None)),
        policies,
    )
    agent, _notes = check.resolve_agent()
    judge = DriftJudge(
        policies,
        evidence,
        options=check.decide_options(agent),
        agent=agent,
        max_kinds=request.live.live.max_kinds if request.live is not None else 0,
        not_after=not_after,
    )
    return judge, problems


CLOCK_SKEW = timedelta(minutes=5)
"""How far after the check a capture's flow may be stamped (clocks that disagree a little)
before it is set aside as from the future."""


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


DRIFT_FLUSH = 30.0
"""Seconds between counts of a live drift's findings (what ``/metrics`` shows; the loop's
heartbeat ``/healthz`` reads)."""


class _DriftStream(RelayReader):
    """Every verdict of a live stream, each judged as it arrives."""

    def __init__(
        self, stream: StreamSettings, judge: DriftJudge, identities: IdentityBook | None
    ) -> None:
        super().__init__(stream)
        self.judge = judge
        self.identities = identities
        self.findings: dict[str, int] = {}
        """Drift findings by kind as of the last flush (``/metrics``)."""

    def _take_flow(self, f: object, response: object) -> None:
        flow = self._converter.flow(f, response)
        if self.identities is not None:
            flow = self.identities.resolve(flow)[0]
        self._judge(self.judge.add, flow)

    def metric_families(self) -> Iterator[Metric]:
        yield from super().metric_families()
        findings = family("cpg_drift_findings", ["kind"])
        for kind, count in sorted(self.findings.items()):
            findings.add_metric([kind], count)
        yield findings

    def _use_identities(self, book: IdentityBook | None) -> None:
        self.identities = book

    def flows_not_kept(self) -> dict[str, int]:
        return {"kinds": self.judge.kept.unjudged}

    def cap_warning(self, cap: str) -> str:
        return Message(
            Setting("max_kinds"),
            f" {self.judge.kept.cap} reached: drops of further new kinds of traffic are "
            "counted, not judged (raise ",
            Setting("max_kinds"),
            " or watch fewer namespaces at a time)",
        )


class DriftSession:
    """The drift of the applied policies over a capture or a live stream (``request.live``):
    :meth:`run` judges until the capture is read, or the stream stops (:attr:`stop`,
    ``--duration``, ``--until``), and gives the drift."""

    def __init__(
        self,
        request: DriftRequest,
        judge: DriftJudge,
        problems: list[str],
        *,
        stream: _DriftStream | None = None,
        duration: float | None = None,
        deadline: float | None = None,
        now: str | None = None,
        cancel: threading.Event | None = None,
        identities: IdentityBook | None = None,
    ) -> None:
        self.request = request
        self.identities = identities
        self.judge = judge
        self.problems = problems
        self._stream = stream
        self._duration = duration
        self._deadline = deadline
        self._now = now
        self._cancel = cancel or threading.Event()
        self.stop = stream.stop if stream is not None else asyncio.Event()

    @property
    def source(self) -> str:
        if self._stream is not None:
            return f"Hubble Relay {self._stream.stream.server}"
        return ", ".join(self.request.check.inputs)

    def read_capture(self) -> DriftRun:
        """Judge the capture files (no stream): in the calling thread, stopped by ``cancel``."""
        capture = CaptureFlows(self.request.check.inputs, self._cancel, identities=self.identities)
        for flow in capture:
            self.judge.add(flow)
        capture.check_readable()
        return self.result()

    async def run(self) -> DriftRun:
        stream = self._stream
        if stream is not None:

            def count_findings() -> None:  # every half minute: what /metrics shows
                drift = self.result().view.drift
                stream.findings = {
                    "needs_rule": len(drift.needs_rule),
                    "unseen_pods": len(drift.unseen_pods),
                    "stale_rule": len(drift.stale_rules),
                }

            await stream._follow(
                count_findings, DRIFT_FLUSH, self._duration, lambda: False, self._deadline
            )
            return self.result()
        reading = asyncio.ensure_future(asyncio.to_thread(self.read_capture))
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({reading, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                self._cancel.set()  # the read stops at its next block (Cancelled)
            return await reading
        finally:
            stopped.cancel()

    def result(self) -> DriftRun:
        stream = self._stream
        # A capture is judged as of its newest flow (a capture of last month, read today,
        # has no rule idle for a month); a live stream as of now.
        now = self._now or (stream is None and self.judge.newest) or rfc3339(utc_now())
        if stream is not None:
            with stream._lock:  # a copy, judged while the stream goes on
                judge = self.judge.snapshot()
            drift = judge.drift(now, self.request.stale_after_days)
        else:
            drift = self.judge.drift(now, self.request.stale_after_days)
        view = DriftView(drift=drift, policies=str(self.request.check.policies), source=self.source)
        error = stream.error if stream is not None else ""
        problems = list(self.problems)
        if drift.future_flows:
            problems.append(
                f"{drift.future_flows:,} flows stamped after this check (the newest "
                f"{drift.future_newest}) were set aside: a clock that is wrong, or a capture "
                "that is not what it says"
            )
        return DriftRun(view=view, problems=problems, stream_error=error)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()


@reads_in_bulk
def drift(
    request: DriftRequest,
    access: RelayAccess | None = None,
    *,
    evidence_dir: Path | None = None,
    now: str | None = None,
    cancel: threading.Event | None = None,
) -> DriftSession:
    """A drift session (``cpg drift``): the applied policies (``-d``) and their evidence read
    once; with ``request.live``, the way to the relay set up (``access``). ``now`` (RFC 3339)
    is when rules are judged stale (default: when the drift is judged). RequestError for a
    window that is over, RelaySetupError for a failed set-up. The caller runs it and closes
    it."""
    # a capture is judged as of its newest flow, never of a time after the check's
    latest = (_moment(now) if now else utc_now()) + CLOCK_SKEW
    not_after = rfc3339(latest) if request.live is None else ""
    judge, problems = drift_judge(request, evidence_dir, not_after)
    reach = access or RelayAccess()
    book, problem = check_identities(
        request.check, kubeconfig=reach.kubeconfig, context=reach.context
    )
    problems += [problem] if problem else []
    live = request.live
    if live is None:
        return DriftSession(request, judge, problems, now=now, cancel=cancel, identities=book)
    started = now or rfc3339(utc_now())
    since, _until, _stop_after = live.live_window(started)
    duration, deadline = live.live_stop(started)
    relay = open_relay(live, access or RelayAccess())
    stream = every_verdict_stream(
        live,
        relay.server,
        since=since,
        tls=(access or RelayAccess()).tls,
        include_audit=request.check.include_audit,
    )
    reader = _DriftStream(stream, judge, book)
    reader.relay = relay
    reader.metrics_addr = live.live.metrics_addr
    reader.identity_refresh = identity_refresh(
        request.check.identity_sources,
        kubeconfig=reach.kubeconfig,
        context=reach.context,
        temp_dir=relay.temp_dir,
    )
    return DriftSession(
        request, judge, problems, stream=reader, duration=duration, deadline=deadline, now=now
    )
