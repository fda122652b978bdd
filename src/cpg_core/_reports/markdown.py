"""The Markdown report for a pull request: what the policies allow (a Mermaid graph GitHub
draws), why each rule is there (flows, first/last seen, confidence), the findings and infra
drops with their fixes, and what a plan says would break. Same inputs, same bytes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cpg_core._base.documents import (
    ClusterHealth,
    DropRecord,
    Finding,
    PolicyDocument,
    PolicyEvidence,
    RuleEvidence,
)
from cpg_core._base.names import SHARED_FOLDER
from cpg_core._reports._coverage import Coverage, coverage
from cpg_core._reports._mermaid import mermaid_graphs
from cpg_core._reports.checks import plan_cannot_judge, plan_verdict
from cpg_core._reports.graph import TrafficGraph, traffic_graph
from cpg_core._reports.rollout import TIED_NOTE, UNCHECKED
from cpg_core._review.availability import Availability
from cpg_core._review.behind import seen_at
from cpg_core._review.explain import rule_in_words
from cpg_core._review.owners import also_selected
from cpg_core._review.plan_documents import Plan, WouldBreak
from cpg_core._review.readiness import WorkloadProfile, readiness_summary
from cpg_core._review.rollout import Rollout
from cpg_core._synthesis.scope import FOR_CLUSTER
from cpg_core.text import clean_text

MAX_ROWS = 30


_LEARNED = ("forwarded", "redirected")


def learned(rule: RuleEvidence) -> str:
    """`` (learned: forwarded 2)`` for a rule learned from traffic that works (--learn)."""
    counts = [f"{cls} {rule.classes[cls]}" for cls in _LEARNED if rule.classes.get(cls)]
    return f" (learned: {', '.join(counts)})" if counts else ""


def confidence(rule: RuleEvidence) -> str:
    """``high`` (10 flows or more, seen in 2 sessions or more), ``medium`` (3 flows or more),
    else ``low``: how much traffic stands behind a rule."""
    if rule.flow_count >= 10 and len(rule.contributing_sessions) >= 2:
        return "high"
    if rule.flow_count >= 3:
        return "medium"
    if FOR_CLUSTER in rule.classes:
        return "for the cluster"
    if rule.declared_by:
        return "declared by " + ", ".join(by.ref for by in rule.declared_by)
    return "low"


_MARKUP = re.compile(r"([\\\[\]*~])")
"""Markdown punctuation a value could open a link, an image or emphasis with (without
brackets, ``](`` and ``![`` mean nothing)."""


def _cell(text: object) -> str:
    """Text for a table cell or a heading: one line, and no markup of the capture's making
    (no HTML, link, image, emphasis, code span or @mention; pipes escaped)."""
    value = clean_text(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MARKUP.sub(r"\\\1", value).replace("`", "'").replace("|", "\\|")
    return value.replace("@", "&#64;")


def _code(text: object) -> str:
    """Text inside a code span in a table cell: one line, no backtick to close the span
    early, pipes escaped (GitHub splits cells on them even there)."""
    return clean_text(str(text)).replace("`", "'").replace("|", "\\|")


def coverage_lines(covered: Coverage) -> list[str]:
    """The coverage section: the totals in a sentence, a row per namespace."""
    out = ["## Coverage", ""]
    if not covered.workloads:
        return [*out, "No workload in the policies, their evidence or the plan.", ""]
    out += [
        f"Of {covered.workloads} workloads, policies select {covered.ingress} for ingress "
        f"({covered.share('ingress')}) and {covered.egress} for egress "
        f"({covered.share('egress')}).",
        "",
        "| namespace | workloads | ingress | egress | no policy for |",
        "|---|---|---|---|---|",
    ]
    for row in covered.namespaces[:MAX_ROWS]:
        open_for = [f"{w} (ingress)" for w in row.ingress_open]
        open_for += [f"{w} (egress)" for w in row.egress_open]
        shown = ", ".join(open_for[:10]) + (
            f", … {len(open_for) - 10} more" if len(open_for) > 10 else ""
        )
        out.append(
            f"| {_cell(row.namespace)} | {row.workloads} | {row.ingress} | {row.egress} | "
            f"{_cell(shown) or '—'} |"
        )
    if len(covered.namespaces) > MAX_ROWS:
        out.append(f"| … and {len(covered.namespaces) - MAX_ROWS} more namespaces | | | | |")
    return [*out, ""]


_CUT_NOTE_ROOM = 1_000
"""Characters kept free for the line that says where the report was cut."""

Block = list[str]
"""Lines that stand or fall together: a heading, a table row, a graph."""


Sections = list[tuple[str, list[Block]]]
"""Each section's name and its blocks, in the order a reviewer reads them."""


def markdown_report(
    *,
    title: str,
    policies: Sequence[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
    health: ClusterHealth | None = None,
    plan: Plan | None = None,
    max_size: int = 0,
    full_report: str = "",
    declared: Sequence[Availability] = (),
    profiles: Sequence[WorkloadProfile] = (),
) -> str:
    """The report, what a reviewer acts on first: the verdict, what would break (with why and
    the fix), what the proposal newly enforces, the findings; then coverage, the policies' rules
    in words and the graphs. ``evidence`` maps ``namespace/name`` of a policy to its evidence;
    ``plan`` is what ``cpg plan`` found. With ``max_size`` the report stops before that many
    characters at a whole row or graph and says what it left out and where ``full_report``
    is."""
    head, sections = markdown_sections(
        title=title,
        policies=policies,
        evidence=evidence,
        health=health,
        plan=plan,
        declared=declared,
        profiles=profiles,
    )
    return "\n".join(_fit(head, sections, max_size, full_report))


def markdown_sections(
    *,
    title: str,
    policies: Sequence[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
    health: ClusterHealth | None = None,
    plan: Plan | None = None,
    declared: Sequence[Availability] = (),
    profiles: Sequence[WorkloadProfile] = (),
) -> tuple[list[str], Sections]:
    """The report's head (title and summary) and its sections as blocks, for a reader that
    pages them (cpg-mcp's get_report) rather than cuts them."""
    names = sorted(
        f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}"
        for p in policies
    )
    findings = health.findings if health else ()
    drops = health.drops if health else ()
    graph = traffic_graph(policies)
    covered = coverage(
        policies,
        evidence,
        plan,
        [(n.namespace, n.workload) for n in graph.nodes if n.kind == "workload"],
    )
    head = [f"# cpg report: {_cell(title)}", ""]
    head += _summary_lines(names, evidence, findings, drops, plan)
    sections: Sections = []
    if plan is not None:
        sections += [
            ("would break", _would_break_blocks(plan)),
            ("newly enforced", _newly_enforced_blocks(plan)),
        ]
    if profiles:  # what not to apply yet, before what to fix in what is applied
        sections.append(("readiness", _readiness_blocks(profiles)))
    if plan is not None and plan.rollout is not None and plan.rollout.batches:
        sections.append(("rollout", _rollout_blocks(plan.rollout, plan.can_judge)))
    if declared:
        sections.append(("declared dependencies denied", _declared_blocks(declared)))
    sections += [
        ("findings", _findings_blocks(findings)),
        ("infrastructure drops", _drops_blocks(drops)),
    ]
    if plan is not None:
        sections.append(("policy map pressure", _pressure_blocks(plan)))
    sections += [
        ("coverage", [[line] for line in coverage_lines(covered)]),
        ("policies", _policy_blocks(names, policies, evidence)),
        ("graphs", _graph_blocks(graph, plan)),
    ]
    return head, sections


def markdown_page(blocks: Sequence[Block], start: int, max_size: int) -> tuple[str, int]:
    """Whole blocks from ``start`` while they fit in ``max_size`` characters (at least one):
    the page's text and where the next page starts (``len(blocks)`` at the end)."""
    out: list[str] = []
    used = 0
    end = start
    for block in blocks[start:]:
        size = _size(block)
        if out and used + size > max_size:
            break
        out += block
        used += size
        end += 1
    return "\n".join(out), end


def _fit(
    head: list[str], sections: Sequence[tuple[str, list[Block]]], max_size: int, where: str
) -> list[str]:
    """The head and as many whole blocks of the sections, in order, as ``max_size`` holds
    (every one when it is 0); past that, a note naming what was left out."""
    out = list(head)
    used = _size(out)
    room = max_size - _CUT_NOTE_ROOM if max_size else None
    left_out: list[str] = []
    for name, blocks in sections:
        if left_out:
            if blocks:
                left_out.append(name)
            continue
        for index, block in enumerate(blocks):
            size = _size(block)
            # a heading stands only with its first row or graph
            needs = size + (_size(blocks[1]) if index == 0 and len(blocks) > 1 else 0)
            if room is not None and used + needs > room:
                left_out.append(f"the rest of {name}" if index else name)
                break
            out += block
            used += size
    out += ["Generated by cpg report.", ""] if not left_out else []
    if left_out:
        where_text = ""
        if where.startswith("cpg "):  # a command, copied as it is: no full stop to break it
            where_text = f" Full report: `{_code(where)}`"
        elif where:
            where_text = f" Full report: {_cell(where)}."
        out += [
            "",
            f"> **Cut to stay under {max_size:,} characters**: not shown here: "
            f"{', '.join(left_out)}.{where_text}",
            "",
            "Generated by cpg report.",
            "",
        ]
    return out


def _size(block: Block) -> int:
    return sum(len(line) + 1 for line in block)


def _table(heading: list[str], header: str, rows: list[str], more: int = 0) -> list[Block]:
    """A section whose table rows can be cut one by one (the heading and the header row
    come as one block)."""
    if not rows:
        return []
    cells = header.count("|") - 1
    blocks: list[Block] = [[*heading, header, "|" + "---|" * cells], *[[row] for row in rows]]
    if more:
        blocks.append([f"| … and {more:,} more" + " |" * cells])
    blocks.append([""])
    return blocks


def _summary_lines(
    names: Sequence[str],
    evidence: Mapping[str, PolicyEvidence],
    findings: Sequence[Finding],
    drops: Sequence[DropRecord],
    plan: Plan | None,
) -> list[str]:
    rules = [rule for name in names if name in evidence for rule in evidence[name].rules]
    flows = sum(rule.flow_count for rule in rules)
    added = sum(1 for rule in rules if FOR_CLUSTER in rule.classes)
    declared = sum(1 for rule in rules if rule.declared_by and not rule.flow_count)
    parts = [f"{len(rules) - added - declared} rules justified by {flows:,} flows"]
    if added:
        parts.append(f"{added} written for the cluster (DNS for every egress policy)")
    if declared:
        parts.append(f"{declared} kept open for what the cluster's objects declare")
    said = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    summary = [f"**{len(names)} policies**, {said}"]
    if plan is not None:
        statuses: dict[str, int] = {}
        for diff in plan.diffs:
            statuses[diff.status] = statuses.get(diff.status, 0) + 1
        summary.append(
            f"{statuses.get('new', 0)} new, {statuses.get('changed', 0)} changed, "
            f"{statuses.get('unchanged', 0)} unchanged"
        )
    summary.append(f"{len(findings)} findings")
    summary.append(f"{sum(d.count for d in drops):,} infrastructure/transient drops")
    if plan is not None:
        summary.append(plan_verdict(plan, bold="**"))
    out = ["; ".join(summary) + ".", ""]
    if plan is not None and plan.verdict == "cannot_judge":
        out += [f"> **The plan cannot judge what would break.** {plan_cannot_judge()}", ""]
    return out


FIXES_SHOWN = 3
"""Would-break items whose fix the report spells out as YAML to paste."""


def _would_break_blocks(plan: Plan) -> list[Block]:
    rows = []
    for item in plan.would_break[:MAX_ROWS]:
        t = item.traffic
        traffic = f"{t.direction} {t.source} → {t.destination} {t.protocol}/{t.port}"
        flows = f"{t.flows:,}" if not item.declared_by else "declared"
        rows.append(f"| {_cell(traffic)} | {flows} | {_cell(item.why)} | {_cell(item.fix)} |")
    blocks = _table(
        ["## Would break (cpg plan)", "", "Traffic that works today and would stop.", ""],
        "| traffic | flows | why | fix |",
        rows,
        max(0, len(plan.would_break) - MAX_ROWS),
    )
    for item in plan.would_break[:FIXES_SHOWN]:
        blocks.append(_fix_block(item))
    return blocks


def _readiness_blocks(profiles: Sequence[WorkloadProfile]) -> list[Block]:
    """The workloads to keep learning first, those with the same reasons on one row (a
    cluster's capture is often too short for all of them alike), then the ready ones with
    how long each has been stable."""
    rows = []
    learning: dict[str, list[str]] = {}
    for p in profiles:
        if not p.ready:
            learning.setdefault("; ".join(_general(r) for r in p.reasons), []).append(p.name)
    for why, names in learning.items():
        shown = ", ".join(names[:_NAMES_SHOWN])
        more = f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
        rows.append(f"| {_cell(shown + more)} | keep learning | {_cell(why)} |")
    for p in profiles:
        if p.ready:
            rows.append(f"| {_cell(p.name)} | ready to enforce | {_cell(p.stable_line())} |")
    return _table(
        [
            f"## Readiness: {readiness_summary(profiles)}",
            "",
            (
                f"{sum(len(n) for n in learning.values())} should keep learning: apply their "
                "policies once the capture (the evidence adds up over runs) holds enough, or "
                "write only the ready ones (the only-ready option of cpg replay and generate)."
                if learning
                else "Every workload was observed long enough, with enough flows, and its "
                "rules stopped growing."
            ),
            "",
        ],
        "| workloads | verdict | why |",
        rows[:MAX_ROWS],
        max(0, len(rows) - MAX_ROWS),
    )


_NAMES_SHOWN = 12


def _rollout_blocks(rollout: Rollout, judged: bool) -> list[Block]:
    """The batches in order, each with the shadow run that checks it and the command that
    applies it; then how many wait (the readiness section says why)."""
    rows = []
    for batch in rollout.batches:
        shown = ", ".join(batch.workloads[:_NAMES_SHOWN])
        more = len(batch.workloads) - _NAMES_SHOWN
        shown += f" and {more} more" if more > 0 else ""
        rows.append(
            f"| {batch.number} | {_cell(shown)} | {batch.depended_on_by} | "
            f"`{_code(batch.shadow)}` | `{_code(batch.apply)}` |"
        )
    waiting = len(rollout.waiting)
    intro = (
        f"{len(rollout.batches)} batches of {rollout.workloads} ready workloads, the ones "
        "nothing else depends on first: shadow a batch, apply it, then the next."
    )
    if waiting:
        intro += f" {waiting} workloads wait (cpg plan says why)."
    if not judged:
        intro += " " + UNCHECKED + "."
    if rollout.tied:
        intro += " " + TIED_NOTE.format(n=rollout.tied) + "."
    return _table(
        ["## Rollout", "", intro, ""],
        "| batch | workloads | depended on by | check | apply |",
        rows[:MAX_ROWS],
        max(0, len(rows) - MAX_ROWS),
    )


def _general(reason: str) -> str:
    """A reason without its workload's own numbers, so that alike workloads share a row:
    ``observed for 0 s (needs 1 d)`` → ``observed for less than 1 d``."""
    if "(needs " not in reason:
        return reason
    head, needs = reason.split(" (needs ", 1)
    if reason.startswith("a new rule appeared "):
        return "a new rule in the last " + needs.split(" without", 1)[0]
    if head.startswith("observed for "):
        return "observed for less than " + needs.rstrip(")")
    if head.endswith(("flow", "flows")):
        return "fewer than " + needs.rstrip(")") + " flows"
    return reason


def _declared_blocks(declared: Sequence[Availability]) -> list[Block]:
    rows = [f"| {_cell(a.policy)} | {_cell(a.message)} |" for a in declared[:MAX_ROWS]]
    return _table(
        [
            "## Declared dependencies the policies deny (CPG045)",
            "",
            "What the cluster's own objects say it depends on (no capture needs to show it). "
            f"Fix: {_cell(declared[0].fix)}.",
            "",
        ],
        "| policy | what it denies |",
        rows,
        max(0, len(declared) - MAX_ROWS),
    )


def _fix_block(item: WouldBreak) -> Block:
    t = item.traffic
    what = f"{t.direction} {t.source} → {t.destination} {t.protocol}/{t.port}"
    out = [f"<details><summary>Fix for {_cell(what)}</summary>", ""]
    if item.narrow_yaml:
        out += [f"Narrow {_cell(', '.join(item.narrow_policies) or item.policy)}:", ""]
        out += _fenced(item.narrow_yaml)
    if item.rule_yaml:
        out += [f"{'Or add' if item.narrow_yaml else 'Add'} to {_cell(item.policy)}:", ""]
        out += _fenced(item.rule_yaml)
    if not item.narrow_yaml and not item.rule_yaml:
        out += [_cell(item.fix), ""]
    return [*out, "</details>", ""]


def _fenced(text: str) -> list[str]:
    """YAML in a code block whose fence no line of it can close."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}yaml", clean_text(text, keep_newlines=True).rstrip("\n"), fence, ""]


def _newly_enforced_blocks(plan: Plan) -> list[Block]:
    rows = []
    for n in plan.newly_enforced[:MAX_ROWS]:
        labels = ", ".join(f"{k}={v}" for k, v in n.labels.items())
        rows.append(
            f"| {_cell(f'{n.namespace}/{n.workload}')} | {n.direction} | {_cell(labels)} | "
            f"{n.forwarded_flows:,} | {_cell(', '.join(n.policies))} |"
        )
    return _table(
        [
            "## Newly enforced (cpg plan)",
            "",
            "Endpoints no policy selects today that the proposal puts into default-deny: "
            "the traffic the capture saw keeps working; anything else they do stops.",
            "",
        ],
        "| workload | direction | labels | forwarded flows judged | by |",
        rows,
        max(0, len(plan.newly_enforced) - MAX_ROWS),
    )


def _graph_blocks(graph: TrafficGraph, plan: Plan | None) -> list[Block]:
    graphs, left_out = mermaid_graphs(graph, plan) if graph.nodes else ([], [])
    intro = ["## Allowed traffic", ""]
    if not graph.nodes:
        return [[*intro, "None: no policy in the folder allows any traffic.", ""]]
    if plan is not None and plan.would_break:
        intro += ["Dashed red arrows: traffic that works today and would break (cpg plan).", ""]
    blocks: list[Block] = []
    for heading, chart in graphs:
        block = [f"### {_cell(heading)}", ""] if heading else []
        blocks.append([*(intro if not blocks else []), *block, "```mermaid", chart, "```", ""])
    if left_out:
        skipped = ", ".join(_cell(name) for name in left_out)
        blocks.append(
            [
                f"No graph here for {len(left_out)} more namespaces ({skipped}): see the "
                "HTML report.",
                "",
            ]
        )
    return blocks


def _pressure_blocks(plan: Plan) -> list[Block]:
    rows = []
    for pod in plan.policy_map[:MAX_ROWS]:
        largest = "; ".join(
            f"{r.policy} {r.rule}: {r.identities} × {r.ports}" for r in pod.largest[:3]
        )
        rows.append(
            f"| {_cell(pod.endpoint)} | {pod.entries:,} | {pod.share}"
            f"{' (over)' if pod.over else ''} | {_cell(largest)} | "
            f"{_cell('; '.join(pod.advice)) or '—'} |"
        )
    return _table(
        [
            "## Policy map pressure (cpg plan)",
            "",
            f"Estimated entries of each pod's policy map against bpf-policy-map-max "
            f"({plan.policy_map_max:,}); over it, the agent cannot apply the policies.",
            "",
        ],
        "| pod | entries | share | largest rules | cut |",
        rows,
        max(0, len(plan.policy_map) - MAX_ROWS),
    )


def _policy_blocks(
    names: Sequence[str],
    policies: Sequence[PolicyDocument],
    evidence: Mapping[str, PolicyEvidence],
) -> list[Block]:
    blocks: list[Block] = [
        [
            "## Policies",
            "",
            "Each policy's rules with the traffic behind them. Confidence: high = 10 or more "
            "flows seen in 2 or more sessions; medium = 3 or more flows; low = fewer; for the "
            "cluster = written for traffic every cluster needs (DNS), not seen in the capture.",
            "",
        ]
    ]
    others = {a.policy: a.by for a in also_selected(policies)}
    for name in names:
        shown = name.lstrip("/")  # a clusterwide policy has no namespace to name
        block = [f"### {_cell(shown)}", ""]
        if name in others:
            mine = ", ".join(f"`{_code(n)}`" for n in others[name])
            block += [f"Also selected by your policy {mine} (cpg leaves it as it is).", ""]
        doc = evidence.get(name) or evidence.get(f"{SHARED_FOLDER}/{shown}")
        if doc is None or not doc.rules:
            blocks.append([*block, "No evidence recorded for this policy.", ""])
            continue
        block += [
            "| direction | rule | flows | first seen | last seen | confidence |",
            "|---|---|---|---|---|---|",
        ]
        for rule in doc.rules[:MAX_ROWS]:
            first, last = (
                (seen_at(rule.first_seen), seen_at(rule.last_seen))
                if rule.flow_count
                else ("—", "—")
            )
            block.append(
                f"| {rule.direction} | {_cell(rule_in_words(rule))} | {rule.flow_count:,}"
                f"{learned(rule)} | {_cell(first)} | {_cell(last)} | {_cell(confidence(rule))} |"
            )
        if len(doc.rules) > MAX_ROWS:
            block.append(f"| … and {len(doc.rules) - MAX_ROWS} more | | | | | |")
        blocks.append([*block, ""])
    return blocks


def _findings_blocks(findings: Sequence[Finding]) -> list[Block]:
    rows = []
    for finding in sorted(findings, key=lambda f: (-f.count, f.kind, f.subject))[:MAX_ROWS]:
        label, what, fix = finding.advice()
        rows.append(f"| {_cell(label)} | {finding.count:,} | {_cell(what)} | {_cell(fix)} |")
    return _table(
        ["## Findings", ""],
        "| finding | flows | what happened | fix |",
        rows,
        max(0, len(findings) - MAX_ROWS),
    )


def _drops_blocks(drops: Sequence[DropRecord]) -> list[Block]:
    rows = [
        f"| {_cell(drop.reason)} | {_cell(drop.drop_class)} | {drop.count:,} | "
        f"{_cell(drop.remediation or '—')} |"
        for drop in sorted(drops, key=lambda d: (-d.count, d.reason))[:MAX_ROWS]
    ]
    return _table(
        ["## Infrastructure and transient drops (no policy fixes these)", ""],
        "| reason | class | flows | fix |",
        rows,
        max(0, len(drops) - MAX_ROWS),
    )
