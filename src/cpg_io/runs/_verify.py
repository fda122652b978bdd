"""``verify``: do these policies admit the capture's denied flows, and nothing an explicit
deny dropped? Reading is here; the checking is cpg_core's."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CheckRequest, DecideOptions, Flow, VerifyReport, verify_flows
from cpg_core.cilium import CILIUM_DEFAULTS, AgentSettings, release_notes
from cpg_core.declarations import Catalogue
from cpg_core.identities import IdentityBook
from cpg_core.lint import declared_denials
from cpg_core.reading import time_key
from cpg_core.reports import VerifyView
from cpg_core.why import FlowFilter
from cpg_io.declarations import read_catalogue, read_declarations
from cpg_io.evidence_store import EvidenceStore, lenient_reader
from cpg_io.identities import check_identities
from cpg_io.kube import cluster_state
from cpg_io.policy_files import load_policies
from cpg_io.progress import ReviewTally
from cpg_io.runs._heap import reads_in_bulk
from cpg_io.sources import CaptureFlows, ReadStats

log = logging.getLogger("cpg")


@attrs.frozen
class VerifiedCapture:
    stats: ReadStats
    report: VerifyReport


def _inside(key: str, since: str, until: str) -> bool:
    return bool(key) and (not since or key >= since) and (not until or key <= until)


def verify_capture(
    source: str | Sequence[str],
    policies: Sequence[Mapping[str, Any]],
    options: DecideOptions,
    *,
    agent: AgentSettings = CILIUM_DEFAULTS,
    window: tuple[str, str] = ("", ""),
    flow_filter: FlowFilter | None = None,
    identities: IdentityBook | None = None,
    include_system: bool = False,
    tally: ReviewTally | None = None,
    evidence: EvidenceStore | None = None,
    catalogue: Catalogue | None = None,
) -> VerifiedCapture:
    """Check ``policies`` against a capture (files, folders, globs: as cpg replay reads
    them); UnreadableInput when it holds no Hubble record. Only flows inside ``window``
    (since, until time keys; "" is open) are checked."""
    keep = flow_filter.matches if flow_filter is not None and not flow_filter.empty else None
    capture = CaptureFlows(
        [source] if isinstance(source, str) else source,
        keep=keep,
        identities=identities,
        tally=tally,
    )
    since, until = window
    flows: Iterable[Flow] = capture
    if since or until:
        flows = (flow for flow in capture if _inside(time_key(flow.time), since, until))
    report = verify_flows(
        flows,
        policies,
        options,
        agent=agent,
        include_system=include_system,
        evidence=lenient_reader(evidence) if evidence is not None else None,
        catalogue=catalogue,
    )
    capture.check_readable()
    return VerifiedCapture(stats=capture.stats, report=report)


@attrs.frozen
class VerifyRun:
    """A verification with where its policies came from, and the capture's counts."""

    view: VerifyView
    stats: ReadStats


@reads_in_bulk
def verify_run(
    request: CheckRequest,
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    flow_filter: FlowFilter | None = None,
    tally: ReviewTally | None = None,
    evidence: EvidenceStore | None = None,
) -> VerifyRun:
    """The verify use case: the policies of ``request.policies`` (and the cluster's, with
    ``request.cluster``) against every denied flow of the capture."""
    folder = Path(request.policies) if request.policies is not None else None
    sources = [str(folder)] if folder is not None else []
    documents = load_policies(folder) if folder is not None else []
    book, problem = check_identities(request, kubeconfig=kubeconfig, context=context)
    if problem:
        log.warning("%s", problem)
    if request.cluster:
        state = cluster_state(kubeconfig, context)
        documents += state.policies
        sources.append(f"the cluster ({len(state.policies)})")
        agent, notes = request.resolve_agent(state.config, state.images)
    else:
        agent, notes = request.resolve_agent()
    for note in (*notes, *release_notes(agent, documents)):
        log.warning("%s", note)
    verified = verify_capture(
        request.inputs,
        documents,
        request.decide_options(agent),
        agent=agent,
        flow_filter=flow_filter,
        identities=book,
        include_system=request.include_system,
        tally=tally,
        evidence=evidence,
        catalogue=read_catalogue(request.catalogue),
    )
    report = verified.report
    declared = read_declarations(request.declarations, kubeconfig=kubeconfig, context=context)
    if declared is not None:
        for note in declared.notes:
            log.warning("declarations: %s", note)
        denied = declared_denials(documents, declared)
        report = attrs.evolve(report, declared=tuple(f"{a.policy}: {a.message}" for a in denied))
    view = VerifyView(report=report, policies=len(documents), origin=" and ".join(sources))
    return VerifyRun(view=view, stats=verified.stats)
