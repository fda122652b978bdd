"""``cpg drift`` as people read it: what changed in the cluster since the policies were
applied, each finding with what to do about it."""

from __future__ import annotations

import json

import attrs

from cpg_core._review.drift import Drift
from cpg_core._review.wire import to_data
from cpg_core.text import one_line_each

MAX_SHOWN = 20


@attrs.frozen(slots=True, kw_only=True)
class DriftView:
    """A drift with where its policies and flows came from."""

    drift: Drift
    policies: str
    """The folder of the applied policies."""
    source: str
    """The capture files or the relay."""


def _indented(text: str) -> list[str]:
    return ["      " + line for line in text.rstrip("\n").splitlines()]


def _no_rule_can_fix(drift: Drift) -> list[str]:
    count = len(drift.no_rule_can_fix)
    if not count:
        return []
    out = [
        "",
        f"NO RULE CAN FIX: {count} kinds of dropped traffic no allow rule can express "
        "(not drift; cpg replay lists them as findings):",
    ]
    for item in drift.no_rule_can_fix[:MAX_SHOWN]:
        t = item.traffic
        out.append(
            f"  {t.direction:<7} {t.source} → {t.destination} {t.protocol}/{t.port} "
            f"({t.flows} flow{'s' if t.flows != 1 else ''}, {item.drop_reason}; "
            f"policy {item.policy})"
        )
    if count > MAX_SHOWN:
        out.append(f"  … and {count - MAX_SHOWN} more (-o json)")
    return out


def drift_text(view: DriftView) -> str:
    drift = view.drift
    out = [f"Drift of the policies in {view.policies}: {drift.flows:,} flows from {view.source}"]
    if drift.needs_rule:
        out += ["", f"NEEDS A RULE: {len(drift.needs_rule)} kinds of traffic the policies drop:"]
        for item in drift.needs_rule[:MAX_SHOWN]:
            t = item.traffic
            out.append(
                f"  {t.direction:<7} {t.source} → {t.destination} {t.protocol}/{t.port} "
                f"({t.flows} flow{'s' if t.flows != 1 else ''}, {item.drop_reason})"
            )
            out.append(f"    policy:   {item.policy}")
            out.append(f"    sample:   {t.sample}")
            if item.rule_yaml:
                out.append(f"    add to {item.policy} (after checking the traffic is wanted):")
                out.extend(_indented(item.rule_yaml))
        if len(drift.needs_rule) > MAX_SHOWN:
            out.append(f"  … and {len(drift.needs_rule) - MAX_SHOWN} more (-o json)")
    out += _no_rule_can_fix(drift)
    if drift.unseen_pods:
        out += ["", f"NEW PODS: {len(drift.unseen_pods)} selectors reach pods with new labels:"]
        for pods in drift.unseen_pods[:MAX_SHOWN]:
            selector = ", ".join(f"{k}={v}" for k, v in pods.selector.items()) or "?"
            unseen = ", ".join(f"{k}={v}" for k, v in pods.unseen.items()) or "a new combination"
            names = f" ({', '.join(pods.pods)})" if pods.pods else ""
            out.append(f"  {pods.policy} selects {selector}: pods with {unseen}{names}")
            out.append(
                "    fix: if they are a new version of the same app, keep the policy and check "
                "its rules cover them; if not, narrow the selector by a label they lack"
            )
        if len(drift.unseen_pods) > MAX_SHOWN:
            out.append(f"  … and {len(drift.unseen_pods) - MAX_SHOWN} more (-o json)")
    if drift.stale_rules:
        out += [
            "",
            f"STALE: {len(drift.stale_rules)} rules no flow has used for more than "
            f"{drift.stale_after_days:g} days (as of {drift.reference}):",
        ]
        for rule in drift.stale_rules[:MAX_SHOWN]:
            out.append(
                f"  {rule.policy} {rule.rule}: last flow {rule.last_seen} ({rule.idle_days:g} days)"
            )
        if len(drift.stale_rules) > MAX_SHOWN:
            out.append(f"  … and {len(drift.stale_rules) - MAX_SHOWN} more (-o json)")
        out.append("    fix: remove a stale rule once you know nothing needs it (cpg explain)")
    if drift.without_evidence:
        shown = ", ".join(drift.without_evidence[:5])
        more = (
            f" and {len(drift.without_evidence) - 5} more"
            if len(drift.without_evidence) > 5
            else ""
        )
        out += [
            "",
            f"No evidence for {shown}{more}: new pods and stale rules cannot be judged for them.",
        ]
    if drift.unjudged_flows:
        out += [
            "",
            f"NOT JUDGED: {drift.unjudged_flows:,} dropped flows of kinds of traffic first seen "
            f"once this session kept {drift.max_kinds:,} kinds (a cap on memory): they may need "
            "rules the findings above do not show.",
        ]
    out.append("")
    if drift.drifted:
        out.append("Drifted: review the findings above.")
    elif drift.can_judge:
        out.append(f"No drift found ({drift.judged_flows:,} flows judged).")
    else:
        out.append(f"Cannot judge: {NOTHING_JUDGED} (exit 4).")
    return one_line_each(out)


NOTHING_JUDGED = (
    "no flow of the capture could be judged (none, or none with a direction: an older "
    "Cilium, or an exporter's field mask without traffic_direction); 'no drift' would say "
    "nothing"
)


def drift_json(view: DriftView) -> str:
    data = {"policies": view.policies, "source": view.source, **to_data(view.drift)}
    if not view.drift.unjudged_flows:  # only a live session with a cap on kinds sets them
        del data["unjudged_flows"], data["max_kinds"]
    if not view.drift.future_flows:
        del data["future_flows"], data["future_newest"]
    data["drifted"] = view.drift.drifted
    data["verdict"] = view.drift.verdict
    return json.dumps(data, indent=2, ensure_ascii=False)
