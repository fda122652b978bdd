"""Knowing when a capture is enough (ARCHITECTURE §D59).

cpg writes default-deny from whatever it is given. A capture of half a second, of one
protocol, or of minutes when the cluster's week holds a nightly job, makes a policy that
breaks what the sample did not hold. So every run says how much it was given — the
capture's span and width (:class:`CaptureProfile`) — and judges each workload
(:class:`WorkloadProfile`): the span it was observed, its flows and peers, and its learning
curve, the times its rules first appeared. A workload is *ready to enforce* when it was
observed long enough, with enough flows, and no new rule appeared late in the window
(:class:`ReadinessRules`, each an option); else it should *keep learning*, and the reason
says why. The profile of a workload is read from its rule records, the evidence's or a
run's own, so it accumulates over runs and restarts as the evidence does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import attrs

from cpg_core._base.documents import RuleEvidence
from cpg_core._synthesis.profile import CaptureProfile, at_second, duration_text, seconds_of

DAY = 86_400.0
HOUR = 3_600.0
DEFAULT_MIN_SPAN = DAY
"""A workload observed for less than a day has not shown its daily cycle (a nightly job,
a morning batch)."""
DEFAULT_STABLE_FOR = 6 * HOUR
"""No new rule in the last six hours of its observation: the rules stopped growing."""
DEFAULT_MIN_FLOWS = 100
_CURVE_POINTS = 24
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")


@attrs.frozen(slots=True)
class ReadinessRules:
    """When a workload is ready to enforce (the user's choices, each an option)."""

    min_span: float = DEFAULT_MIN_SPAN
    """Seconds it must have been observed (its first to its last flow)."""
    stable_for: float = DEFAULT_STABLE_FOR
    """Seconds before its last flow in which no new rule may have appeared."""
    min_flows: int = DEFAULT_MIN_FLOWS
    """Flows its rules must be built from."""


@attrs.frozen(slots=True)
class CurvePoint:
    """A point of a learning curve: by ``time``, ``rules`` rules had first appeared."""

    time: str
    rules: int


@attrs.frozen(slots=True, kw_only=True)
class WorkloadProfile:
    """What a capture (or the evidence of every run) shows of one workload, and whether its
    policy is ready to enforce."""

    namespace: str
    workload: str
    first: str
    """Its first flow, to the second ("" when no flow stands behind its rules)."""
    last: str
    span_seconds: float
    flows: int
    peers: int
    rules: int
    """Rules a flow asked for (rules written for the cluster or declared are not counted)."""
    last_new_rule: str
    """When its newest rule first appeared."""
    stable_seconds: float = 0.0
    """From its newest rule to its last flow: how long its rules have not grown."""
    protocols: tuple[str, ...]
    curve: tuple[CurvePoint, ...]
    """Its learning curve: the rules known by each time, at most 24 points."""
    ready: bool
    reasons: tuple[str, ...]
    """Why it should keep learning (empty when ready)."""

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.workload}"

    @property
    def verdict(self) -> str:
        return "ready to enforce" if self.ready else "keep learning"

    def stable_line(self) -> str:
        """``stable for 3 d 4 h: no new rule since 2026-…Z`` (or how long it was observed)."""
        if not self.last_new_rule:
            return "no flow behind its rules"
        return (
            f"stable for {duration_text(self.stable_seconds)}: no new rule since "
            f"{self.last_new_rule} "
            f"(observed {duration_text(self.span_seconds)}, {self.flows:,} flows)"
        )


def workload_profile(
    namespace: str,
    workload: str,
    rules: Iterable[RuleEvidence],
    rules_for: ReadinessRules,
    capture: CaptureProfile | None = None,
) -> WorkloadProfile:
    """The profile and readiness of one workload from its rule records (its evidence, or a
    run's :func:`rule_records`)."""
    seen = [r for r in rules if r.flow_count]
    firsts = sorted(t for r in seen if (t := seconds_of(r.first_seen)) is not None)
    lasts = [t for r in seen if (t := seconds_of(r.last_seen)) is not None]
    start = firsts[0] if firsts else None
    end = max(lasts) if lasts else None
    span = (end - start) if start is not None and end is not None else 0.0
    flows = sum(r.flow_count for r in seen)
    newest = max(seen, key=lambda r: seconds_of(r.first_seen) or 0.0).first_seen if seen else ""
    protocols = tuple(sorted({r.protocol for r in seen}))
    reasons = _reasons(span, flows, firsts, end, rules_for, capture)
    return WorkloadProfile(
        namespace=namespace,
        workload=workload,
        first=at_second((seen and min(r.first_seen for r in seen)) or ""),
        last=at_second((seen and max(r.last_seen for r in seen)) or ""),
        span_seconds=round(span, 3),
        flows=flows,
        peers=len({_peer_text(r) for r in seen}),
        rules=len(seen),
        last_new_rule=at_second(newest),
        stable_seconds=round(end - firsts[-1], 3) if end is not None and firsts else 0.0,
        protocols=protocols,
        curve=_curve(firsts),
        ready=not reasons,
        reasons=tuple(reasons),
    )


def _reasons(
    span: float,
    flows: int,
    firsts: Sequence[float],
    end: float | None,
    rules: ReadinessRules,
    capture: CaptureProfile | None,
) -> list[str]:
    out = []
    if not firsts:
        return ["no flow stands behind its rules"]
    if span < rules.min_span:
        out.append(f"observed for {duration_text(span)} (needs {duration_text(rules.min_span)})")
    if flows < rules.min_flows:
        out.append(f"{flows:,} flow{'s' if flows != 1 else ''} (needs {rules.min_flows:,})")
    if end is not None and rules.stable_for and end - firsts[-1] < rules.stable_for:
        ago = duration_text(end - firsts[-1])
        out.append(
            f"a new rule appeared {ago} before its last flow (needs "
            f"{duration_text(rules.stable_for)} without one)"
        )
    # Learned from what works, the rules are the traffic's own: one protocol, or one direction,
    # is what the capture held, not all the workload does (drops are only what was denied).
    if capture is not None and capture.learned and capture.one_protocol:
        out.append(
            f"the capture holds {capture.one_protocol} only: its other traffic was never seen"
        )
    if capture is not None and capture.learned and len(capture.directions) == 1:
        out.append(f"the capture shows {capture.directions[0]} traffic only")
    return out


def _peer_text(rule: RuleEvidence) -> str:
    return f"{rule.direction}:{rule.key.split(':', 1)[0]}"


def _curve(firsts: Sequence[float]) -> tuple[CurvePoint, ...]:
    """The learning curve, thinned to at most 24 points (the last always kept)."""
    if not firsts:
        return ()
    counted = {int(t): n for n, t in enumerate(firsts, 1)}  # a second's last count
    points = sorted(counted.items())
    if len(points) > _CURVE_POINTS:
        step = len(points) / (_CURVE_POINTS - 1)
        picked = [points[int(i * step)] for i in range(_CURVE_POINTS - 1)] + [points[-1]]
        points = sorted(set(picked))
    return tuple(
        CurvePoint(datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), n)
        for t, n in points
    )


def shadowed(
    profile: WorkloadProfile,
    rules: ReadinessRules,
    *,
    span: float,
    last: float | None,
    last_break: float | None,
) -> WorkloadProfile:
    """A workload's readiness once a shadow run judged its policy on live traffic: ready only
    when the evidence says so and the run (``span`` seconds, its newest flow at ``last``) saw
    nothing the policy would drop for the last ``stable_for`` of it (``last_break``: when it
    last did, None: never). The shadow's stable-for is the evidence's: one verdict."""
    needs = rules.stable_for
    reasons = list(profile.reasons)
    if last_break is not None and last is not None and last - last_break < needs:
        # by when, to the flush that counted it: no later than that, maybe earlier
        when = datetime.fromtimestamp(int(last_break), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        reasons.append(
            f"the shadow run saw a flow its policy would drop by {when}, "
            f"{duration_text(last - last_break)} before its newest flow (needs "
            f"{duration_text(needs)} without one)"
        )
    elif last_break is None and span < needs:
        reasons.append(
            f"shadowed for {duration_text(span)} with nothing breaking (needs "
            f"{duration_text(needs)})"
        )
    return attrs.evolve(profile, ready=not reasons, reasons=tuple(reasons))


def not_ready_first(profiles: Iterable[WorkloadProfile]) -> list[WorkloadProfile]:
    """The profiles a review lists: the workloads to keep learning first, then the ready."""
    return sorted(profiles, key=lambda p: (p.ready, p.namespace, p.workload))


def readiness_summary(profiles: Sequence[WorkloadProfile]) -> str:
    """``2 of 5 workloads ready to enforce`` (or none to judge)."""
    ready = sum(1 for p in profiles if p.ready)
    return f"{ready} of {len(profiles)} workloads ready to enforce"
