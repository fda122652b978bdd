"""The replay use case: a capture in, policies, evidence and a verdict out.

:func:`replay` takes the typed request both roots build and does everything a replay means:
it resolves a relative time window against the capture, chooses the engine, reads and
aggregates, holds back rare entries, stamps the session, writes (or diffs), verifies when
asked, and says which exit code the run earned. :func:`replay_capture` is the same without
the request (options already resolved), for tests and callers that hold their own."""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import attrs

from cpg_core import (
    AggregateOptions,
    Aggregator,
    CpgError,
    InputDigest,
    ReplayIdentity,
    RunRequest,
    SessionInfo,
    SessionSource,
    held_back,
    hold_back,
)
from cpg_core.readiness import ReadinessRules, capture_profile
from cpg_core.reading import ReadStats
from cpg_io.declarations import read_catalogue, read_declarations, with_catalogue
from cpg_io.engines import Engine, InProcess, ReadJob, choose_engine
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.identities import read_identities
from cpg_io.kustomize import KUSTOMIZATION, update_kustomizations
from cpg_io.policy_files import load_policies
from cpg_io.progress import SILENT, ReplayWatcher, Reported
from cpg_io.remote import is_url
from cpg_io.runs._identity import identify, input_sizes
from cpg_io.runs._output import EvidenceSettings, FileResult, RunResult, write_outputs
from cpg_io.runs._session import new_session_id, rfc3339, run_health, utc_now
from cpg_io.runs._verify import verify_capture
from cpg_io.sources import check_readable, describe_source, expand_inputs, newest_time
from cpg_io.store import check_folder
from cpg_io.version import cpg_version

log = logging.getLogger("cpg.replay")

EXIT_OK, EXIT_FAILED, EXIT_CHECK = 0, 1, 3
"""The exit codes a run can earn (2, a usage error, is the roots' own)."""


def evidence_settings(
    request: RunRequest, output_dir: Path, evidence_dir: Path | None
) -> EvidenceSettings | None:
    """Where and how much evidence the run records (None: none)."""
    policy = request.evidence
    if not policy.record:
        return None
    settings = EvidenceSettings(
        root=evidence_dir or default_evidence_root(output_dir),
        max_samples=policy.samples,
        max_sessions=policy.sessions,
        redact=policy.redact,
    )
    # A folder a newer cpg wrote is refused before any flow is read (EvidenceError).
    EvidenceStore(settings.root, output_dir).check_format()
    return settings


def replay(
    request: RunRequest,
    inputs: Sequence[str],
    output_dir: Path,
    *,
    evidence_dir: Path | None = None,
    engine: Engine | None = None,
    watch: ReplayWatcher = SILENT,
    cancel: threading.Event | None = None,
    clock: Callable[[], datetime] = utc_now,
    session_id: str | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
) -> RunResult:
    """Replay ``inputs`` (files, folders, globs, URLs, ``-``) into ``output_dir`` as
    ``request`` says. ``engine`` overrides the request's choice (cpg-mcp replays in process;
    tests read from memory). IoError when the capture or the folders cannot be used."""
    files = expand_inputs(list(inputs))
    since, until = "", ""
    if request.window.bounded:
        reference = newest_time(files) if request.window.relative else None
        since, until = request.window.resolve(reference)
    book = read_identities(request.identities, kubeconfig=kubeconfig, context=context)
    declared = read_declarations(request.declarations, kubeconfig=kubeconfig, context=context)
    result = replay_capture(
        files,
        output_dir,
        attrs.evolve(
            with_catalogue(request.aggregate_options(since, until), request.capture.catalogue),
            identities=book,
            declarations=declared,
        ),
        engine=engine or choose_engine(request.engine),
        evidence=None if request.dry_run else evidence_settings(request, output_dir, evidence_dir),
        dry_run=request.dry_run,
        diff=request.diff,
        min_flows=request.min_flows,
        share=request.shared,
        baseline=request.baseline_format == "kcnp",
        kustomize=request.kustomize,
        max_malformed=request.max_malformed,
        watch=watch,
        cancel=cancel,
        clock=clock,
        session_id=session_id,
        readiness=request.readiness,
        only_ready=request.only_ready,
    )
    if request.verify and not run_failed(result):
        try:
            result.verify = verify_capture(
                files,
                load_policies(output_dir),
                request.capture.decide_options(),
                window=(since, until),
                identities=book,
                include_system=request.capture.scope.include_system,
                catalogue=read_catalogue(request.capture.catalogue),
            ).report
        except CpgError as exc:
            result.verify_error = str(exc)
    return result


def run_failed(result: RunResult) -> bool:
    """A file or its evidence could not be written, or the input ended early."""
    return bool(result.failed or result.evidence_errors or result.stats.truncated)


def exit_code(result: RunResult, request: RunRequest, *, stream_error: bool = False) -> int:
    """1 when something failed; 3 when a check the user asked for tripped (infra drops with
    fail_on_infra_drops, a verify that did not pass, a dry run with exit_code that would
    change files); else 0."""
    if run_failed(result) or result.verify_error or stream_error:
        return EXIT_FAILED
    if request.fail_on_infra_drops and result.aggregator.infra_drops:
        return EXIT_CHECK
    verified = result.verify
    if verified is not None and verified.can_judge and not verified.passed:
        return EXIT_CHECK
    if request.exit_code and any(
        f.outcome in ("would-create", "would-update") for f in result.files
    ):
        return EXIT_CHECK
    return EXIT_OK


def _session_file(path: str, redact: bool = False) -> str:
    """How the session records an input: a file by the path the user gave (relative when it
    was: evidence committed to Git names no one's home folder), only its name under
    ``--evidence-redact``; a URL as shown (without credentials)."""
    if path == "-":
        return ""
    if is_url(path):
        return describe_source(path)
    return os.path.basename(path) if redact else os.path.normpath(path)


def _identifying(
    sizes: dict[str, int] | None, evidence: EvidenceSettings | None, output_dir: Path
) -> Callable[[], tuple[tuple[InputDigest, ...], ReplayIdentity]]:
    """Start identifying the inputs (their digests: one more read of each file) in a thread,
    beside the aggregation, and return how to wait for the answer."""
    if not sizes or evidence is None:
        return lambda: ((), ReplayIdentity())
    store = EvidenceStore(evidence.root, output_dir)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cpg-identify")
    future = pool.submit(identify, sizes, store)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return future.result


def _stamp_session(
    result: RunResult,
    evidence: EvidenceSettings,
    identified: tuple[tuple[InputDigest, ...], ReplayIdentity],
    session_id: str | None,
    started: datetime,
    clock: Callable[[], datetime],
) -> EvidenceSettings | None:
    """The run's evidence session (identified by its inputs when they are local files,
    §D24) on ``result``, and the evidence settings to write with: None when a recorded
    session already counted every input (nothing new to count)."""
    inputs, result.identity = identified
    inputs = tuple(attrs.evolve(i, name=_session_file(i.name, evidence.redact)) for i in inputs)
    if inputs:
        session_id = session_id or ReplayIdentity.session_id(inputs)
    aggregator = result.aggregator
    total = aggregator.total_flows
    result.session = SessionInfo(
        id=session_id or new_session_id(started),
        started_at=rfc3339(started),
        ended_at=rfc3339(clock()),
        cpg_version=cpg_version(),
        source=SessionSource(
            type="replay",
            file=", ".join(_session_file(f, evidence.redact) for f in result.inputs),
        ),
        flows_ingested=total,
        flows_unhandled=total - aggregator.rule_flows,
        inputs=inputs,
    )
    if result.identity.recorded_by:
        return None
    return attrs.evolve(evidence, replaces=result.identity.replaces)


def _read_capture(
    engine: Engine,
    files: list[str],
    options: AggregateOptions,
    watch: ReplayWatcher,
    cancel: threading.Event | None,
    max_malformed: float,
) -> tuple[Aggregator, ReadStats]:
    """The capture read by ``engine``; UnreadableInput when it holds no Hubble record or
    too many malformed lines."""
    stats = ReadStats()
    aggregator, head = engine.aggregate(
        ReadJob(tuple(files), options, stats, Reported(watch), cancel)
    )
    label = describe_source(files[0]) if len(files) == 1 else f"{len(files)} input files"
    check_readable(label, stats, head, max_malformed)
    return aggregator, stats


def replay_capture(
    files: Sequence[str],
    output_dir: Path,
    options: AggregateOptions,
    *,
    engine: Engine | None = None,
    evidence: EvidenceSettings | None = None,
    dry_run: bool = False,
    diff: bool = True,
    min_flows: int = 1,
    share: int = 0,
    baseline: bool = False,
    kustomize: bool = False,
    max_malformed: float = 100.0,
    watch: ReplayWatcher = SILENT,
    cancel: threading.Event | None = None,
    clock: Callable[[], datetime] = utc_now,
    session_id: str | None = None,
    readiness: ReadinessRules | None = None,
    only_ready: bool = False,
) -> RunResult:
    """Replay the (already expanded) ``files`` into ``output_dir`` and its evidence, or diff
    them in a dry run. Setting ``cancel`` stops the run (Cancelled) at the next block or
    before anything is renamed into place; ``watch`` hears how far it got. An input without a
    single Hubble record, or with more than ``max_malformed`` percent of its lines
    malformed, is an UnreadableInput and nothing is written."""
    engine = engine or InProcess()
    started = clock()
    tick = time.perf_counter()
    # Fail before reading the capture when the output cannot be written.
    if not dry_run or output_dir.exists():
        check_folder(output_dir, "policies", create=False)
    if evidence is not None and not dry_run:
        check_folder(evidence.root, "evidence", create=False)
    files = list(files)
    sizes = input_sizes(files) if evidence is not None and not dry_run else None
    identified = _identifying(sizes, evidence, output_dir)
    aggregator, stats = _read_capture(engine, files, options, watch, cancel, max_malformed)
    result = RunResult(stats=stats, aggregator=aggregator, inputs=files)
    if stats.lines_read == stats.blank_lines:  # an empty input: nothing to write
        result.health = run_health(aggregator, stats, started, clock())
        return result
    log.info(
        "read %d lines, %d flows in %.2f s (%d jobs)",
        stats.lines_read,
        aggregator.total_flows,
        time.perf_counter() - tick,
        engine.jobs,
    )
    tick = time.perf_counter()
    # The aggregate is large and acyclic: keep the cycle collector from rescanning it while
    # the files are rendered.
    gc.freeze()
    if evidence is not None and not dry_run:
        evidence = _stamp_session(result, evidence, identified(), session_id, started, clock)
    plans = aggregator.plans()
    result.health = run_health(aggregator, stats, started, clock())
    if min_flows > 1:
        plans, held = hold_back(plans, min_flows, max_samples=options.max_samples)
        result.held_back = held_back(held)
        result.min_flows = min_flows
    result.capture = capture_profile(
        aggregator.window(),
        aggregator.decisions,
        {p.target: p.attribution for p in plans},
        aggregator.minutes,
    )
    watch.writing(len(plans))
    written = write_outputs(
        plans,
        output_dir,
        evidence=evidence if not dry_run else None,
        session=result.session,
        health=result.health,
        dry_run=dry_run,
        diff=diff,
        jobs=engine.jobs,
        cancel=cancel,
        share=share,
        baseline=baseline,
        readiness=readiness,
        capture=result.capture,
        only_ready=only_ready,
    )
    result.profiles = written.profiles
    result.capture = attrs.evolve(result.capture, nodes=tuple(sorted(written.nodes)))
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


__all__ = [
    "FileResult",
    "RunResult",
    "evidence_settings",
    "exit_code",
    "replay",
    "replay_capture",
    "run_failed",
]
