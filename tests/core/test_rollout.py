"""A rollout order (§D59): the ready workloads in batches, those nothing depends on first,
workloads a shared policy ties applied together with it, the others waiting with why."""

from __future__ import annotations

import pytest

from cpg_core._review.rollout import RolloutUnit, SharedTie, duration_flag, rollout_order

pytestmark = pytest.mark.unit


def _unit(name: str, *clients: str) -> RolloutUnit:
    namespace, workload = name.split("/")
    return RolloutUnit(
        name=name,
        policies=(f"{namespace}/cpg-{workload}",),
        files=(f"out/{namespace}/{workload}.yaml",),
        clients=frozenset(clients),
    )


def _order(units: list[RolloutUnit], ties=(), waiting=None, **kw):  # type: ignore[no-untyped-def]
    return rollout_order(units, list(ties), waiting or {}, folder="out", shadow_for=6 * 3600, **kw)


def test_the_workloads_nothing_depends_on_come_first_and_the_most_depended_on_last() -> None:
    # web -> api -> db, and web -> cache; the dns every one of them uses
    units = [
        _unit("shop/web"),
        _unit("shop/api", "shop/web"),
        _unit("shop/cache", "shop/web"),
        _unit("shop/db", "shop/api"),
        _unit("kube-system/dns", "shop/web", "shop/api", "shop/db", "shop/cache"),
    ]
    rollout = _order(units)
    assert [b.workloads for b in rollout.batches] == [
        ("shop/web",),
        ("shop/api", "shop/cache"),
        ("shop/db",),
        ("kube-system/dns",),
    ]
    assert [b.depended_on_by for b in rollout.batches] == [0, 1, 1, 4]
    last = rollout.batches[-1]
    assert last.apply == "kubectl apply -f out/kube-system/dns.yaml"
    assert last.shadow == (
        "cpg shadow -d out -n kube-system --only kube-system/cpg-dns --duration 6h"
    )
    assert not rollout.waiting


def test_a_client_without_a_policy_still_counts_and_a_cycle_shares_a_layer() -> None:
    units = [
        _unit("a/left", "a/right", "b/no-policy"),
        _unit("a/right", "a/left"),
        _unit("a/server", "a/left"),
    ]
    rollout = _order(units)
    assert [b.workloads for b in rollout.batches] == [("a/left", "a/right"), ("a/server",)]


def test_waiting_workloads_are_left_out_with_why_and_their_shared_tie_waits_too() -> None:
    units = [_unit("shop/web"), _unit("shop/api"), _unit("shop/cart"), _unit("shop/db")]
    tie = SharedTie(
        "shop/cpg-shared-egress-1", "out/_shared/x.yaml", frozenset({"shop/api", "shop/cart"})
    )
    rollout = _order(units, [tie], {"shop/cart": "keep learning: observed for 3 m (needs 1 d)"})
    assert [b.workloads for b in rollout.batches] == [("shop/db", "shop/web")]
    assert {w.workload: w.why for w in rollout.waiting} == {
        "shop/api": "tied by shared policies to shop/cart, which waits",
        "shop/cart": "keep learning: observed for 3 m (needs 1 d)",
    }


def test_a_shared_policy_goes_with_all_of_its_members_and_is_never_split() -> None:
    units = [_unit(f"ns/w{i}") for i in range(5)]
    tie = SharedTie("ns/cpg-shared", "out/_shared/s.yaml", frozenset({"ns/w1", "ns/w3", "ns/w4"}))
    rollout = _order(units, [tie], batch_size=2)
    batches = [b.workloads for b in rollout.batches]
    assert ("ns/w1", "ns/w3", "ns/w4") in batches  # one batch, over the size: never split
    tied = next(b for b in rollout.batches if "ns/w1" in b.workloads)
    assert "out/_shared/s.yaml" in tied.files and "ns/cpg-shared" in tied.policies
    assert sorted(w for b in batches for w in b) == [f"ns/w{i}" for i in range(5)]
    assert all(len(b) <= 2 for b in batches if "ns/w1" not in b)


def test_a_long_chain_is_ordered_without_recursion() -> None:
    names = [f"ns/w{i:04d}" for i in range(3000)]
    units = [_unit(names[0])] + [_unit(n, names[i]) for i, n in enumerate(names[1:])]
    rollout = _order(units)
    assert [b.workloads[0] for b in rollout.batches][:3] == names[:3]
    assert len(rollout.batches) == 3000


def test_paths_are_quoted_in_the_commands_and_durations_read_as_flags() -> None:
    unit = RolloutUnit("a b/w", ("a b/cpg-w",), ("my out/a b/w.yaml",))
    batch = rollout_order([unit], [], {}, folder="my out", shadow_for=90 * 60).batches[0]
    assert batch.apply == "kubectl apply -f 'my out/a b/w.yaml'"
    assert batch.shadow.startswith("cpg shadow -d 'my out' -n 'a b' --only 'a b/cpg-w'")
    assert batch.shadow.endswith("--duration 90m")
    assert [duration_flag(s) for s in (45, 600, 21_600, 86_400, 1.5)] == [
        "45s",
        "10m",
        "6h",
        "1d",
        "1.5s",
    ]
