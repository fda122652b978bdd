"""``cpg why`` and ``cpg trace`` as people read them: one block per kind of flow, the answer
first, then the policies, the nearest misses, the deny rules and the rule to paste."""

from __future__ import annotations

import attrs

from cpg_core._review.why import Why
from cpg_core.text import one_line_each

MAX_SHOWN = 20


@attrs.frozen(slots=True, kw_only=True)
class WhyView:
    """Answers, and where the policies they were judged against came from."""

    answers: tuple[Why, ...]
    origin: str
    policies: int
    selected: int = 0
    """Flows of the capture the filters selected (0 for a traced flow)."""
    kinds: int = 0
    """Kinds of flow answered before the list was cut to the most frequent (0: not cut)."""
    unanswered: int = 0
    """Distinct flows left unanswered when the time to answer ran out (the most frequent were
    answered first)."""


def why_text(view: WhyView) -> str:
    out: list[str] = []
    if not view.answers:
        return f"No flow matched the filters (judged against {view.origin})."
    shown = view.answers[:MAX_SHOWN]
    kinds = max(view.kinds, len(view.answers))
    counted = (
        f"{len(view.answers)} kind(s) of flow"
        if kinds == len(view.answers)
        else f"the {len(view.answers):,} most frequent of {kinds:,} kinds of flow (narrow the "
        "filters for the others)"
    )
    out.append(f"{counted}, judged against {view.policies} policies from {view.origin}:")
    for why in shown:
        out.append("")
        count = f" ({why.flows} flow{'s' if why.flows != 1 else ''})" if why.flows else ""
        out.append(f"{why.traffic}{count}")
        out.append(f"  verdict: {_verdict(why)}")
        out.append(f"  answer:  {why.answer}")
        if why.evidence:
            out.append(f"  evidence: {why.evidence}")
        for by in why.declared_by:
            out.append(f"  declared: by {by} (the cluster depends on it)")
        if why.policed_by:
            out.append(f"  policed: {why.subject} {why.direction} by {', '.join(why.policed_by)}")
        for rule in why.deny:
            out.append(f"  deny:    {rule.policy} {rule.section}[{rule.index}] matches it")
        for miss in why.near_misses:
            out.append(
                f"  miss:    {miss.policy} {miss.section}[{miss.index}]: {'; '.join(miss.misses)}"
            )
        if why.fix:
            out.append(f"  fix:     {why.fix}")
        if why.admit_yaml:
            out.append("  admit with:")
            out.extend("    " + line for line in why.admit_yaml.rstrip("\n").splitlines())
    if len(view.answers) > MAX_SHOWN:
        listed = "all" if kinds == len(view.answers) else f"the {len(view.answers):,}"
        out.append(f"… and {len(view.answers) - MAX_SHOWN} more (-o json lists {listed})")
    return one_line_each(out)


def _verdict(why: Why) -> str:
    if why.direction == "unknown":
        return "CANNOT JUDGE (no traffic direction)"
    return "ADMITTED" if why.allowed else "DENIED"
