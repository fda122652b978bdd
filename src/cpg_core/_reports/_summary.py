"""``cpg report -o json``: the review as data for a pipeline or an agent — how many policies
and rules, the coverage, the namespace matrix (each pair's connections, ports and the
workloads behind them), and what a plan says would break."""

from __future__ import annotations

import attrs

from cpg_core._policy.matcher import policy_name
from cpg_core._reports._coverage import Coverage, coverage
from cpg_core._reports._matrix import MatrixCell, namespace_matrix, newly_enforced
from cpg_core._reports.graph import links_with_plan, traffic_graph
from cpg_core._reports.inputs import ReviewInputs
from cpg_core._review.pressure import EndpointPressure


@attrs.frozen(slots=True)
class ReviewSummary:
    title: str
    policies: int
    rules: int
    """Rules with evidence (a policy without evidence counts none)."""
    flows: int
    """Flows behind those rules."""
    findings: int
    coverage: Coverage
    namespaces: tuple[str, ...]
    """The matrix's rows and columns."""
    matrix: tuple[MatrixCell, ...]
    would_break_flows: int | None
    """None without a plan."""
    policy_map: tuple[EndpointPressure, ...] = ()
    """The plan's pods near or over their policy map's limit."""
    declared_denied: tuple[str, ...] = ()
    """``policy: what it denies`` of each declared dependency the policies deny (CPG045)."""


def review_summary(title: str, inputs: ReviewInputs) -> ReviewSummary:
    graph = traffic_graph(inputs.policies)
    nodes, links = links_with_plan(graph, inputs.plan)
    matrix = namespace_matrix(nodes, links, newly_enforced(inputs.plan))
    names = {policy_name(p) for p in inputs.policies}
    rules = [r for name, doc in inputs.evidence.items() if name in names for r in doc.rules]
    return ReviewSummary(
        title=title,
        policies=len(inputs.policies),
        rules=len(rules),
        flows=sum(r.flow_count for r in rules),
        findings=len(inputs.health.findings) if inputs.health else 0,
        coverage=coverage(
            inputs.policies,
            inputs.evidence,
            inputs.plan,
            [(n.namespace, n.workload) for n in nodes if n.kind == "workload"],
        ),
        namespaces=matrix.groups,
        matrix=matrix.cells,
        would_break_flows=inputs.plan.would_break_flows if inputs.plan else None,
        policy_map=inputs.plan.policy_map if inputs.plan else (),
        declared_denied=tuple(f"{a.policy}: {a.message}" for a in inputs.declared),
    )
