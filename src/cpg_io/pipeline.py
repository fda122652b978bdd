"""The replay pipeline: read a capture, aggregate it in cpg_core, write (or diff) policies."""

from __future__ import annotations

import contextlib
import difflib
import gc
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from cpg_core import (
    AggregateOptions,
    Aggregator,
    ClusterHealth,
    EvidenceError,
    HeldBack,
    PolicyMergeError,
    PolicyPlan,
    SelectorMismatchError,
    SessionInfo,
    SessionSource,
    held_back,
    hold_back,
    plan_evidence,
    policies_equivalent,
    redact_ips,
    render_or_merge,
)
from cpg_core.cilium import load_one
from cpg_io.errors import Cancelled, StoreError
from cpg_io.evidence_store import EvidenceStore
from cpg_io.kustomize import KUSTOMIZATION, update_kustomizations
from cpg_io.parallel import (
    aggregate_file,
    aggregate_files,
    aggregate_stream,
    map_forked,
)
from cpg_io.progress import SILENT, ReplayWatcher, Reported
from cpg_io.remote import is_url
from cpg_io.sources import (
    SNIFF_BYTES,
    ReadStats,
    check_readable,
    describe_source,
    expand_inputs,
    input_size,
    is_gzip,
    is_regular_file,
    merge_file_stats,
    open_flow_stream,
    peek,
    source_size,
)
from cpg_io.store import (
    PolicyStore,
    StagedWrites,
    WriteOutcome,
    check_folder,
    folder_lock,
    remove_stale_temp_files,
)
from cpg_io.version import cpg_version

log = logging.getLogger("cpg.replay")


@attrs.define
class FileResult:
    path: Path
    outcome: str  # created | updated | unchanged | would-create | would-update | failed
    plan: PolicyPlan | None = None
    diff: str = ""
    error: str = ""


@attrs.frozen
class EvidenceSettings:
    root: Path
    max_samples: int = 10
    max_sessions: int = 10
    redact: bool = False
    """Write no IP address of a sample flow (evidence committed to a public repository)."""


@attrs.define
class ReplayResult:
    stats: ReadStats
    aggregator: Aggregator
    files: list[FileResult] = attrs.Factory(list)
    session: SessionInfo | None = None
    evidence_dir: Path | None = None
    """Where this output dir's evidence lives (None when evidence was not written)."""
    evidence_errors: list[str] = attrs.Factory(list)
    health: ClusterHealth | None = None
    """The cluster-health document of this run (also when it was not written)."""
    health_path: Path | None = None
    """Where cluster-health.json was written (None when it was not)."""
    inputs: list[str] = attrs.Factory(list)
    """The files read (folders and patterns expanded)."""
    kustomized: bool = False
    """The output folder has kustomization files (--kustomize)."""
    held_back: list[HeldBack] = attrs.Factory(list)
    """Allow entries seen fewer than --min-flows times: reported, not written."""
    min_flows: int = 1

    def describe_inputs(self) -> str:
        if len(self.inputs) == 1:
            return describe_source(self.inputs[0])
        shown = ", ".join(self.inputs[:3]) + (", …" if len(self.inputs) > 3 else "")
        return f"{len(self.inputs)} files ({shown})"

    def count(self, outcome: str) -> int:
        return sum(1 for f in self.files if f.outcome == outcome)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.outcome == "failed"]


def _read_one(
    source: str,
    options: AggregateOptions,
    stats: ReadStats,
    jobs: int,
    cancel: threading.Event | None,
    reported: Reported,
    watch: ReplayWatcher,
) -> tuple[Aggregator, bytes]:
    with open_flow_stream(source) as stream:
        # Workers read byte ranges of their own only from a regular file (a FIFO or a device
        # can be read once, by this process).
        plain_file = source != "-" and not is_gzip(stream) and is_regular_file(stream)
        head = peek(stream, SNIFF_BYTES)
        size, position = input_size(stream)
        watch.reading(size)
        found = (
            aggregate_file(source, options, stats, jobs, cancel=cancel, watch=reported)
            if plain_file and jobs > 1
            else None
        )
        aggregator = found or aggregate_stream(
            stream, options, stats, jobs, cancel=cancel, watch=reported, position=position
        )
    return aggregator, head


def _read_many(
    files: list[str],
    options: AggregateOptions,
    stats: ReadStats,
    jobs: int,
    cancel: threading.Event | None,
    reported: Reported,
    watch: ReplayWatcher,
) -> tuple[Aggregator, bytes]:
    """Several files as one capture (their concatenation): by file-level workers with
    ``jobs`` > 1, else one after the other. Malformed lines are named with their file."""
    head = _head(files)
    watch.reading(sum(source_size(path) for path in files))
    if jobs > 1:
        aggregator, per_file = aggregate_files(files, options, jobs, cancel, reported)
    else:
        aggregator, per_file = Aggregator(options), []
        base_position = base_lines = 0
        for path in files:
            part = ReadStats()
            offset = _Offset(reported, path, base_position, base_lines)
            with open_flow_stream(path) as stream:
                _size, position = input_size(stream)
                aggregator.absorb(
                    aggregate_stream(
                        stream, options, part, 1, cancel=cancel, watch=offset, position=position
                    ).state()
                )
            per_file.append(part)
            base_position += source_size(path)
            base_lines += part.lines_read
    for path, part in zip(files, per_file, strict=True):
        merge_file_stats(stats, part, describe_source(path))
    return aggregator, head


class _Offset(Reported):
    """What reading one file of several tells: positions counted from the first file's
    start, malformed lines named with their file."""

    def __init__(self, inner: Reported, path: str, position: int, lines: int) -> None:
        super().__init__(inner.watcher)
        self.inner, self.path, self.position, self.lines = inner, path, position, lines

    def read(self, position: int, lines: int) -> None:
        self.inner.read(self.position + position, self.lines + lines)

    def malformed(self, line: int, why: str, source: str | None = None) -> None:
        self.inner.malformed(line, why, source or self.path)


def _head(files: Sequence[str]) -> bytes:
    """The first bytes of the first non-empty input (for saying what it looks like)."""
    for path in files:
        with open_flow_stream(path) as stream:
            head = peek(stream, SNIFF_BYTES)
        if head.strip():
            return head
    return b""


def _session_file(path: str) -> str:
    """How the session records an input: a file by its absolute path, a URL as shown."""
    if path == "-":
        return ""
    return describe_source(path) if is_url(path) else os.path.abspath(path)


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_session_id(started: datetime) -> str:
    """``<UTC start>-<4 random hex>``: sortable, and unique across concurrent runs."""
    return f"{started.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}-{secrets.token_hex(2)}"


def replay(
    source: str | Sequence[str],
    output_dir: Path,
    options: AggregateOptions,
    *,
    dry_run: bool = False,
    diff: bool = True,
    jobs: int = 1,
    evidence: EvidenceSettings | None = None,
    clock: Callable[[], datetime] = utc_now,
    session_id: str | None = None,
    cancel: threading.Event | None = None,
    watch: ReplayWatcher = SILENT,
    max_malformed: float = 100.0,
    min_flows: int = 1,
    kustomize: bool = False,
    scheduler: str | None = None,
    part_bytes: int | None = None,
) -> ReplayResult:
    """Replay one capture into ``output_dir`` (and its evidence), or diff it in a dry run.
    With a ``scheduler`` (a Dask scheduler's address, or ``local:N``), the capture is read
    and aggregated on that Dask cluster instead of in local processes, plain objects in byte
    ranges of ``part_bytes`` (64 MiB by default).
    Setting ``cancel`` stops the run (Cancelled) at the next block or before anything is
    renamed into place. ``watch`` hears how far it got. An input without a single Hubble
    record, or with more than ``max_malformed`` percent of its lines malformed, is an
    UnreadableInput and nothing is written."""
    started = clock()
    tick = time.perf_counter()
    stats = ReadStats()
    # Fail before reading the capture when the output cannot be written.
    if not dry_run or output_dir.exists():
        check_folder(output_dir, "policies", create=False)
    if evidence is not None and not dry_run:
        check_folder(evidence.root, "evidence", create=False)
    files = expand_inputs([source] if isinstance(source, str) else list(source))
    reported = Reported(watch)
    if scheduler is not None:
        from cpg_io.dask_engine import aggregate_on_dask

        aggregator = aggregate_on_dask(
            files, options, stats, scheduler, cancel=cancel, watch=reported, range_bytes=part_bytes
        )
        for line, why in stats.malformed_examples:
            reported.malformed(line, why)
        head = _head(files) if stats.lines_read - stats.blank_lines <= stats.malformed else b""
    elif len(files) == 1:
        aggregator, head = _read_one(files[0], options, stats, jobs, cancel, reported, watch)
        for line, why in stats.malformed_examples:  # those a worker kept to the end
            reported.malformed(line, why)
    else:
        aggregator, head = _read_many(files, options, stats, jobs, cancel, reported, watch)
    label = describe_source(files[0]) if len(files) == 1 else f"{len(files)} input files"
    check_readable(label, stats, head, max_malformed)
    result = ReplayResult(stats=stats, aggregator=aggregator, inputs=files)
    if stats.lines_read == stats.blank_lines:  # an empty input: nothing to write
        result.health = run_health(aggregator, stats, started, clock())
        return result
    log.info(
        "read %d lines, %d flows in %.2f s (%d jobs)",
        stats.lines_read,
        aggregator.total_flows,
        time.perf_counter() - tick,
        jobs,
    )
    tick = time.perf_counter()
    # The aggregate is large and acyclic: keep the cycle collector from rescanning it while
    # the files are rendered.
    gc.freeze()
    if evidence is not None and not dry_run:
        total = aggregator.total_flows
        result.session = SessionInfo(
            id=session_id or new_session_id(started),
            started_at=rfc3339(started),
            ended_at=rfc3339(clock()),
            cpg_version=cpg_version(),
            source=SessionSource(
                type="replay",
                file=", ".join(_session_file(f) for f in files),
            ),
            flows_ingested=total,
            flows_unhandled=total - aggregator.rule_flows,
        )
    result.health = run_health(aggregator, stats, started, clock())
    plans = aggregator.plans()
    if min_flows > 1:
        plans, held = hold_back(plans, min_flows, max_samples=options.max_samples)
        result.held_back = held_back(held)
        result.min_flows = min_flows
    watch.writing(len(plans))
    written = write_outputs(
        plans,
        output_dir,
        evidence=evidence if not dry_run else None,
        session=result.session,
        health=result.health,
        dry_run=dry_run,
        diff=diff,
        jobs=jobs,
        cancel=cancel,
    )
    result.files = written.files
    result.evidence_errors = written.evidence_errors
    result.evidence_dir = written.evidence_dir
    result.health_path = written.health_path
    if kustomize and not dry_run and output_dir.is_dir():
        update_kustomizations(output_dir)
    result.kustomized = kustomize or (output_dir / KUSTOMIZATION).exists()
    log.info(
        "wrote %d policies and their evidence in %.2f s", len(plans), time.perf_counter() - tick
    )
    return result


def run_health(
    aggregator: Aggregator, stats: ReadStats, started: datetime, ended: datetime
) -> ClusterHealth:
    return aggregator.health(
        started=rfc3339(started), ended=rfc3339(ended), lost_events=stats.lost_events
    )


@attrs.define
class Written:
    files: list[FileResult] = attrs.Factory(list)
    evidence_errors: list[str] = attrs.Factory(list)
    evidence_dir: Path | None = None
    health_path: Path | None = None


def write_outputs(
    plans: list[PolicyPlan],
    output_dir: Path,
    *,
    evidence: EvidenceSettings | None,
    session: SessionInfo | None,
    health: ClusterHealth | None,
    dry_run: bool,
    diff: bool,
    jobs: int,
    in_cluster: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    cancel: threading.Event | None = None,
    evidence_only: bool = False,
) -> Written:
    """Write (or diff) the policies, their evidence and cluster-health.json as one batch
    (none of it when ``cancel`` is set before the batch commits). With ``evidence_only`` the
    policy files are neither read nor written: their rules did not change."""
    result = Written()
    batch = StagedWrites()
    evidence_store: EvidenceStore | None = None
    if evidence is not None and session is not None and not dry_run:
        evidence_store = EvidenceStore(evidence.root, output_dir, batch)
        result.evidence_dir = evidence_store.base
    store = PolicyStore(output_dir, batch)

    def one(plan: PolicyPlan) -> _Outcome:
        try:
            if evidence_only:
                path = store.path_for(plan.namespace, plan.workload)
                written = FileResult(path=path, outcome="unchanged", plan=plan)
            else:
                written = write_plan(store, plan, dry_run=dry_run, diff=diff, in_cluster=in_cluster)
            error = None
            if (
                evidence_store is not None
                and written.plan is not None
                and written.outcome != "failed"
            ):
                assert evidence is not None and session is not None
                error = write_evidence(evidence_store, written.plan, session, evidence)
        except BaseException:
            StagedWrites.discard(batch.take())  # nothing this plan staged outlives it
            raise
        final = written.plan
        return _Outcome(
            file=attrs.evolve(written, plan=None),  # the parent has the plan already
            evidence_error=error,
            staged=batch.take(),
            name=(final.workload, final.name) if final is not None else None,
        )

    with contextlib.ExitStack() as held:
        if not dry_run:
            # One run at a time reads, merges and writes these folders; temp files an earlier,
            # killed run left are removed first.
            held.enter_context(folder_lock(output_dir, "policies"))
            remove_stale_temp_files(output_dir)
            if evidence_store is not None:
                held.enter_context(folder_lock(evidence_store.base, "evidence"))
                remove_stale_temp_files(evidence_store.base)
        # Policies and their evidence are rendered and staged in parallel, then made durable
        # and renamed into place as one batch (see StagedWrites).
        try:
            outcomes = map_forked(one, plans, jobs)
            for outcome in outcomes:
                batch.adopt(outcome.staged)
            if evidence_store is not None and health is not None and health.has_anything_to_report:
                try:
                    report: ClusterHealth = health
                    if evidence is not None and evidence.redact:
                        report, _removed = redact_ips(report)
                    result.health_path = evidence_store.write_health(report)
                except StoreError as exc:  # the policies and their evidence still land
                    result.evidence_errors.append(str(exc))
            if cancel is not None and cancel.is_set():
                raise Cancelled("the run was cancelled before its files were written")
            batch.commit()
        except BaseException:
            batch.abort()
            raise
    for plan, outcome in zip(plans, outcomes, strict=True):
        if outcome.name is not None:
            workload, name = outcome.name
            outcome.file.plan = attrs.evolve(plan, workload=workload, name=name)
        result.files.append(outcome.file)
        if outcome.evidence_error is not None:
            result.evidence_errors.append(outcome.evidence_error)
    return result


@attrs.define
class _Outcome:
    file: FileResult
    evidence_error: str | None
    staged: list[tuple[str, Path]]
    name: tuple[str, str] | None
    """(workload, policy name) the plan was finally written under."""


def write_evidence(
    store: EvidenceStore, plan: PolicyPlan, session: SessionInfo, settings: EvidenceSettings
) -> str | None:
    """Fold this session's attribution into one policy's evidence; the error, if any."""
    try:
        doc = plan_evidence(
            plan,
            session,
            store.read(plan.namespace, plan.workload),
            max_samples=settings.max_samples,
            max_sessions=settings.max_sessions,
        )
        if settings.redact:
            doc, _removed = redact_ips(doc)
        store.write(plan.namespace, plan.workload, doc)
    except (EvidenceError, StoreError) as exc:
        return str(exc)
    return None


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


def write_plan(
    store: PolicyStore,
    plan: PolicyPlan,
    *,
    dry_run: bool,
    diff: bool,
    in_cluster: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> FileResult:
    """Write (or, in a dry run, diff) one policy. A file that already holds a policy for
    other endpoints under the same name is left alone: this policy gets a suffixed name. With
    ``in_cluster`` (namespace, name) -> policy, a policy the cluster already has an equivalent
    of is not written."""
    try:
        try:
            path, existing, text = _prepare(store, plan)
        except SelectorMismatchError:
            plan = plan.with_selector_suffix()
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
    live = (in_cluster or {}).get((plan.namespace, plan.name))
    if live is not None and policies_equivalent(load_one(text, str(path)), live):
        return FileResult(path=path, outcome="in-cluster", plan=plan)
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


__all__ = ["Cancelled", "FileResult", "ReplayResult", "WriteOutcome", "replay", "write_plan"]
