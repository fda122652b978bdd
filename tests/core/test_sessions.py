"""A replay session is the content it read: rerunning it replaces its evidence (§D24)."""

from __future__ import annotations

from typing import Any

import attrs

from cpg_core import ReplayIdentity
from cpg_core._base.documents import (
    EndpointPeerRecord,
    InputDigest,
    RuleEvidence,
    SessionInfo,
    SessionSource,
)
from cpg_core._review.evidence import merge_evidence


def digest(name: str, size: int, sha: str) -> InputDigest:
    return InputDigest(name=name, bytes=size, sha256=sha)


def session(sid: str, *inputs: InputDigest, live: bool = False) -> SessionInfo:
    return SessionInfo(
        id=sid,
        started_at="2026-11-29T10:00:00.000000Z",
        ended_at="2026-11-29T10:00:01.000000Z",
        cpg_version="test",
        source=SessionSource(type="live" if live else "replay"),
        inputs=inputs,
    )


def rule(key: str, sid: str, flows: int, identified: bool = True, **kw: Any) -> RuleEvidence:
    return RuleEvidence(
        key=key,
        direction="ingress",
        peer=EndpointPeerRecord("shop", {"app": "web"}),
        port="8080",
        protocol="TCP",
        flow_count=flows,
        contributing_sessions=(sid,),
        classes={"policy": flows},
        by_session={sid: {"policy": flows}} if identified else {},
        **kw,
    )


def merged(existing: Any, run: SessionInfo, *rules: RuleEvidence, replaces: Any = ()) -> Any:
    return merge_evidence(
        existing,
        name="cpg-api",
        namespace="shop",
        workload="api",
        session=run,
        rules=rules,
        replaces=replaces,
    )


A = digest("/c/a.jsonl", 100, "aa")


def test_the_session_id_depends_on_content_not_on_the_file_name() -> None:
    moved = digest("/elsewhere/a.jsonl", 100, "aa")
    assert ReplayIdentity.session_id([A]) == ReplayIdentity.session_id([moved])
    assert ReplayIdentity.session_id([A]).startswith("replay-")
    assert ReplayIdentity.session_id([A]) != ReplayIdentity.session_id([digest("x", 100, "ab")])


def test_the_same_inputs_again_replace_the_recorded_session() -> None:
    recorded = [session("old", A), session("other", digest("/c/b", 5, "bb"))]
    identity = ReplayIdentity.of(recorded, [digest("/tmp/a", 100, "aa")], {})
    assert identity == ReplayIdentity(replaces=frozenset({"old"}))


def test_a_file_that_grew_replaces_the_session_that_read_its_beginning() -> None:
    grown = digest("/c/a.jsonl", 160, "grown")
    assert ReplayIdentity.offsets([session("old", A)], {"/c/a.jsonl": 160}) == {
        "/c/a.jsonl": (100,)
    }
    same_start = ReplayIdentity.of([session("old", A)], [grown], {("/c/a.jsonl", 100): "aa"})
    assert same_start.replaces == {"old"}
    rewritten = ReplayIdentity.of([session("old", A)], [grown], {("/c/a.jsonl", 100): "zz"})
    assert rewritten == ReplayIdentity()


def test_a_session_is_replaced_only_when_every_input_it_read_was_read_again() -> None:
    both = session("both", A, digest("/c/b", 5, "bb"))
    assert ReplayIdentity.of([both], [A, digest("/c/c", 7, "cc")], {}) == ReplayIdentity()
    assert ReplayIdentity.of([both], [A, digest("/c/b", 5, "bb"), digest("/c/c", 7, "cc")], {}) == (
        ReplayIdentity(replaces=frozenset({"both"}))
    )


def test_inputs_a_session_already_counted_with_more_add_nothing() -> None:
    both = session("both", A, digest("/c/b", 5, "bb"))
    assert ReplayIdentity.of([both], [A], {}) == ReplayIdentity(recorded_by="both")


def test_rerunning_an_identified_session_leaves_the_evidence_as_one_run_made_it() -> None:
    run = session("replay-1", A)
    once = merged(None, run, rule("k1", "replay-1", 5))
    again = merged(once, run, rule("k1", "replay-1", 5))
    assert again == once
    assert again.rules[0].flow_count == 5 and again.rules[0].contributing_sessions == ("replay-1",)


def test_a_replaced_session_gives_way_to_the_one_that_read_more() -> None:
    first = merged(None, session("short", A), rule("k1", "short", 5), rule("k2", "short", 2))
    grown = session("long", digest("/c/a.jsonl", 160, "grown"))
    after = merged(first, grown, rule("k1", "long", 8), replaces={"short"})
    assert [s.id for s in after.sessions] == ["long"]
    (k1,) = after.rules  # k2 was only the replaced session's: no flow supports it any more
    assert (k1.key, k1.flow_count, k1.classes) == ("k1", 8, {"policy": 8})
    assert k1.contributing_sessions == ("long",) and k1.by_session == {"long": {"policy": 8}}


def test_counts_without_a_known_share_are_kept_and_live_sessions_add() -> None:
    live = session("live-1", live=True)
    legacy = merged(None, live, rule("k1", "live-1", 4, identified=False))
    assert merged(legacy, live, rule("k1", "live-1", 3, identified=False)).rules[0].flow_count == 7
    run = session("replay-1", A)
    both = merged(legacy, run, rule("k1", "replay-1", 5))
    again = merged(both, run, rule("k1", "replay-1", 5))
    assert again.rules[0].flow_count == 9  # 4 live + 5 replayed, counted once
    assert again.rules[0].contributing_sessions == ("live-1", "replay-1")
    assert again.rules[0].by_session == {"replay-1": {"policy": 5}}


def test_a_rerun_keeps_the_session_in_its_place() -> None:
    run = session("replay-1", A)
    other = session("replay-2", digest("/c/b", 5, "bb"))
    evidence = merged(
        merged(None, run, rule("k1", "replay-1", 5)), other, rule("k1", "replay-2", 1)
    )
    again = merged(evidence, attrs.evolve(run, ended_at="later"), rule("k1", "replay-1", 5))
    assert [s.id for s in again.sessions] == ["replay-1", "replay-2"]
    assert again.rules[0].contributing_sessions == ("replay-1", "replay-2")
    assert again.rules[0].flow_count == 6
