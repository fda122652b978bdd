"""Which workloads a proposal is safe to merge for (§D59): those whose evidence says ready to
enforce and for which nothing that works today would break (when a capture with every
verdict was given to check). The others are named with why, so a reviewer can merge the
pull request in part, or wait."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cpg_core._reports.markdown import _cell
from cpg_core._reports.rollout import waiting_reasons
from cpg_core._review.plan_documents import Plan
from cpg_core._review.readiness import WorkloadProfile

_SHOWN = 20


@attrs.frozen(slots=True)
class MergeWait:
    workload: str
    why: str


@attrs.frozen(slots=True)
class MergeSafety:
    safe: tuple[str, ...]
    """The workloads it is safe to merge for."""
    waiting: tuple[MergeWait, ...]
    checked: bool
    """Whether a capture with every verdict was judged (else only readiness stands behind
    ``safe``)."""

    @property
    def workloads(self) -> int:
        return len(self.safe) + len(self.waiting)

    def headline(self) -> str:
        """``Safe to merge for 3 of 5 workloads`` (with what it stands on)."""
        said = f"Safe to merge for {len(self.safe)} of {self.workloads} workloads"
        if not self.checked:
            said += (
                " (ready to enforce by their evidence; not checked for what would break: give "
                "a capture with every verdict, the capture option)"
            )
        return said

    def lines(self) -> list[str]:
        """What the command prints."""
        out = [self.headline() + (":" if self.safe else "")]
        out += [f"  safe      {name}" for name in self.safe[:_SHOWN]]
        if len(self.safe) > _SHOWN:
            out.append(f"  … and {len(self.safe) - _SHOWN} more (-o json lists all)")
        out += [f"  not yet   {w.workload}: {w.why}" for w in self.waiting[:_SHOWN]]
        if len(self.waiting) > _SHOWN:
            out.append(f"  … and {len(self.waiting) - _SHOWN} more not yet (-o json lists all)")
        return out

    def markdown(self) -> list[str]:
        """The section at the top of the pull request's body."""
        out = ["## Safe to merge", "", self.headline() + ".", ""]
        if not self.workloads:
            return out
        out += ["| workload | safe to merge |", "|---|---|"]
        out += [f"| {_cell(name)} | yes |" for name in self.safe]
        out += [f"| {_cell(w.workload)} | not yet: {_cell(w.why)} |" for w in self.waiting]
        out.append("")
        if self.waiting:
            out += [
                "Merge only the ready ones: run cpg replay again with its only-ready option "
                "and propose that, or drop the other files from the branch.",
                "",
            ]
        return out


def merge_safety(
    workloads: Sequence[str], profiles: Sequence[WorkloadProfile], plan: Plan | None = None
) -> MergeSafety:
    """The verdict for each of the proposal's ``workloads`` (``namespace/workload``), from
    their ``profiles`` and, when a capture was judged, the ``plan``'s would-break traffic."""
    checked = plan is not None and plan.can_judge and not plan.unjudged_flows
    waiting = waiting_reasons(workloads, profiles, plan.would_break if plan is not None else ())
    names = sorted(set(workloads))
    return MergeSafety(
        safe=tuple(name for name in names if name not in waiting),
        waiting=tuple(MergeWait(name, waiting[name]) for name in names if name in waiting),
        checked=checked,
    )
