"""``cpg explain`` and cpg-mcp's get_evidence: one policy's evidence, read, and the filters
with their time window counted back from its newest rule."""

from __future__ import annotations

import difflib
from pathlib import Path

import attrs

from cpg_core import ExplainFilter, ExplainRequest, PolicyEvidence
from cpg_io.evidence_store import EvidenceStore


@attrs.frozen
class ExplainRun:
    evidence: PolicyEvidence | None
    """None: no evidence for that workload (each root says what to do in its words)."""
    filter: ExplainFilter
    """The request's filters, the window resolved against the newest evidence."""
    path: Path
    """Where the evidence is, or would be."""
    near: tuple[str, ...] = ()
    """When there is none: the ``namespace/workload`` names with evidence closest to the one
    asked for (a typo's fix)."""


def explain(request: ExplainRequest, store: EvidenceStore) -> ExplainRun:
    """The evidence of ``request``'s workload in ``store``. StoreError or EvidenceError when
    it cannot be read; RequestError when the window, counted back from the newest evidence,
    ends before it starts."""
    path = store.path_for(request.namespace, request.workload)
    doc = store.read(request.namespace, request.workload)
    rules = doc.rules if doc is not None else []
    newest = max((rule.last_seen for rule in rules if rule.last_seen), default=None)
    near: tuple[str, ...] = ()
    if doc is None:
        known = [f"{namespace}/{workload}" for namespace, workload in store.targets()]
        asked = f"{request.namespace}/{request.workload}"
        near = tuple(difflib.get_close_matches(asked, known, n=3, cutoff=0.8))
    return ExplainRun(evidence=doc, filter=request.filter_for(newest), path=path, near=near)
