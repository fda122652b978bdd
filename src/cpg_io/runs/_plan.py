"""Reading what ``cpg plan`` judges: the capture (every verdict), the proposed and current
policies, and the proposal's evidence. The plan itself is pure (``cpg_core.plan``)."""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from cpg_core import (
    Aggregator,
    CaptureRequest,
    CheckRequest,
    CpgError,
    CurrentSource,
    DecideOptions,
    Endpoint,
    Plan,
    PolicyEvidence,
    SessionInfo,
    SessionSource,
    Setting,
    plan,
)
from cpg_core.cilium import (
    CILIUM_DEFAULTS,
    MANAGED_BY_VALUE,
    AgentSettings,
    foreign_policy,
    load_all,
    narrow_in_text,
    policy_name,
    release_notes,
)
from cpg_core.declarations import Declarations, with_declared_entries
from cpg_core.identities import IdentityBook
from cpg_core.readiness import ReadinessRules
from cpg_core.reports import PlanView, plan_rollout
from cpg_core.shadow import WouldBreak
from cpg_core.sharing import evidence_by_policy
from cpg_core.why import FlowFilter
from cpg_io.declarations import read_declarations
from cpg_io.errors import IoError
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.identities import check_identities
from cpg_io.kube import cluster_state
from cpg_io.policy_files import load_policies, load_policies_and_files
from cpg_io.progress import ReviewTally
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.runs._output import EvidenceSettings, write_outputs
from cpg_io.runs._report import no_evidence
from cpg_io.runs._session import new_session_id, rfc3339, utc_now
from cpg_io.sources import CaptureFlows, ReadStats
from cpg_io.store import PolicyStore, atomic_write_text, folder_lock
from cpg_io.version import cpg_version


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
    agent: AgentSettings = CILIUM_DEFAULTS,
    cancel: threading.Event | None = None,
    flow_filter: FlowFilter | None = None,
    identities: IdentityBook | None = None,
    tally: ReviewTally | None = None,
    declarations: Declarations | None = None,
    readiness: ReadinessRules | None = None,
) -> PlannedCapture:
    """The plan of ``proposal`` over a capture; UnreadableInput when it holds no record;
    Cancelled soon after ``cancel`` is set."""
    keep = flow_filter.matches if flow_filter is not None and not flow_filter.empty else None
    capture = CaptureFlows(inputs, cancel, keep, identities, tally)
    problems: list[str] = []
    found: dict[str, PolicyEvidence] = {}
    if evidence is not None:
        read = evidence.read_all(problems.append, cancel)
        found = evidence_by_policy(((namespace, doc) for namespace, _w, doc in read), proposal)
    result = plan(
        capture,
        proposal,
        current,
        current_source=current_source,
        options=options,
        evidence=found,
        agent=agent,
        declarations=declarations,
        readiness=readiness,
    )
    capture.check_readable()
    if evidence is not None and proposal and not found and not problems:
        what = "proposed policies (their rules' confidence is unknown)"
        problems.append(no_evidence(len(proposal), evidence, what))
    return PlannedCapture(stats=capture.stats, plan=result, problems=problems)


@attrs.frozen
class PlanRun:
    """A plan with where its inputs came from (what the reports render), the capture's
    counts and the evidence files that could not be read."""

    view: PlanView
    stats: ReadStats
    problems: list[str]


@attrs.frozen
class JudgedPolicies:
    """The policies a plan judges: the proposal, those applied today, where they came from
    and the Cilium setting the cluster's agents imply."""

    folder: Path
    proposal: list[dict[str, Any]]
    current: list[dict[str, Any]] | None
    source: CurrentSource
    origin: str
    agent: AgentSettings
    """The agents' settings judged with (§D61)."""
    problems: list[str]
    identities: IdentityBook | None = None
    declarations: Declarations | None = None
    files: Mapping[str, str] = attrs.Factory(dict)
    """Each proposed policy's file, by ``namespace/name``."""


def judged_policies(
    request: CheckRequest,
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    kube_dir: Path | None = None,
) -> JudgedPolicies:
    """The proposed policies (``request.policies``) and those applied today (a folder, the
    cluster, or None: inferred from the flows), read once for ``cpg plan`` and ``cpg shadow``."""
    folder = Path(request.policies or "policies")
    proposal: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    if folder.exists() or request.policies:
        proposal, files = load_policies_and_files(folder)
    if request.only:
        proposal = _only(proposal, request.only, folder)
    current: list[dict[str, Any]] | None = None
    source: CurrentSource = "flows"
    problems: list[str] = []
    book, problem = check_identities(
        request, kubeconfig=kubeconfig, context=context, temp_dir=kube_dir
    )
    problems += [problem] if problem else []
    declared = read_declarations(
        request.declarations, kubeconfig=kubeconfig, context=context, temp_dir=kube_dir
    )
    if declared is not None:
        problems += [f"declarations: {note}" for note in declared.notes]
    if request.current is not None:
        current = load_policies(Path(request.current), setting="current")
        origin = f"the current policies {request.current} ({len(current)})"
        source = "current"
        if not current:
            problems.append(
                f"{request.current}: no CiliumNetworkPolicy in it; the plan takes nothing as "
                "applied today (is this the folder or file you meant?)"
            )
    if request.cluster:
        state = cluster_state(kubeconfig, context, kube_dir)
        current = state.policies
        origin, source = f"the cluster ({len(current)})", "cluster"
        agent, notes = request.resolve_agent(state.config, state.images)
        problems += notes
    else:
        agent, _notes = request.resolve_agent()
        if request.current is None:
            origin = (
                "inferred from the flows (no current policies given, from files or the cluster)"
            )
    problems += release_notes(agent, [*proposal, *(current or [])])
    return JudgedPolicies(
        folder, proposal, current, source, origin, agent, problems, book, declared, files
    )


def _only(
    proposal: list[dict[str, Any]], names: Sequence[str], folder: Path
) -> list[dict[str, Any]]:
    """The proposed policies ``--only`` names; RequestError for a name the folder lacks."""
    by_name = {policy_name(p): p for p in proposal}
    missing = [n for n in names if n not in by_name]
    if missing:
        near = difflib.get_close_matches(missing[0], list(by_name), n=1)
        raise NoSuchPolicy(
            Setting("only"),
            f" {missing[0]}: no such proposed policy in {folder}"
            + (f"; did you mean {near[0]}?" if near else " (cpg plan names each policy)"),
        )
    return [by_name[n] for n in names]


class NoSuchPolicy(IoError):
    """``--only`` names a policy the proposal does not hold (a typo, most likely)."""

    usage = True


@reads_in_bulk
def plan_run(
    request: CheckRequest,
    *,
    evidence: EvidenceStore | None = None,
    evidence_dir: Path | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
    kube_dir: Path | None = None,
    cancel: threading.Event | None = None,
    flow_filter: FlowFilter | None = None,
    tally: ReviewTally | None = None,
) -> PlanRun:
    """The plan use case: the proposed policies (``request.policies``) against those applied
    today (a folder, the cluster, or inferred from the flows), judged on the capture. The
    proposal's evidence is read from ``evidence`` or the folder's own evidence root. Inline
    kubeconfig credentials go to ``kube_dir`` when given (a folder the caller owns), else to
    a private folder removed at once."""
    judged = judged_policies(request, kubeconfig=kubeconfig, context=context, kube_dir=kube_dir)
    folder, proposal, current = judged.folder, judged.proposal, judged.current
    source, origin, problems = judged.source, judged.origin, judged.problems
    store = evidence or EvidenceStore(evidence_dir or default_evidence_root(folder), folder)
    planned = plan_capture(
        request.inputs,
        proposal,
        current,
        current_source=source,
        options=request.decide_options(judged.agent),
        evidence=store,
        agent=judged.agent,
        cancel=cancel,
        flow_filter=flow_filter,
        identities=judged.identities,
        tally=tally,
        declarations=judged.declarations,
        readiness=request.readiness,
    )
    rollout = plan_rollout(
        planned.plan,
        proposal,
        judged.files,
        folder=str(folder),
        shadow_for=request.readiness.stable_for,
    )
    plan = attrs.evolve(planned.plan, rollout=rollout)
    view = PlanView(plan=plan, proposal=str(folder), origin=origin, policies=len(proposal))
    return PlanRun(view=view, stats=planned.stats, problems=problems + planned.problems)


@attrs.frozen
class WrittenFixes:
    """What ``write_fixes`` did: the rules added, the selectors narrowed, the files written
    and problems writing them."""

    rules: int
    files: list[str]
    errors: list[str]
    narrowed: int = 0


def write_fixes(
    planned: PlanRun,
    folder: Path,
    *,
    evidence_dir: Path | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> WrittenFixes:
    """Apply the first fix of every kind of traffic the plan says would break: the
    narrower selectors where the plan has them (the endpoint stays as it is today: nothing is
    opened), else an allow rule in the proposed policies in ``folder`` (merged as replay
    merges), with evidence whose session has source type ``plan`` and whose flows count
    under the class ``plan``."""
    plan_found = planned.view.plan
    narrowing = [item for item in plan_found.would_break if item.narrow_label]
    narrowed, files, errors = _narrow_selectors(folder, narrowing)
    # a fix is exactly the traffic that broke: nothing widened or added (§D47)
    exact = CaptureRequest.build(exact_peers=["*"], include_system_namespaces=True, dns_rule=False)
    aggregator = Aggregator(exact.aggregate_options())
    declared = []
    for item, (flow, count) in zip(plan_found.would_break, plan_found.fixes, strict=True):
        if item.narrow_label:
            continue
        if item.declared_by:  # no flow: an entry kept open for what the cluster declares
            declared.append((flow, item.declared_by))
        for _ in range(count):
            aggregator.admit(flow, "plan")
    plans = with_declared_entries(aggregator.plans(), declared)
    if not plans:
        return WrittenFixes(rules=0, files=files, errors=errors, narrowed=narrowed)
    started = clock()
    session = SessionInfo(
        id=new_session_id(started),
        started_at=rfc3339(started),
        ended_at=rfc3339(clock()),
        cpg_version=cpg_version(),
        source=SessionSource(type="plan", file=planned.view.proposal),
        flows_ingested=aggregator.total_flows,
    )
    written = write_outputs(
        plans,
        folder,
        evidence=EvidenceSettings(root=evidence_dir or default_evidence_root(folder)),
        session=session,
        health=None,
        dry_run=False,
        diff=False,
        jobs=1,
    )
    return WrittenFixes(
        rules=sum(len(plan.attribution) for plan in plans),
        files=files + [str(f.path) for f in written.files if f.outcome in ("created", "updated")],
        errors=errors
        + [f.error for f in written.files if f.outcome == "failed"]
        + written.evidence_errors,
        narrowed=narrowed,
    )


def _narrow_selectors(
    folder: Path, items: Sequence[WouldBreak]
) -> tuple[int, list[str], list[str]]:
    """Narrow the selectors the plan's first fixes name, in cpg's files of ``folder`` (a
    person's are never touched: the plan offers no narrowing through one): how many
    selectors, the files written, the problems."""
    if not items:
        return 0, [], []
    store = PolicyStore(folder)
    where: dict[str, Path] = {}
    texts: dict[Path, str] = {}
    for path in sorted(folder.rglob("*.yaml")):
        text = store.read(path) or ""
        if MANAGED_BY_VALUE not in text:
            continue
        try:
            documents = load_all(text, str(path))
        except CpgError:
            continue
        texts[path] = text
        for doc in documents:
            if isinstance(doc, Mapping) and foreign_policy(text, str(path)) is None:
                meta = doc.get("metadata") or {}
                name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}".lstrip("/")
                where[name] = path
    count, changed, errors = 0, set(), []
    with folder_lock(folder, "policies"):
        for item in items:
            key, value = item.narrow_label
            namespace = item.endpoint.partition("/")[0]
            subject = Endpoint(
                namespace=namespace,
                labels=(
                    *(f"k8s:{k}={v}" for k, v in item.labels.items()),
                    f"k8s:io.kubernetes.pod.namespace={namespace}",
                ),
            )
            for policy in item.narrow_policies:
                found = where.get(policy)
                if found is None:
                    errors.append(f"{policy}: not found in {folder}; narrow it by hand")
                    continue
                path = found
                try:
                    edited = narrow_in_text(texts[path], str(path), policy, subject, key, value)
                except CpgError as exc:
                    errors.append(str(exc))
                    continue
                if edited is not None:
                    texts[path] = edited
                    changed.add(path)
                    count += 1
        for path in sorted(changed):
            try:
                atomic_write_text(path, texts[path])
            except OSError as exc:
                errors.append(f"{path}: {exc.strerror or exc}")
    return count, [str(p) for p in sorted(changed)], errors
