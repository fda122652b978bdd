"""``cpg why`` and ``cpg trace``: read the policies to judge against (a folder, the applied
ones, the cluster) and, for why, the capture; the answers are cpg_core's (§D26)."""

from __future__ import annotations

import difflib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CheckRequest, Flow, PolicyEvidence, Setting, Verdict
from cpg_core.cilium import AgentSettings, PolicySet, release_notes
from cpg_core.declarations import Declarations, declaring
from cpg_core.identities import IdentityBook
from cpg_core.reports import WhyView
from cpg_core.text import shown
from cpg_core.why import (
    FlowFilter,
    Why,
    check_key,
    evidence_behind,
    explain_denial,
    merged_answers,
    note_pod,
    why_names,
    with_known_pod,
)
from cpg_io.declarations import read_declarations
from cpg_io.errors import Cancelled, IoError
from cpg_io.evidence_store import EvidenceStore, lenient_reader
from cpg_io.identities import check_identities
from cpg_io.kube import cluster_state
from cpg_io.policy_files import load_policies
from cpg_io.progress import ReviewTally
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.sources import CaptureFlows, ReadStats

_DENIED = (int(Verdict.DROPPED), int(Verdict.AUDIT))


@attrs.frozen
class WhyRun:
    view: WhyView
    stats: ReadStats | None
    problems: list[str]


@attrs.frozen
class _Judged:
    policies: PolicySet
    origin: str
    folder: PolicySet
    """cpg's folder, when the policies judged are others (applied today, the cluster)."""
    folder_name: str
    agent: AgentSettings
    problems: list[str]
    identities: IdentityBook | None = None
    declarations: Declarations | None = None


def _judged(
    request: CheckRequest,
    kubeconfig: Path | None,
    context: str | None,
    kube_dir: Path | None,
) -> _Judged:
    folder_path = Path(request.policies) if request.policies else None
    folder = load_policies(folder_path) if folder_path is not None and folder_path.exists() else []
    problems: list[str] = []
    book, problem = check_identities(
        request, kubeconfig=kubeconfig, context=context, temp_dir=kube_dir
    )
    problems += [problem] if problem else []
    declared = read_declarations(
        request.declarations, kubeconfig=kubeconfig, context=context, temp_dir=kube_dir
    )
    problems += [f"declarations: {note}" for note in (declared.notes if declared else ())]
    if request.current is not None:
        current = load_policies(Path(request.current), setting="current")
        judged, origin = current, f"the current policies {request.current} ({len(current)})"
        agent, notes = request.resolve_agent()
        notes = (*notes, *release_notes(agent, judged))
    elif request.cluster:
        state = cluster_state(kubeconfig, context, kube_dir)
        judged = state.policies
        origin = f"the cluster ({len(judged)})"
        agent, notes = request.resolve_agent(state.config, state.images)
        notes = (*notes, *release_notes(agent, judged))
    else:
        if folder_path is not None and not folder_path.exists():
            load_policies(folder_path)  # the error that names the folder and the fix
        origin = f"{folder_path} ({len(folder)})"
        agent, notes = request.resolve_agent()
        notes = (*notes, *release_notes(agent, folder))
        return _Judged(
            PolicySet(folder),
            origin,
            PolicySet(()),
            "",
            agent,
            [*problems, *notes],
            book,
            declared,
        )
    return _Judged(
        PolicySet(judged),
        origin,
        PolicySet(folder),
        str(folder_path or ""),
        agent,
        [*problems, *notes],
        book,
        declared,
    )


def _answer(flow: Flow, count: int, judged: _Judged, request: CheckRequest, names: Any) -> Why:
    why = _explained(flow, count, judged, request, names)
    if judged.declarations is None:
        return why
    found = declaring(judged.declarations, flow.source, flow.destination, flow.protocol, flow.port)
    return attrs.evolve(why, declared_by=tuple(by.text() for by in found)) if found else why


def _explained(flow: Flow, count: int, judged: _Judged, request: CheckRequest, names: Any) -> Why:
    return explain_denial(
        flow,
        judged.policies,
        flows=count,
        ip_names=names,
        options=request.decide_options(judged.agent),
        agent=judged.agent,
        proposed=judged.folder,
        proposed_from=judged.folder_name,
    )


@reads_in_bulk
def why_run(
    request: CheckRequest,
    flow_filter: FlowFilter,
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    kube_dir: Path | None = None,
    cancel: threading.Event | None = None,
    limit: int = 1000,
    tally: ReviewTally | None = None,
    answer_seconds: float | None = None,
    evidence: EvidenceStore | None = None,
) -> WhyRun:
    """Every distinct flow of the capture the filters select (denied flows when no verdict is
    given), each answered against the policies judged, most flows first; ``tally`` follows
    the reading and the answering. With ``answer_seconds`` the answering stops once that
    long has passed since the call began (one kind is always answered): the most frequent
    come first, and ``unanswered`` says how many distinct flows were left. With ``evidence``
    an admitted answer says what the evidence holds for cpg's rule for it."""
    began = time.monotonic()
    judged = _judged(request, kubeconfig, context, kube_dir)
    tally = tally or ReviewTally()
    capture = CaptureFlows(request.inputs, cancel, identities=judged.identities, tally=tally)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    kept: list[Flow] = []
    pods: dict[str, Any] = {}
    named: set[tuple[str, str]] = set()
    selected = 0
    for flow in capture:
        note_pod(pods, flow.source, flow.source_ip)
        note_pod(pods, flow.destination, flow.destination_ip)
        if len(named) < _PODS_KEPT:
            for side in (flow.source, flow.destination):
                if side.pod_name:
                    named.add((side.namespace, side.pod_name))
        if flow.l7 is not None and flow.l7.dns is not None:
            kept.append(flow)
        if not flow_filter.verdict and flow.verdict not in _DENIED:
            continue
        if not flow_filter.matches(flow):
            continue
        selected += 1
        entry = groups.get(_group(flow))
        if entry is None:
            groups[_group(flow)] = [flow, 1]
        else:
            entry[1] += 1
    capture.check_readable()
    if cancel is not None and cancel.is_set():
        raise Cancelled("the question was cancelled")
    if not selected:
        _no_such_pod(flow_filter, named)
    names = why_names(kept)
    ordered = sorted(groups.values(), key=lambda g: -g[1])
    tally.total = len(ordered)
    answered: list[tuple[Flow, Any]] = []
    behind = _reader(evidence)
    for flow, count in ordered:
        if answer_seconds is not None and answered and time.monotonic() - began > answer_seconds:
            break
        known = with_known_pod(flow, pods)
        answer = _with_evidence(_answer(known, count, judged, request, names), known, behind)
        answered.append((flow, answer))
        tally.done += 1
    merged = merged_answers(answered)
    view = WhyView(
        answers=merged[:limit],
        origin=judged.origin,
        policies=len(judged.policies),
        selected=selected,
        kinds=len(merged),
        unanswered=len(ordered) - len(answered),
    )
    return WhyRun(view=view, stats=capture.stats, problems=judged.problems)


@reads_in_bulk
def trace_run(
    request: CheckRequest,
    flows: Sequence[Flow],
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    kube_dir: Path | None = None,
    evidence: EvidenceStore | None = None,
) -> WhyRun:
    """The answer for flows described by hand (``cpg_core.why.traced_flows``); with
    ``evidence``, what it holds for cpg's rule of an admitted one."""
    judged = _judged(request, kubeconfig, context, kube_dir)
    book = judged.identities
    if book is not None:
        flows = [book.resolve(flow)[0] for flow in flows]
    behind = _reader(evidence)
    answers = tuple(
        _with_evidence(_answer(flow, 0, judged, request, {}), flow, behind) for flow in flows
    )
    view = WhyView(answers=answers, origin=judged.origin, policies=len(judged.policies))
    return WhyRun(view=view, stats=None, problems=judged.problems)


def _reader(store: EvidenceStore | None) -> Callable[[str, str], PolicyEvidence | None] | None:
    return lenient_reader(store) if store is not None else None


def _with_evidence(
    why: Why, flow: Flow, read: Callable[[str, str], PolicyEvidence | None] | None
) -> Why:
    if read is None or not why.allowed:
        return why
    said = evidence_behind(flow, read)
    return attrs.evolve(why, evidence=said) if said else why


_PODS_KEPT = 100_000
"""Pod names kept to suggest from when a pod filter names none of them."""


class NoSuchPod(IoError):
    """A pod filter names no pod of the capture (a typo, most likely)."""

    usage = True


def _no_such_pod(flow_filter: FlowFilter, named: set[tuple[str, str]]) -> None:
    """NoSuchPod naming the closest pods when a pod filter matches no pod the capture
    shows (not only no flow the filters select): a typo, not an answer."""
    for field, wanted in (
        ("from_pod", flow_filter.from_pod),
        ("to_pod", flow_filter.to_pod),
        ("pod", flow_filter.pod),
    ):
        for namespace, prefix in wanted:
            if any(ns == namespace and pod.startswith(prefix) for ns, pod in named):
                continue
            given = f"{namespace}/{prefix}"
            close = difflib.get_close_matches(given, _prefixes(named), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise NoSuchPod(
                Setting(field),
                f" {shown(given)}: no pod of the capture has that name (or starts with it)" + hint,
            )


def _prefixes(named: set[tuple[str, str]]) -> list[str]:
    """``ns/pod`` of each pod and each of its names up to a dash (``shop/frontend``,
    ``shop/frontend-7d8f9``): a filter names a prefix."""
    found: set[str] = set()
    for namespace, pod in named:
        parts = pod.split("-")
        found.update(f"{namespace}/{'-'.join(parts[:n])}" for n in range(1, len(parts) + 1))
    return sorted(found)


def _group(flow: Flow) -> tuple[Any, ...]:
    """Flows one answer covers: what verify checks as one, with the same verdict and reason."""
    return (flow.verdict, flow.drop_reason, *check_key(flow))
