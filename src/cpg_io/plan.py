"""Reading what ``cpg plan`` judges: the capture (every verdict), the proposed and current
policies, and the proposal's evidence. The plan itself is pure (``cpg_core.plan``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from cpg_core import DecideOptions, Flow, FlowParser, PolicyEvidence
from cpg_core.plan import CurrentSource, Plan, plan
from cpg_io.evidence_store import EvidenceStore
from cpg_io.sources import (
    SNIFF_BYTES,
    ReadStats,
    check_readable,
    describe_source,
    expand_inputs,
    open_flow_stream,
    peek,
    read_records,
)


@attrs.frozen
class PlannedCapture:
    stats: ReadStats
    plan: Plan


def plan_capture(
    inputs: Sequence[str],
    proposal: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]] | None,
    *,
    current_source: CurrentSource,
    options: DecideOptions,
    evidence: EvidenceStore | None = None,
    default_local_cluster: bool = True,
) -> PlannedCapture:
    """The plan of ``proposal`` over a capture; UnreadableInput when it holds no record."""
    files = expand_inputs(list(inputs))
    stats = ReadStats()
    heads: list[bytes] = []

    def flows() -> Iterator[Flow]:
        parser = FlowParser()
        for path in files:
            with open_flow_stream(path) as stream:
                heads.append(peek(stream, SNIFF_BYTES))
                yield from read_records(stream, stats, parser)

    found: dict[str, PolicyEvidence] = {}
    if evidence is not None:
        for namespace, _workload, doc in evidence.read_all(lambda problem: None):
            found[f"{namespace}/{doc.policy.name}"] = doc
    result = plan(
        flows(),
        proposal,
        current,
        current_source=current_source,
        options=options,
        evidence=found,
        default_local_cluster=default_local_cluster,
    )
    head = next((h for h in heads if h.strip()), b"")
    label = describe_source(files[0]) if len(files) == 1 else f"{len(files)} input files"
    check_readable(label, stats, head, 100.0)
    return PlannedCapture(stats=stats, plan=result)
