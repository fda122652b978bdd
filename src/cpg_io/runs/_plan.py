"""Reading what ``cpg plan`` judges: the capture (every verdict), the proposed and current
policies, and the proposal's evidence. The plan itself is pure (``cpg_core.plan``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CheckRequest, CurrentSource, DecideOptions, Plan, PolicyEvidence, plan
from cpg_core.reports import PlanView
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.kube import api_client, cluster_policies, list_cilium_policies
from cpg_io.policy_files import load_policies
from cpg_io.sources import CaptureFlows, ReadStats


@attrs.frozen
class PlannedCapture:
    stats: ReadStats
    plan: Plan
    problems: list[str] = attrs.Factory(list)
    """Evidence files that could not be read (their rules get no confidence line)."""


def plan_capture(
    inputs: Sequence[str],
    proposal: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]] | None,
    *,
    current_source: CurrentSource,
    options: DecideOptions,
    evidence: EvidenceStore | None = None,
    default_local_cluster: bool = True,
    cancel: threading.Event | None = None,
) -> PlannedCapture:
    """The plan of ``proposal`` over a capture; UnreadableInput when it holds no record;
    Cancelled soon after ``cancel`` is set."""
    capture = CaptureFlows(inputs, cancel)
    problems: list[str] = []
    found: dict[str, PolicyEvidence] = {}
    if evidence is not None:
        for namespace, _workload, doc in evidence.read_all(problems.append, cancel):
            found[f"{namespace}/{doc.policy.name}"] = doc
    result = plan(
        capture,
        proposal,
        current,
        current_source=current_source,
        options=options,
        evidence=found,
        default_local_cluster=default_local_cluster,
    )
    capture.check_readable()
    return PlannedCapture(stats=capture.stats, plan=result, problems=problems)


@attrs.frozen
class PlanRun:
    """A plan with where its inputs came from (what the reports render), the capture's
    counts and the evidence files that could not be read."""

    view: PlanView
    stats: ReadStats
    problems: list[str]


def plan_run(
    request: CheckRequest,
    *,
    evidence: EvidenceStore | None = None,
    evidence_dir: Path | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
    kube_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> PlanRun:
    """The plan use case: the proposed policies (``request.policies``) against those applied
    today (a folder, the cluster, or inferred from the flows), judged on the capture. The
    proposal's evidence is read from ``evidence`` or the folder's own evidence root. Inline
    kubeconfig credentials go to ``kube_dir`` when given (a folder the caller owns), else to
    a private folder removed at once."""
    folder = Path(request.policies or "policies")
    proposal = load_policies(folder) if folder.exists() or request.policies else []
    current: list[dict[str, Any]] | None = None
    source: CurrentSource = "flows"
    problems: list[str] = []
    if request.current is not None:
        current = load_policies(Path(request.current), setting="current")
        origin = f"--current {request.current} ({len(current)})"
        source = "current"
        if not current:
            problems.append(
                f"{request.current}: no CiliumNetworkPolicy in it; the plan takes nothing as "
                "applied today (is this the folder or file you meant?)"
            )
    elif request.cluster:
        if kube_dir is not None:
            current = list_cilium_policies(api_client(kubeconfig, context, temp_dir=kube_dir))
        else:
            current = cluster_policies(kubeconfig, context)
        origin, source = f"the cluster ({len(current)})", "cluster"
    else:
        origin = "inferred from the flows (no --current or --cluster)"
    store = evidence or EvidenceStore(evidence_dir or default_evidence_root(folder), folder)
    planned = plan_capture(
        request.inputs,
        proposal,
        current,
        current_source=source,
        options=request.decide_options(),
        evidence=store,
        default_local_cluster=request.default_local_cluster,
        cancel=cancel,
    )
    view = PlanView(plan=planned.plan, proposal=str(folder), origin=origin, policies=len(proposal))
    return PlanRun(view=view, stats=planned.stats, problems=problems + planned.problems)
