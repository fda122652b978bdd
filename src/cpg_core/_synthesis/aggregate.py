"""The accumulator a run feeds flows into: decisions, counts, findings and rule atoms.

Pure and incremental: ``add`` one flow at a time, read the totals and the policy plans at
any point. Order of flows never changes the result. One concern per module: the shared
fields and values (``_aggregate_base``), pending folds (``_aggregate_folds``), counting
(``_aggregate_counting``), hand-over and merge (``_aggregate_handover``), draining
(``_aggregate_drain``) and the plans (``_aggregate_plans``); :class:`Aggregator` is all of
them.
"""

from __future__ import annotations

from cpg_core._synthesis._aggregate_base import (
    NAMED_CIDR,
    OTHER_END,
    AggregateOptions,
    AggregateState,
    AtomKey,
    DrainedTotals,
    FindingKey,
    PolicyPlan,
)
from cpg_core._synthesis.aggregate_plans import (
    KUBE_DNS,
    HeldBack,
    HeldStats,
    _Plans,
    held_back,
    hold_back,
    name_world_peers,
    plan_policies,
)


class Aggregator(_Plans):
    """Feeds flows through decide → resolve and keeps what every report needs.

    ``add`` has a fast path for the common candidate (a DROPPED POLICY_DENIED flow between
    known endpoints); anything else goes through :func:`decide` and :meth:`Resolver.resolve`,
    which define the behaviour (a test checks both paths agree)."""


__all__ = [
    "KUBE_DNS",
    "NAMED_CIDR",
    "OTHER_END",
    "AggregateOptions",
    "AggregateState",
    "Aggregator",
    "AtomKey",
    "DrainedTotals",
    "FindingKey",
    "HeldBack",
    "HeldStats",
    "PolicyPlan",
    "held_back",
    "hold_back",
    "name_world_peers",
    "plan_policies",
]
