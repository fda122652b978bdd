"""``cpg plan`` and ``cpg verify`` as people read them: what would break, what is fixed,
what is admitted, each with its reason."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cpg_core._base.documents import VerifyReport
from cpg_core._reports.rollout import KEEP_LEARNING, TIED_NOTE, UNCHECKED
from cpg_core._review.plan_documents import CANNOT_JUDGE, Plan, WouldBreak
from cpg_core._review.readiness import readiness_summary
from cpg_core._synthesis.profile import at_second, duration_text
from cpg_core.text import one_line_each

MAX_SHOWN = 20


@attrs.frozen(slots=True, kw_only=True)
class PlanView:
    """A plan with where its inputs came from."""

    plan: Plan
    proposal: str
    """The folder or file of the proposed policies."""
    origin: str
    """Where the current policies came from."""
    policies: int
    """How many policies were proposed."""


@attrs.frozen(slots=True, kw_only=True)
class VerifyView:
    """A verification with where its policies came from."""

    report: VerifyReport
    policies: int
    origin: str


def _indented(text: str) -> list[str]:
    return ["      " + line for line in text.rstrip("\n").splitlines()]


def _would_break_lines(item: WouldBreak) -> list[str]:
    t = item.traffic
    seen = f"{t.flows} flow{'s' if t.flows != 1 else ''}"
    if item.declared_by:
        seen = "declared, " + ", ".join(by.ref for by in item.declared_by)
    out = [
        f"  {t.direction:<7} {t.source} → {t.destination} {t.protocol}/{t.port} ({seen})",
        f"    why:      {item.why}",
    ]
    if item.selector:
        selector = ", ".join(f"{k}={v}" for k, v in item.selector.items())
        out.append(f"    selector: {item.policy} selects {selector}")
    out.append(f"    sample:   {t.sample}")
    out.append(f"    fix:      {item.fix}")
    if item.narrow_yaml:
        narrowed = ", ".join(item.narrow_policies) or item.policy
        out.append(f"    narrow {narrowed} to:")
        out.extend(_indented(item.narrow_yaml))
    if item.rule_yaml:
        out.append(f"    {'or ' if item.narrow_yaml else ''}add to {item.policy}:")
        out.extend(_indented(item.rule_yaml))
    return out


def would_break_text(items: Iterable[WouldBreak]) -> str:
    """Traffic that would break, each with its policy, sample and fix, as ``cpg plan`` shows
    it (``cpg shadow`` prints each kind as it first happens)."""
    return one_line_each([line for item in items for line in _would_break_lines(item)])


def policy_map_lines(plan: Plan) -> list[str]:
    """The pods whose policy map the proposal would fill (none: no lines)."""
    if not plan.policy_map:
        return []
    over = sum(1 for p in plan.policy_map if p.over)
    limit = f"{plan.policy_map_max:,}"
    out = [
        "",
        f"POLICY MAP: {over} pods over the {limit}-entry policy map (bpf-policy-map-max), "
        f"{len(plan.policy_map) - over} near it (estimated from the identities the capture "
        "shows; each rule counted on its own, so the estimate errs high):",
    ]
    for item in plan.policy_map[:MAX_SHOWN]:
        state = "OVER" if item.over else "near"
        out.append(f"  {item.endpoint}: ~{item.entries:,} entries ({item.share}, {state})")
        for rule in item.largest[:3]:
            out.append(
                f"    {rule.policy} {rule.rule} ({rule.peer}): {rule.identities} identities "
                f"x {rule.ports} ports = {rule.entries:,}"
            )
        for advice in item.advice:
            out.append(f"    cut: {advice}")
    if len(plan.policy_map) > MAX_SHOWN:
        out.append(f"  … and {len(plan.policy_map) - MAX_SHOWN} more (-o json lists all)")
    return out


def plan_text(view: PlanView) -> str:
    """The plan as people read it."""
    plan = view.plan
    out: list[str] = [
        f"Plan for {view.policies} proposed policies in {view.proposal}",
        f"Current policies: {view.origin}",
        f"  (sees {plan.blind_spots})",
    ]
    out += [f"  note: {note}" for note in plan.notes]
    if plan.capture is not None and plan.capture.flows:
        capture = plan.capture
        protocols = ", ".join(f"{p} {n:,}" for p, n in capture.protocols.items()) or "none"
        out.append(
            f"Capture: {duration_text(capture.span_seconds)} ({capture.first or '?'} → "
            f"{capture.last or '?'}), {capture.flows:,} flows; protocols: {protocols}"
        )
    out.append("")
    out += _breaking_lines(plan)
    out += _newly_enforced_lines(plan)
    out += readiness_plan_lines(plan)
    out += rollout_lines(plan)
    out.extend(policy_map_lines(plan))
    out += _availability_lines(plan)
    if plan.also_selected:
        out.append("")
        out.append("Also selected by your policies (cpg never changes them; Cilium applies both):")
        for also in plan.also_selected[:MAX_SHOWN]:
            out.append(f"  {also.policy}: also selected by your policy {', '.join(also.by)}")
    out.append("")
    out.append(f"Fixes: {plan.fixed}/{plan.candidates} candidate flows admitted")
    for t in plan.not_fixed[:MAX_SHOWN]:
        out.append(f"  not admitted: {t.sample} ({t.flows} flows)")
    out += _change_lines(plan)
    out += _per_policy_lines(plan)
    out.append("")
    if plan.breaks:
        out.append(f"Would break {_broken_words(plan)}: review before applying.")
    elif plan.can_judge:
        out.append(
            f"Nothing that works today would break ({plan.forwarded_flows} forwarded flows "
            f"checked{_over(plan)})."
        )
    else:
        out.append("Cannot judge: no forwarded traffic in the capture (exit 4).")
    return one_line_each(out)


def _over(plan: Plan) -> str:
    """``, over 0.47 s of capture; 0 of 2 workloads ready to enforce``: how much traffic a
    verdict stands on."""
    said = ""
    if plan.capture is not None and plan.capture.flows:
        said += f", over {duration_text(plan.capture.span_seconds)} of capture"
    if plan.readiness:
        said += f"; {readiness_summary(plan.readiness)}"
    return said


def readiness_plan_lines(plan: Plan) -> list[str]:
    """The proposed policies' workloads that should keep learning, with why."""
    learning = [p for p in plan.readiness if not p.ready]
    if not plan.readiness:
        return []
    out = ["", f"Readiness: {readiness_summary(plan.readiness)}"]
    for profile in learning[:MAX_SHOWN]:
        out.append(f"  keep learning  {profile.name}: {'; '.join(profile.reasons)}")
    if len(learning) > MAX_SHOWN:
        out.append(f"  … and {len(learning) - MAX_SHOWN} more (-o json lists all)")
    return out


def rollout_lines(plan: Plan) -> list[str]:
    """The rollout order: each batch with the commands that check and apply it, then the
    workloads that wait and why."""
    rollout = plan.rollout
    if rollout is None or not (rollout.batches or rollout.waiting):
        return []
    out = [
        "",
        f"Rollout: {plural(len(rollout.batches), 'batch', 'batches')} of "
        f"{plural(rollout.workloads, 'ready workload')}, the ones nothing else depends on "
        "first; shadow each batch, then apply it, then the next:",
    ]
    if not plan.can_judge:
        out.append(f"  ({UNCHECKED})")
    for batch in rollout.batches[:MAX_SHOWN]:
        shown = ", ".join(batch.workloads[:6]) + (
            f", … ({len(batch.workloads)} in all)" if len(batch.workloads) > 6 else ""
        )
        depended = (
            f"; {batch.depended_on_by} other workloads depend on it" if batch.depended_on_by else ""
        )
        out.append(f"  {batch.number}. {shown}{depended}")
        out.append(f"     check:  {batch.shadow}")
        out.append(f"     apply:  {batch.apply}")
    if len(rollout.batches) > MAX_SHOWN:
        out.append(f"  … and {len(rollout.batches) - MAX_SHOWN} more batches (-o json lists all)")
    if rollout.waiting:
        # the workloads to keep learning are listed under Readiness, with why
        other = [w for w in rollout.waiting if not w.why.startswith(KEEP_LEARNING)]
        learning = len(rollout.waiting) - len(other)
        out.append(
            f"  Not in the rollout yet: {len(rollout.waiting)}"
            + (f" ({learning} keep learning: see Readiness)" if learning else "")
        )
        for wait in other[:MAX_SHOWN]:
            out.append(f"    {wait.workload}: {wait.why}")
        if len(other) > MAX_SHOWN:
            out.append(f"    … and {len(other) - MAX_SHOWN} more (-o json lists all)")
    if rollout.tied:
        out.append(f"  {TIED_NOTE.format(n=rollout.tied)}")
    return out


def plural(n: int, word: str, words: str = "") -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _broken_words(plan: Plan) -> str:
    """``12 flows that work today`` and/or ``2 dependencies the cluster declares``."""
    declared = sum(1 for item in plan.would_break if item.declared_by)
    parts = []
    if plan.would_break_flows or not declared:
        parts.append(f"{plan.would_break_flows} flows that work today")
    if declared:
        word = "dependency" if declared == 1 else "dependencies"
        parts.append(f"{declared} {word} the cluster declares")
    return " and ".join(parts)


def _breaking_lines(plan: Plan) -> list[str]:
    if not plan.would_break:
        if plan.unjudged_flows and plan.can_judge:
            return [
                f"Cannot say nothing breaks: nothing would among the {plan.forwarded_flows} "
                f"forwarded flows judged, but {plan.unjudged_flows} flows were not judged "
                "(see the note above)."
            ]
        # nothing breaks: the verdict at the end says so, once
        return [] if plan.can_judge else [f"Cannot judge: {CANNOT_JUDGE.split(': ', 1)[1]}"]
    out = [
        f"WOULD BREAK: {len(plan.would_break)} kinds of traffic, {_broken_words(plan)} "
        "would be dropped:"
    ]
    for item in plan.would_break[:MAX_SHOWN]:
        out.extend(_would_break_lines(item))
    if len(plan.would_break) > MAX_SHOWN:
        out.append(f"  … and {len(plan.would_break) - MAX_SHOWN} more (-o json lists all)")
    return out


def _newly_enforced_lines(plan: Plan) -> list[str]:
    if not plan.newly_enforced:
        return []
    out = ["", "Newly enforced endpoints (default-deny for the first time):"]
    for n in plan.newly_enforced[:MAX_SHOWN]:
        labels = ", ".join(f"{k}={v}" for k, v in n.labels.items())
        pods = f"; pods {', '.join(n.pods[:3])}{' …' if len(n.pods) > 3 else ''}" if n.pods else ""
        out.append(
            f"  {n.namespace}/{n.workload} {n.direction} ({labels}{pods}): "
            f"{n.forwarded_flows} forwarded flows, by {', '.join(n.policies)}"
        )
    return out


def _availability_lines(plan: Plan) -> list[str]:
    if not plan.availability:
        return []
    out = [
        "",
        f"AVAILABILITY: {len(plan.availability)} thing(s) the capture does not show that "
        "the proposal would take away:",
    ]
    for found in plan.availability[:MAX_SHOWN]:
        where = f" ({found.policy})" if found.policy else ""
        out.append(f"  {found.code}{where}: {found.message}")
        out.append(f"    fix: {found.fix}")
    if len(plan.availability) > MAX_SHOWN:
        out.append(f"  … and {len(plan.availability) - MAX_SHOWN} more (-o json lists all)")
    return out


def _change_lines(plan: Plan) -> list[str]:
    out: list[str] = []
    changed = [d for d in plan.diffs if d.status != "unchanged"]
    if changed:
        out += ["", "Changes, in Cilium terms:"]
        for diff in changed:
            out.append(f"  {diff.policy} ({diff.status})")
            out += [f"    + {entry}" for entry in diff.added[:MAX_SHOWN]]
            out += [f"    - {entry}" for entry in diff.removed[:MAX_SHOWN]]
    if plan.confidence:
        out += ["", "Confidence of the new and changed rules (from the evidence):"]
        for c in plan.confidence[: MAX_SHOWN * 2]:
            if not c.flows:  # DNS for every egress policy, a port for the whole cluster…
                out.append(f"  {c.policy} {c.rule}: written for the cluster, no flow needed")
                continue
            out.append(
                f"  {c.policy} {c.rule}: {c.flows} flow{'s' if c.flows != 1 else ''}, "
                f"{c.sources} source and {c.destinations} destination pods in samples, "
                f"{c.sessions} session(s), {at_second(c.first_seen)} → {at_second(c.last_seen)}"
            )
    return out


def _per_policy_lines(plan: Plan) -> list[str]:
    busy = sorted(
        (p for p in plan.policies if p.fixes or p.would_break or p.newly_enforced),
        key=lambda p: (-p.would_break, p.policy),
    )
    if not busy:
        return []
    out = ["", "Per policy:"]
    for p in busy[:MAX_SHOWN]:
        out.append(
            f"  {p.policy}: fixes {p.fixes} flows, would break {p.would_break}, "
            f"newly enforces {p.newly_enforced} endpoint(s)"
        )
    if len(busy) > MAX_SHOWN:
        out.append(f"  … and {len(busy) - MAX_SHOWN} more (-o json)")
    return out


def verify_text(view: VerifyView) -> str:
    """The verification as people read it."""
    report, policies, origin = view.report, view.policies, view.origin
    out: list[str] = []
    out.append(
        f"Checked {report.candidates.total} candidate and {report.explicit_deny.total} "
        f"explicit-deny flows against {policies} policies from {origin}"
    )
    lines: dict[tuple[str, str, str], int] = {}  # identical lines once, their flows added
    for check in report.checks:
        if check.kind == "explicit_deny":
            label = "DANGER" if check.allowed else "still denied"
            why = (
                f"{check.reason}, but an explicit deny rule dropped this traffic"
                if check.allowed
                else "no policy here allows it"
            )
        else:
            label = "admitted" if check.allowed else "NOT admitted"
            why = f"{check.reason}; evidence: {check.evidence}" if check.evidence else check.reason
        key = (label, check.traffic, why)
        lines[key] = lines.get(key, 0) + check.flows
    for (label, traffic, why), count in lines.items():
        flows = f"({count} flow{'s' if count != 1 else ''})"
        out.append(f"  {label:<13} {traffic} {flows}: {why}")
    for denied in report.declared:
        out.append(f"  {'NOT admitted':<13} (declared) {denied}")
    out.append(report.summary())
    if not report.can_judge:
        unexpressible = (
            f" ({report.unexpressible} flows no rule can express: without a direction, an "
            "older Cilium or an exporter's field mask without traffic_direction)"
            if report.unexpressible
            else ""
        )
        out.append(
            f"Cannot judge: no denied flow of the capture could be checked{unexpressible}; "
            "'passed' would say nothing (exit 4)."
        )
    return one_line_each(out)


def plan_verdict(plan: Plan, *, bold: str = "") -> str:
    """A plan's verdict in a few words, for a report's summary line: how much would break,
    or that it could not judge (a drops-only capture checked nothing that works)."""
    if plan.verdict == "cannot_judge":
        return f"{bold}cannot judge what would break{bold} (no forwarded traffic to check)"
    return f"{bold}{plan.would_break_flows:,} flows would break{bold}"


def plan_cannot_judge() -> str:
    """Why a plan cannot judge, and what to capture instead."""
    reason = CANNOT_JUDGE.split(": ", 1)[1]
    return reason[0].upper() + reason[1:] + "."
