"""The replay pipeline: read a capture, aggregate it in cpg_core, write (or diff) policies."""

from __future__ import annotations

import difflib
from pathlib import Path

import attrs

from cpg_core.aggregate import AggregateOptions, Aggregator, PolicyPlan
from cpg_core.errors import PolicyMergeError, SelectorMismatchError
from cpg_core.labels import format_labels
from cpg_core.merge import render_or_merge
from cpg_core.names import policy_name, short_hash
from cpg_io.parallel import aggregate_stream
from cpg_io.sources import ReadStats, open_flow_stream
from cpg_io.store import PolicyStore, StoreError, WriteOutcome


@attrs.define
class FileResult:
    path: Path
    outcome: str  # created | updated | unchanged | would-create | would-update | failed
    plan: PolicyPlan | None = None
    diff: str = ""
    error: str = ""


@attrs.define
class ReplayResult:
    stats: ReadStats
    aggregator: Aggregator
    files: list[FileResult] = attrs.Factory(list)

    def count(self, outcome: str) -> int:
        return sum(1 for f in self.files if f.outcome == outcome)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.outcome == "failed"]


def replay(
    source: str,
    output_dir: Path,
    options: AggregateOptions,
    *,
    dry_run: bool = False,
    diff: bool = True,
    jobs: int = 1,
) -> ReplayResult:
    stats = ReadStats()
    with open_flow_stream(source) as stream:
        aggregator = aggregate_stream(stream, options, stats, jobs)
    result = ReplayResult(stats=stats, aggregator=aggregator)
    store = PolicyStore(output_dir)
    for plan in aggregator.plans():
        result.files.append(write_plan(store, plan, dry_run=dry_run, diff=diff))
    return result


def _prepare(store: PolicyStore, plan: PolicyPlan) -> tuple[Path, str | None, str]:
    """Path, current text and new text of one policy file."""
    path = store.path_for(plan.namespace, plan.workload)
    existing = store.read(path)
    text = render_or_merge(
        existing,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=plan.rules,
        path=str(path),
    )
    return path, existing, text


def write_plan(store: PolicyStore, plan: PolicyPlan, *, dry_run: bool, diff: bool) -> FileResult:
    """Write (or, in a dry run, diff) one policy. A file that already holds a policy for
    other endpoints under the same name is left alone: this policy gets a suffixed name."""
    try:
        try:
            path, existing, text = _prepare(store, plan)
        except SelectorMismatchError:
            stem = f"{plan.workload}-{short_hash(format_labels(plan.target.selector))}"
            plan = attrs.evolve(plan, workload=stem, name=policy_name(stem))
            path, existing, text = _prepare(store, plan)
    except (PolicyMergeError, StoreError) as exc:
        return FileResult(
            path=store.root / plan.namespace / f"{plan.workload}.yaml",
            outcome="failed",
            plan=plan,
            error=str(exc),
        )
    if existing == text:
        return FileResult(path=path, outcome="unchanged", plan=plan)
    if dry_run:
        shown = ""
        if diff:
            shown = "".join(
                difflib.unified_diff(
                    (existing or "").splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=str(path) if existing is not None else "/dev/null",
                    tofile=str(path),
                )
            )
        return FileResult(
            path=path,
            outcome="would-create" if existing is None else "would-update",
            plan=plan,
            diff=shown,
        )
    try:
        outcome = store.write(path, text, existing)
    except StoreError as exc:
        return FileResult(path=path, outcome="failed", plan=plan, error=str(exc))
    return FileResult(path=path, outcome=outcome.value, plan=plan)


__all__ = ["FileResult", "ReplayResult", "WriteOutcome", "replay", "write_plan"]
