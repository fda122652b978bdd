"""``cpg drift``: the applied policies against what the cluster does now, from a capture or a
live stream. Read-only: it reads the folder, its evidence and the flows, and writes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import attrs

from cpg_core import PolicyEvidence
from cpg_core.reports import DriftView
from cpg_core.shadow import DriftJudge, DriftRequest
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.hubble import TLSSettings
from cpg_io.kube import RelayConnection
from cpg_io.policy_files import load_policies
from cpg_io.relay_receiver import StreamSettings
from cpg_io.runs._relay import RelayReader, every_verdict_stream
from cpg_io.sources import CaptureFlows


@attrs.frozen
class DriftRun:
    view: DriftView
    problems: list[str]
    stream_error: str = ""


def drift_judge(
    request: DriftRequest, evidence_dir: Path | None = None
) -> tuple[DriftJudge, list[str]]:
    """The applied policies (``-d``) and their evidence, read once."""
    check = request.check
    folder = Path(check.policies or "policies")
    policies = load_policies(folder) if folder.exists() or check.policies else []
    problems: list[str] = []
    if not policies:
        problems.append(f"{folder}: no CiliumNetworkPolicy in it; nothing can drift")
    store = EvidenceStore(evidence_dir or default_evidence_root(folder), folder)
    evidence: dict[str, PolicyEvidence] = {}
    for namespace, _workload, doc in store.read_all(problems.append, None):
        evidence[f"{namespace}/{doc.policy.name}"] = doc
    judge = DriftJudge(
        policies,
        evidence,
        options=check.decide_options(),
        default_local_cluster=check.default_local_cluster is not False,
        allow_localhost=check.allow_localhost,
    )
    return judge, problems


def drift_run(
    request: DriftRequest,
    *,
    now: str,
    evidence_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> DriftRun:
    """The drift of the applied policies over the capture files of ``request.check.inputs``;
    stale rules are judged against ``now``."""
    judge, problems = drift_judge(request, evidence_dir)
    capture = CaptureFlows(request.check.inputs, cancel)
    for flow in capture:
        judge.add(flow)
    capture.check_readable()
    drift = judge.drift(now, request.stale_after_days)
    source = ", ".join(request.check.inputs)
    view = DriftView(drift=drift, policies=str(request.check.policies), source=source)
    return DriftRun(view=view, problems=problems)


class DriftCapture(RelayReader):
    """The drift over a live stream: every verdict, judged when the session stops (``stop``,
    ``--duration``, ``--until``)."""

    def __init__(
        self,
        request: DriftRequest,
        stream: StreamSettings,
        judge: DriftJudge,
        *,
        duration: float | None,
        problems: list[str],
    ) -> None:
        super().__init__(stream)
        self.request = request
        self.judge = judge
        self.duration = duration
        self.problems = problems

    def _take_flow(self, f: object, response: object) -> None:
        self.judge.add(self._converter.flow(f, response))

    async def run(self) -> None:
        await self._follow(lambda: None, 3600.0, self.duration, lambda: False)

    def result(self, now: str) -> DriftRun:
        with self._lock:
            drift = self.judge.drift(now, self.request.stale_after_days)
        view = DriftView(
            drift=drift,
            policies=str(self.request.check.policies),
            source=f"Hubble Relay {self.stream.server}",
        )
        return DriftRun(view=view, problems=self.problems, stream_error=self.error)


def drift_capture(
    request: DriftRequest,
    relay: RelayConnection,
    *,
    now: str,
    tls: TLSSettings | None = None,
    evidence_dir: Path | None = None,
) -> DriftCapture:
    """A live drift session (``request.live`` says where and how long)."""
    assert request.live is not None
    live = request.live
    since, _until, stop_after = live.live_window(now)
    judge, problems = drift_judge(request, evidence_dir)
    stream = every_verdict_stream(
        live, relay.server, since=since, tls=tls, include_audit=request.check.include_audit
    )
    return DriftCapture(request, stream, judge, duration=stop_after, problems=problems)
