"""Knowing when a capture is enough (§D59): a workload's profile from its rule records and
its readiness, each reason on its own threshold; times and durations as a reviewer reads
them."""

from __future__ import annotations

import pytest

from cpg_core._base.documents import EntityPeerRecord, RuleEvidence
from cpg_core.readiness import (
    CaptureProfile,
    ReadinessRules,
    at_second,
    duration_text,
    not_ready_first,
    seconds_of,
    time_gaps,
    workload_profile,
)

pytestmark = pytest.mark.unit

DAY = 86_400


def _rule(
    port: int, first: str, last: str, flows: int, protocol: str = "TCP", **classes: int
) -> RuleEvidence:
    return RuleEvidence(
        key=f"entity:host:{protocol}:{port}",
        direction="ingress",
        peer=EntityPeerRecord("host"),
        port=str(port),
        protocol=protocol,
        flow_count=flows,
        first_seen=first,
        last_seen=last,
        classes=classes or {"policy": flows},
    )


def test_a_workload_observed_long_on_enough_flows_and_stable_is_ready() -> None:
    rules = [
        _rule(80, "2026-11-01T00:00:00.000000001Z", "2026-11-03T00:00:00Z", 80),
        _rule(443, "2026-11-01T01:00:00Z", "2026-11-02T23:00:00Z", 40),
        _rule(53, "2026-11-01T02:00:00Z", "2026-11-02T00:00:00Z", 0, **{"for_cluster": 0}),
    ]
    profile = workload_profile("shop", "web", rules, ReadinessRules())
    assert profile.ready and profile.reasons == ()
    assert (profile.first, profile.last) == ("2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z")
    assert (profile.flows, profile.rules, profile.peers) == (120, 2, 1)  # the 0-flow rule: none
    assert profile.last_new_rule == "2026-11-01T01:00:00Z"
    assert [(p.time, p.rules) for p in profile.curve] == [
        ("2026-11-01T00:00:00Z", 1),
        ("2026-11-01T01:00:00Z", 2),
    ]
    assert profile.stable_line().startswith("stable for 1 d 23 h: no new rule since 2026-11-01T01")


@pytest.mark.parametrize(
    ("rules", "reason"),
    [
        (ReadinessRules(min_span=3 * DAY), "observed for 2 d (needs 3 d)"),
        (ReadinessRules(min_flows=121), "120 flows (needs 121)"),
        (ReadinessRules(stable_for=2 * DAY), "a new rule appeared 1 d 23 h before its last flow"),
    ],
)
def test_each_threshold_is_its_own_reason(rules: ReadinessRules, reason: str) -> None:
    records = [
        _rule(80, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z", 80),
        _rule(443, "2026-11-01T01:00:00Z", "2026-11-02T23:00:00Z", 40),
    ]
    profile = workload_profile("shop", "web", records, rules)
    assert not profile.ready
    assert len(profile.reasons) == 1 and profile.reasons[0].startswith(reason), profile.reasons


def test_a_learned_capture_of_one_protocol_or_direction_is_a_reason_drops_are_not() -> None:
    records = [_rule(53, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z", 500, "UDP", forwarded=500)]
    udp = CaptureProfile(
        first="",
        last="",
        span_seconds=2 * DAY,
        flows=500,
        protocols={"UDP": 500},
        directions=("egress",),
        learned=True,
    )
    learned = workload_profile("shop", "web", records, ReadinessRules(), udp)
    assert learned.reasons == (
        "the capture holds UDP only: its other traffic was never seen",
        "the capture shows egress traffic only",
    )
    drops = workload_profile("shop", "web", records, ReadinessRules(), attrs_evolve(udp))
    assert drops.ready


def attrs_evolve(profile: CaptureProfile) -> CaptureProfile:
    import attrs

    return attrs.evolve(profile, learned=False)


def test_times_are_read_to_the_second_and_durations_in_two_units() -> None:
    assert at_second("2021-06-16T16:52:13.142581500Z") == "2021-06-16T16:52:13Z"
    assert at_second("0001-01-01T00:00:00Z") == "" and at_second("") == ""
    # an offset is a time zone, not a local time taken for UTC
    assert at_second("2021-06-16T18:52:13.5+02:00") == "2021-06-16T16:52:13Z"
    assert seconds_of("2021-06-16T16:52:13.250Z") == seconds_of("2021-06-16T16:52:13Z") + 0.25
    assert seconds_of("not a time") is None
    assert [duration_text(s) for s in (0.47, 5, 42, 200, 3700, 90_000, 3 * DAY + 4 * 3600)] == [
        "0.47 s",
        "5 s",
        "42 s",
        "3 m 20 s",
        "1 h 1 m",
        "1 d 1 h",
        "3 d 4 h",
    ]


def test_a_review_lists_the_workloads_to_keep_learning_first() -> None:
    ready = workload_profile(
        "a",
        "ready",
        [_rule(80, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z", 200)],
        ReadinessRules(),
    )
    young = workload_profile(
        "z",
        "young",
        [_rule(80, "2026-11-01T00:00:00Z", "2026-11-01T00:01:00Z", 200)],
        ReadinessRules(),
    )
    assert [p.workload for p in not_ready_first([ready, young])] == ["young", "ready"]


def test_gaps_are_the_long_stretches_without_a_flow_in_time_order() -> None:
    minutes = {"2026-11-02T10:00": 5, "2026-11-02T10:01": 1, "2026-11-02T10:05": 2}
    minutes |= {"2026-11-02T12:00": 1, "2026-11-02T12:30": 3, "2026-11-02T15": 9}
    span = 6 * 3600.0
    assert time_gaps(minutes, span) == (
        ("2026-11-02T10:06:00Z", "2026-11-02T12:00:00Z"),
        ("2026-11-02T12:01:00Z", "2026-11-02T12:30:00Z"),
        ("2026-11-02T12:31:00Z", "2026-11-02T15:00:00Z"),
    )
    # four minutes is no gap; a gap must also be a fiftieth of a long capture
    assert time_gaps({"2026-11-02T10:00": 1, "2026-11-02T10:05": 1}, 600.0) == ()
    assert time_gaps(minutes, 100 * 3600.0) == (("2026-11-02T12:31:00Z", "2026-11-02T15:00:00Z"),)


def test_a_shadow_run_judges_with_the_same_stable_for() -> None:
    from cpg_core.readiness import shadowed

    rules = ReadinessRules(min_span=60, stable_for=3600, min_flows=1)
    ready = workload_profile(
        "a", "w", [_rule(80, "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", 5)], rules
    )
    assert ready.ready
    end = 1_000_000.0
    assert shadowed(ready, rules, span=7200, last=end, last_break=None).ready
    assert shadowed(ready, rules, span=7200, last=end, last_break=end - 3601).ready
    short = shadowed(ready, rules, span=600, last=end, last_break=None)
    assert short.reasons == ("shadowed for 10 m with nothing breaking (needs 1 h)",)
    broke = shadowed(ready, rules, span=7200, last=end, last_break=end - 120)
    assert not broke.ready and broke.reasons[0].startswith(
        "the shadow run saw a flow its policy would drop by 1970-01-12T13:44:40Z, 2 m before"
    )
    young = workload_profile(
        "a", "w", [_rule(80, "2026-11-01T00:00:00Z", "2026-11-01T00:00:10Z", 5)], rules
    )
    kept = shadowed(young, rules, span=7200, last=end, last_break=None)
    assert not kept.ready and kept.reasons == young.reasons  # the evidence's reasons stay
