"""Whose a policy is: cpg's own (its managed-by label) or a person's, and which of a person's
policies select the pods a policy of cpg's selects (ARCHITECTURE §D48).

cpg never changes a policy it did not write, so a person's policy and cpg's can both select
one workload; Cilium applies them together (an endpoint's policy is the union of every rule
that selects it). A reviewer needs to see both: the run summary, the plan and the reports
say "also selected by your policy X"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from cpg_core._policy.matcher import policy_name, selecting_specs
from cpg_core._review.availability import workload_subjects
from cpg_core._synthesis.render import MANAGED_BY_LABEL, MANAGED_BY_VALUE


@attrs.frozen(slots=True)
class AlsoSelected:
    """A policy of cpg's whose pods policies of a person's select too."""

    policy: str
    by: tuple[str, ...]


def is_cpgs(policy: Mapping[str, Any]) -> bool:
    """A document cpg wrote: it carries cpg's managed-by label."""
    metadata = policy.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def also_selected(
    policies: Iterable[Mapping[str, Any]], others: Iterable[Mapping[str, Any]] = ()
) -> tuple[AlsoSelected, ...]:
    """Each workload policy of cpg's among ``policies`` (``namespace/name``) with the
    policies of a person's (among ``policies`` and ``others``: today's, say) that select its
    pods too, sorted; policies nobody else selects are left out."""
    documents = list(policies)
    foreign = [p for p in [*documents, *others] if not is_cpgs(p)]
    if not foreign:
        return ()
    out: list[AlsoSelected] = []
    for policy in documents:
        if not is_cpgs(policy):
            continue
        names = {
            policy_name(selected)
            for subject in workload_subjects(policy)
            for selected, _spec, _ns in selecting_specs(foreign, subject)
        }
        if names:
            out.append(AlsoSelected(policy_name(policy), tuple(sorted(names))))
    return tuple(sorted(out, key=lambda a: a.policy))
