"""Live capture: stream flows from Hubble Relay into the core aggregator and write policies and
evidence every flush interval, until a signal, ``--duration`` or a relay that stays gone."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
from prometheus_client.core import Metric

from cpg_core import (
    AggregateOptions,
    Aggregator,
    Atom,
    ClusterHealth,
    CpgError,
    Decision,
    HeldStats,
    Message,
    PolicyPlan,
    PolicyTarget,
    RunRequest,
    SessionInfo,
    SessionSource,
    Setting,
    held_back,
    hold_back,
)
from cpg_core.declarations import Declarations
from cpg_core.identities import IdentityBook
from cpg_core.readiness import (
    ReadinessRules,
    WorkloadProfile,
    capture_profile,
    rule_records,
    workload_profile,
)
from cpg_core.reports import WaitingPolicy
from cpg_core.sharing import Rule, joined_rules
from cpg_io.declarations import read_declarations, with_catalogue
from cpg_io.evidence_store import EvidenceStore
from cpg_io.hubble import TLSSettings
from cpg_io.identities import identity_refresh, read_identities
from cpg_io.kube import RelayConnection
from cpg_io.kustomize import update_kustomizations
from cpg_io.metrics import failure_reason, family
from cpg_io.relay_receiver import StreamSettings
from cpg_io.runs._access import RelayAccess, open_relay
from cpg_io.runs._output import EvidenceSettings, FileResult, RunResult, Written, write_outputs
from cpg_io.runs._relay import RelayReader
from cpg_io.runs._replay import evidence_settings
from cpg_io.runs._session import new_session_id, rfc3339, run_health, utc_now
from cpg_io.sources import ReadStats
from cpg_io.store import PolicyStore, check_writable
from cpg_io.version import cpg_version

log = logging.getLogger("cpg.live")

_DRAIN_BATCH = 50
"""Policies drained per hold of the receive lock."""
_HAND_OVER = 0.001
"""Seconds the flush waits between two holds of the lock (a lock is not fair: without a
pause the flush would take it again before the waiting stream wakes up)."""
_FOLD_SLICE = 1000
"""Counts folded into their allow entries per hold of the receive lock (~5 ms)."""

_RANK = {
    "created": 3,
    "would-create": 3,
    "updated": 2,
    "would-update": 2,
    "failed": 4,
    "unchanged": 1,
}


@attrs.frozen
class LiveSettings:
    server: str
    output_dir: Path
    options: AggregateOptions
    namespaces: tuple[str, ...] = ()
    tls: TLSSettings = attrs.Factory(TLSSettings)
    timeout: float = 10.0
    flush_interval: float = 5.0
    duration: float | None = None
    """Seconds to run once the relay answered (``--duration``)."""
    deadline: float | None = None
    """Seconds from the start to ``--until`` (a time on the wall clock)."""
    evidence: EvidenceSettings | None = None
    dry_run: bool = False
    diff: bool = True
    max_retries: int = 10
    """Consecutive failed reconnects before giving up."""
    in_cluster: dict[tuple[str, str], dict[str, Any]] | None = None
    """(namespace, name) -> cpg-managed policy already applied (``--cluster-dedup``)."""
    since: str = ""
    """A time key: ask the relay for its buffered flows from then on (``--since``)."""
    min_flows: int = 1
    """Allow entries seen fewer times are held back (written once they reach it)."""
    share: int = 0
    """Rules at least this many workloads need go into shared policies (§D43)."""
    baseline: bool = False
    """Shared egress rules in the Baseline tier where they can be (§D44)."""
    readiness: ReadinessRules = attrs.Factory(ReadinessRules)
    """When a workload is ready to enforce (§D59)."""
    only_ready: bool = False
    """Write the policies of ready workloads only."""
    kustomize: bool = False
    """Keep kustomization files listing cpg's policies (``--kustomize``)."""
    evidence_interval: float = 60.0
    """Seconds between writes of the evidence of policies whose rules did not change (their
    files are not touched at all); the last flush writes it whatever the time."""
    stable_for: float = 0.0
    """Seconds a policy must go without a new rule before it is written (``--stable-for``)."""


def live(
    request: RunRequest,
    access: RelayAccess,
    output_dir: Path,
    *,
    evidence_dir: Path | None = None,
    now: str | None = None,
) -> LiveCapture:
    """A live capture, connected and ready to run (``cpg generate`` and a cpg-mcp session
    alike): the way to the relay set up, the settings built. RequestError for a window that
    is over (an until in the past), RelaySetupError for a failed set-up. The caller runs it
    and closes it (:meth:`LiveCapture.close`), whatever happens."""
    now = now or rfc3339(utc_now())
    request.live_window(now)  # an until in the past: refused before anything is opened
    if not request.dry_run:  # and an evidence folder a newer cpg wrote (EvidenceError)
        evidence_settings(request, output_dir, evidence_dir)
        check_writable(output_dir, "policies")  # a read-only volume: said now, not later
    relay = open_relay(request, access)
    try:
        book = read_identities(
            request.identities,
            kubeconfig=access.kubeconfig,
            context=access.context,
            temp_dir=relay.temp_dir,
        )
        declared = read_declarations(
            request.declarations,
            kubeconfig=access.kubeconfig,
            context=access.context,
            temp_dir=relay.temp_dir,
        )
        settings = live_settings(
            request,
            output_dir,
            relay,
            now=now,
            tls=access.tls,
            evidence_dir=evidence_dir,
            identities=book,
            declarations=declared,
        )
    except BaseException:
        relay.close()
        raise
    if relay.in_cluster is not None:
        log.info("loaded %d cpg-managed policies from the cluster", len(relay.in_cluster))
    if relay.forwarder is not None:
        log.info(
            "port-forward to %s/%s established on %s",
            request.live.relay_namespace,
            relay.forwarder.pod,
            relay.server,
        )
    capture = LiveCapture(settings, relay=relay)
    capture.metrics_addr = request.live.metrics_addr
    capture.identity_refresh = identity_refresh(
        request.identities,
        kubeconfig=access.kubeconfig,
        context=access.context,
        temp_dir=relay.temp_dir,
    )
    return capture


def live_settings(
    request: RunRequest,
    output_dir: Path,
    relay: RelayConnection,
    *,
    now: str,
    tls: TLSSettings | None = None,
    evidence_dir: Path | None = None,
    identities: IdentityBook | None = None,
    declarations: Declarations | None = None,
) -> LiveSettings:
    """The one place a live capture's settings are built from a request (cpg generate and a
    cpg-mcp session alike); ``now`` (RFC 3339) anchors a relative since and bounds until."""
    since, until, _stop_after = request.live_window(now)
    duration, deadline = request.live_stop(now)
    return LiveSettings(
        server=relay.server,
        output_dir=output_dir,
        options=attrs.evolve(
            with_catalogue(request.aggregate_options(since, until), request.capture.catalogue),
            identities=identities,
            declarations=declarations,
            max_policies=request.live.max_policies,
            max_peers=request.live.max_peers,
            max_rules=request.live.max_rules,
        ),
        namespaces=request.capture.namespaces,
        tls=tls or TLSSettings(),
        timeout=request.live.timeout,
        flush_interval=request.live.flush_interval,
        duration=duration,
        deadline=deadline,
        evidence=None if request.dry_run else evidence_settings(request, output_dir, evidence_dir),
        dry_run=request.dry_run,
        diff=request.diff,
        in_cluster=relay.in_cluster,
        since=since,
        min_flows=request.min_flows,
        share=request.shared,
        baseline=request.baseline_format == "kcnp",
        readiness=request.readiness,
        only_ready=request.only_ready,
        kustomize=request.kustomize,
        evidence_interval=request.live.evidence_interval,
        stable_for=request.live.stable_for,
    )


class LiveCapture(RelayReader):
    """One capture session. ``stop`` ends it (signals, ``--duration``, an MCP call)."""

    def __init__(
        self,
        settings: LiveSettings,
        clock: Callable[[], datetime] = utc_now,
        *,
        relay: RelayConnection | None = None,
    ) -> None:
        decide = settings.options.decide
        super().__init__(
            StreamSettings(
                server=settings.server,
                namespaces=settings.namespaces,
                tls=settings.tls,
                timeout=settings.timeout,
                since=settings.since,
                max_retries=settings.max_retries,
                include_audit=decide.include_audit,
                every_verdict=decide.learn,
            )
        )
        self.settings = settings
        self.relay = relay
        """The way to the relay :func:`live` set up (closed by :meth:`close`)."""
        self.clock = clock
        self.totals = Aggregator(settings.options)
        """Every flow of the session. A flush moves out (drains) what the policies it writes
        gathered; the entries stay known, so the fast path keeps finding them."""
        self.totals.read_quick_keys(self._converter.entry_key, self._converter.flow_of)
        self._files: dict[Path, FileResult] = {}
        self._flushing = threading.Lock()
        self._held: HeldStats = {}
        self._written: dict[PolicyTarget, set[Atom]] = {}
        """The allow entries already in each written policy: a flush with nothing new for a
        policy leaves its file alone."""
        self._pending: dict[PolicyTarget, PolicyPlan] = {}
        """Evidence drained with a policy that turned out unchanged, not written yet."""
        self._retry: set[PolicyTarget] = set()
        self._in_folder: int | None = None
        """Policy files in the output folder after the last flush that wrote (whatever
        session wrote them): unlike ``cpg_policies_written``, it survives a restart."""
        self._unwritten: dict[PolicyTarget, PolicyPlan] = {}
        self._skeletons: dict[PolicyTarget, PolicyPlan] = {}
        """Each policy this session wrote, with every rule it has so far (no flows): when one
        of its rules reaches the share threshold later, it is written again without it, as
        a replay of the same flows writes it (§D43)."""
        self._holders: dict[Rule, set[PolicyTarget]] = {}
        """The policies of this session that hold each rule (of their skeletons)."""
        self._crossed: set[Rule] = set()
        """Rules in a shared policy already: the policies that hold them are not asked back."""
        self._learning: dict[PolicyTarget, PolicyPlan] = {}
        """With only_ready: the plans of workloads still learning, their evidence written;
        each flush judges them again (readiness grows with time, not only with flows)."""
        """Plans a flush could not write (a full volume, a folder in the way): the entries
        were drained from the aggregator, so the plans themselves are written again, before
        the next flush's own."""
        """Policies whose last write failed: drained again at the next flush."""
        self._evidence_due = time.monotonic()
        self._unstable: dict[PolicyTarget, PolicyPlan] = {}
        """Changed policies --stable-for keeps unwritten, with what they gained so far."""
        self._rules_seen: dict[PolicyTarget, set[Atom]] = {}
        self._last_change: dict[PolicyTarget, datetime] = {}
        self.started = clock()
        self.session = SessionInfo(
            id=new_session_id(self.started),
            started_at=rfc3339(self.started),
            ended_at=rfc3339(self.started),
            cpg_version=cpg_version(),
            source=SessionSource(type="live", server=settings.server),
        )
        self.result = RunResult(stats=self.stats, aggregator=self.totals)

    def _use_identities(self, book: IdentityBook | None) -> None:
        self.totals.use_identities(book)

    def metric_families(self) -> Iterator[Metric]:
        yield from super().metric_families()
        written = dict(self._written)
        yield family("cpg_policies_written", value=self.progress.policies_written)
        yield family("cpg_rules_written", value=sum(len(atoms) for atoms in written.values()))
        yield family("cpg_policies_waiting", value=len(self._unstable))
        if self._in_folder is not None:
            yield family("cpg_policies_in_folder", value=self._in_folder)

    def flows_not_kept(self) -> dict[str, int]:
        return dict(self.totals.overflow)

    def cap_warning(self, cap: str) -> str:
        options = self.settings.options
        if cap == "policies":
            return Message(
                Setting("max_policies"),
                f" {options.max_policies} reached: flows of further new workloads are counted, "
                "not kept (they get no rule; capture their namespaces on their own or raise ",
                Setting("max_policies"),
                ")",
            )
        if cap == "peers":
            return Message(
                Setting("max_peers"),
                f" {options.max_peers} reached by a policy: flows of its further new peers are "
                "counted, not kept (they get no rule; raise ",
                Setting("max_peers"),
                " if they are real)",
            )
        return Message(
            Setting("max_rules"),
            f" {options.max_rules} reached: flows of further new peers are counted, not kept "
            "(they get no rule; capture fewer namespaces at a time or raise ",
            Setting("max_rules"),
            ")",
        )

    def _take_flow(self, f: Any, response: Any) -> None:
        converter = self._converter
        interval = self.totals
        # The common flows are counted by their key; a Flow only for the samples kept.
        found = converter.quick(f, response)
        if found is None:
            taken = False
        else:
            what, when = found
            taken = (
                interval.add_context(what, when)
                if isinstance(what, Decision)
                else interval.add_line(what, when, response)
            )
        if not taken:
            interval.add(converter.flow(f, response))

    # --- flushing ----------------------------------------------------------------------------

    def flush(self, on_start: Callable[[int], None] | None = None, *, final: bool = False) -> None:
        """Write what the last interval added (files are merged, so nothing is lost).
        ``on_start`` hears how many policies are about to be written. A policy whose rules
        did not change is not read or rewritten; its evidence waits in memory for the
        evidence interval, or the ``final`` flush. One flush at a time: a periodic flush
        still running in its thread when the capture stops (cancelling its task does not stop
        the thread) ends, and its files are counted, before the final one starts."""
        with self._flushing:
            # What the capture keeps grows and has no cycles: keep the cycle collector from
            # walking it again and again, and from walking what a flush makes while it
            # writes (a full pass over a thousand policies' evidence holds the interpreter
            # for a tenth of a second, and receiving waits).
            gc.freeze()
            collecting = gc.isenabled()
            gc.disable()
            try:
                self._flush(on_start, final=final)
            finally:
                gc.freeze()
                if collecting:
                    gc.enable()

    def _flush(self, on_start: Callable[[int], None] | None, *, final: bool) -> None:
        evidence = self.settings.evidence is not None and not self.settings.dry_run
        due = evidence and (final or time.monotonic() >= self._evidence_due)
        plans = self._drained_plans(due)
        if plans or final:  # a quiet flush costs a constant: the profile waits for news
            self._profile_capture(plans)
        if self.settings.min_flows > 1:
            plans, self._held = hold_back(
                plans,
                self.settings.min_flows,
                self._held,
                max_samples=self.settings.options.max_samples,
            )
            self.result.held_back = held_back(self._held)
            self.result.min_flows = self.settings.min_flows
        plans, quiet = self._changed(plans)
        if self.settings.stable_for > 0:
            plans = self._stabilized(plans)
        quiet = self._evidence_to_write(quiet, due)
        retry, self._unwritten = list(self._unwritten.values()), {}
        self._write_ready()
        if not plans and not quiet and not retry:
            return
        with self._lock:
            flows, rule_flows = self.totals.total_flows, self.totals.rule_flows
        ended = self.clock()
        session = attrs.evolve(
            self.session,
            ended_at=rfc3339(ended),
            flows_ingested=flows,
            flows_unhandled=flows - rule_flows,
        )
        self.result.session = session
        if on_start is not None:
            on_start(len(plans) + len(quiet))
        self.progress.flushing = len(plans) + len(quiet)
        attempts: list[Written] = []
        try:
            if retry:  # first, so that the new plans merge into what they hold
                retried, again = self._write(retry, session)
                self._note_written(retried, again)
                attempts.append(again)
            plans, written = self._write(plans, session)
            if quiet:
                evidence_only = write_outputs(
                    quiet,
                    self.settings.output_dir,
                    evidence=self.settings.evidence,
                    session=session,
                    health=None,
                    dry_run=False,
                    diff=False,
                    jobs=1,
                    evidence_only=True,
                )
                written.evidence_errors += evidence_only.evidence_errors
                kept_back = evidence_only.evidence_failed
                if kept_back:  # their counts wait for the next flush, not lost
                    self._hold_evidence(
                        [p for p in quiet if (p.namespace, p.workload) in kept_back]
                    )
                    self._evidence_due = time.monotonic()
            attempts.append(written)
        finally:
            self.progress.flushing = 0
            self._say_failures(attempts)
        self._note_written(plans, written)

    def _profile_capture(self, plans: list[PolicyPlan]) -> None:
        """The session's capture profile so far: its window, flows and gaps as the aggregator
        counted them, and the width of every flush's rules (each drained once)."""
        with self._lock:
            window, decisions = self.totals.window(), dict(self.totals.decisions)
            minutes = dict(self.totals.minutes)
        attribution = {plan.target: plan.attribution for plan in plans}
        flush = capture_profile(window, decisions, attribution, minutes)
        self.result.capture = flush.joined(self.result.capture)

    def _write_ready(self) -> None:
        """Write the policies of the learning workloads that became ready since (their
        evidence holds every flow already: it is not written again)."""
        if not self._learning or self.settings.dry_run:
            return
        settings = self.settings
        judged = {plan: self._profile_now(plan) for plan in self._learning.values()}
        ready = [plan for plan, profile in judged.items() if profile.ready]
        if not ready:
            return
        written = write_outputs(
            ready,
            settings.output_dir,
            evidence=None,
            session=None,
            health=None,
            dry_run=False,
            diff=False,
            jobs=1,
            in_cluster=settings.in_cluster,
            share=settings.share,
            baseline=settings.baseline,
        )
        for plan in ready:
            del self._learning[plan.target]
        self._note_written(ready, written)
        # judged on the evidence of every flush, not on what this write was given
        self.result.profiles.update({judged[p].name: judged[p] for p in ready})

    def _profile_now(self, plan: PolicyPlan) -> WorkloadProfile:
        """A learning workload's profile from its evidence as it is now."""
        settings = self.settings
        doc = None
        if settings.evidence is not None:
            try:
                store = EvidenceStore(settings.evidence.root, settings.output_dir)
                doc = store.read(plan.namespace, plan.workload)
            except CpgError:
                doc = None
        records = doc.rules if doc is not None else rule_records(plan.attribution, "", 0)
        return workload_profile(
            plan.namespace, plan.workload, records, settings.readiness, self.result.capture
        )

    def _write(
        self, plans: list[PolicyPlan], session: SessionInfo
    ) -> tuple[list[PolicyPlan], Written]:
        """The policies (and evidence) of ``plans``, merged into the output folder, with the
        earlier policies a rule of theirs now shared takes back; the plans written, and
        what became of them."""
        settings = self.settings
        plans = self._with_session_rules(plans)
        written = write_outputs(
            plans,
            settings.output_dir,
            evidence=settings.evidence,
            session=session,
            health=None,
            dry_run=settings.dry_run,
            diff=settings.diff,
            jobs=1,
            in_cluster=settings.in_cluster,
            share=settings.share,
            baseline=settings.baseline,
            readiness=settings.readiness,
            capture=self.result.capture,
            only_ready=settings.only_ready,
            policy_only=frozenset(plan.target for plan in plans if not plan.attribution),
        )
        self._remember_rules(plans, written)
        return plans, written

    def _with_session_rules(self, plans: list[PolicyPlan]) -> list[PolicyPlan]:
        """With sharing, each plan with every rule its policy has this session (a replay of
        the same flows shares by whole policies), and the earlier policies that hold a rule
        this flush brings to the share threshold (no flows of theirs: policy only)."""
        share = self.settings.share
        if not share or self.settings.dry_run:
            return plans
        whole = []
        for plan in plans:
            earlier = self._skeletons.get(plan.target)
            if earlier is not None:
                plan = attrs.evolve(plan, rules=joined_rules(earlier.rules, plan.rules))
            whole.append(plan)
        batch = {plan.target for plan in whole}
        needing: dict[Rule, set[PolicyTarget]] = {}
        for plan in whole:
            for rule in plan.rules:
                needing.setdefault(rule, set()).add(plan.target)
        back: set[PolicyTarget] = set()
        for rule, targets in needing.items():
            if rule in self._crossed:
                continue
            holders = self._holders.get(rule, set())
            if len(targets | holders) >= share:
                back |= holders - batch
        order = sorted(back, key=lambda t: (t.namespace, t.workload))
        return whole + [self._skeletons[target] for target in order]

    def _remember_rules(self, plans: list[PolicyPlan], written: Written) -> None:
        """Each policy written, with its rules, for a later flush's sharing."""
        if not self.settings.share or self.settings.dry_run:
            return
        failed = {item.path for item in written.files if item.outcome == "failed"}
        store = PolicyStore(self.settings.output_dir)
        for plan in plans:
            if store.path_for(plan.namespace, plan.file_stem) in failed:
                continue
            earlier = self._skeletons.get(plan.target)
            if earlier is not None:
                for rule in earlier.rules:
                    self._holders.get(rule, set()).discard(plan.target)
            skeleton = attrs.evolve(plan, attribution={})
            self._skeletons[plan.target] = skeleton
            for rule in skeleton.rules:
                self._holders.setdefault(rule, set()).add(plan.target)
        if not failed:
            self._crossed |= written.shared_rules

    def _say_failures(self, attempts: list[Written]) -> None:
        """What the writes of one flush could not write: an ERROR line, the counter by
        reason, and ``/healthz`` failing until a flush writes everything it has to."""
        problems = []
        for written in attempts:
            for item in written.files:
                if item.outcome == "failed":
                    error = item.error
                    path = str(item.path)
                    problems.append(error if path in error else f"{path}: {error}")
            problems += list(written.evidence_errors)
        reasons: dict[str, int] = {}
        for problem in problems:
            reason = failure_reason(problem)
            reasons[reason] = reasons.get(reason, 0) + 1
        first = problems[0] if problems else ""
        self.metrics.wrote(reasons, first)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            log.error(
                "a flush could not write %d file(s): %s%s; tried again at the next flush",
                len(problems),
                first,
                more,
            )
        if len(problems) > 1:  # every file named, on one line
            log.error("the files this flush could not write: %s", "; ".join(problems))

    def _drained_plans(self, due: bool) -> list[PolicyPlan]:
        """The plans of what this flush moves out of the aggregator."""
        totals = self.totals
        # Only policies that gained an allow entry (and, at the evidence interval, those with
        # flows since their evidence was written) are drained and planned: a flush with no
        # new rule costs a constant, and receiving waits only while entries are moved out.
        with self._lock:
            wanted = totals.take_new_targets()
        wanted |= self._retry
        wanted.update(target for target, _atom in self._held)
        if not wanted and not due:
            return []
        # What is read next needs the flows counted by quick key since the last read in
        # their entries: they are folded in first, a slice at a time (the reads fold what
        # the stream adds meanwhile, which is little).
        while True:
            with self._lock:
                if totals.fold_some(_FOLD_SLICE):
                    break
            time.sleep(_HAND_OVER)
        if due:
            with self._lock:
                wanted.update(totals.busy_targets())
        self._retry = set()
        drained = {}
        targets = sorted(wanted, key=lambda t: (t.namespace, t.workload))
        for start in range(0, len(targets), _DRAIN_BATCH):
            with self._lock:  # a few milliseconds at a time: receiving never waits long
                drained.update(totals.drain(targets[start : start + _DRAIN_BATCH]))
            time.sleep(_HAND_OVER)  # the stream, waiting for the lock, takes it in between
        # Naming a world peer reads what receiving adds to (pod IPs, DNS names) with single
        # lookups only, and the drained entries are this flush's alone: no lock needed.
        attribution = totals.resolved(drained) if drained else {}
        if not attribution:
            return []
        with self._lock:  # what the whole session knows of these targets' peers (§D47)
            reach = totals.reach(attribution)
        return totals.plans(attribution, reach)

    def _note_written(self, plans: list[PolicyPlan], written: Written) -> None:
        """Remember what a flush wrote: the allow entries now in each file (a failed file is
        tried again next flush), each file's strongest outcome, errors and kustomizations;
        what it could not write is said at once (an ERROR line, the failure counter, and
        ``/healthz`` until a flush writes everything)."""
        self.result.profiles.update(written.profiles)
        capture = self.result.capture
        if capture is not None and not written.nodes <= set(capture.nodes):
            nodes = tuple(sorted({*capture.nodes, *written.nodes}))
            self.result.capture = attrs.evolve(capture, nodes=nodes)
        if not self.settings.dry_run:
            failed = {item.path for item in written.files if item.outcome == "failed"}
            learning = {item.path for item in written.files if item.outcome == "keep learning"}
            store = PolicyStore(self.settings.output_dir)
            for plan in plans:
                path = store.path_for(plan.namespace, plan.file_stem)
                if path in learning:  # the rules of every flush so far, in one plan
                    earlier = self._learning.get(plan.target)
                    self._learning[plan.target] = (
                        plan if earlier is None else plan.joining(earlier, 0)
                    )
                if path in failed:
                    # every version a refusing folder turned away, joined: the retry writes
                    # one plan per file (five versions in one batch kept only the last)
                    self._retry.add(plan.target)
                    earlier = self._unwritten.get(plan.target)
                    max_samples = self.settings.options.max_samples
                    self._unwritten[plan.target] = (
                        plan if earlier is None else plan.joining(earlier, max_samples)
                    )
                else:
                    self._written.setdefault(plan.target, set()).update(plan.attribution)
                    if (plan.namespace, plan.workload) in written.evidence_failed:
                        self._hold_evidence([plan])  # its counts wait for the next flush
                        self._evidence_due = time.monotonic()
        for item in written.files:
            known = self._files.get(item.path)
            # what is on disk at the end: a file written after it failed is written
            recovered = known is not None and known.outcome == "failed" and item.outcome != "failed"
            if (
                known is None
                or recovered
                or _RANK.get(item.outcome, 0) > _RANK.get(known.outcome, 0)
            ):
                if known is not None and known.diff and not item.diff:
                    item.diff = known.diff
                self._files[item.path] = item
        self.progress.policies_written = sum(
            1 for f in self._files.values() if f.outcome in ("created", "updated")
        )
        folder = self.settings.output_dir
        if not self.settings.dry_run and folder.is_dir():
            self._in_folder = sum(1 for path in folder.rglob("*.yaml") if path.is_file())
        self.result.evidence_errors += written.evidence_errors
        if (
            self.settings.kustomize
            and not self.settings.dry_run
            and self.settings.output_dir.is_dir()
        ):
            update_kustomizations(self.settings.output_dir)
            self.result.kustomized = True
        self.result.evidence_dir = written.evidence_dir or self.result.evidence_dir

    def health_so_far(self) -> ClusterHealth:
        """The cluster-health document of every flow received so far, flushed or not (for
        questions asked while the capture runs); the capture itself is not disturbed."""
        with self._lock:
            lost = self.stats.lost_events
            return run_health(self.totals, ReadStats(lost_events=lost), self.started, self.clock())

    def _changed(self, plans: list[PolicyPlan]) -> tuple[list[PolicyPlan], list[PolicyPlan]]:
        """The plans that bring a policy an allow entry it does not have yet, and the rest.
        A changed plan takes the evidence its policy had waiting."""
        changed, quiet = [], []
        for plan in plans:
            known = self._written.get(plan.target)
            if known is not None and known.issuperset(plan.attribution):
                quiet.append(plan)
                continue
            waiting = self._pending.pop(plan.target, None)
            if waiting is not None:
                plan = plan.absorbing(waiting, self.settings.options.max_samples)
            changed.append(plan)
        return changed, quiet

    def _stabilized(self, changed: list[PolicyPlan]) -> list[PolicyPlan]:
        """The changed policies that have gone ``stable_for`` without a new rule; the others
        wait, keeping what they gained (Calico's stabilization period)."""
        now = self.clock()
        max_samples = self.settings.options.max_samples
        for plan in changed:
            seen = self._rules_seen.setdefault(plan.target, set())
            if not seen.issuperset(plan.attribution):
                seen.update(plan.attribution)
                self._last_change[plan.target] = now
            waiting = self._unstable.pop(plan.target, None)
            self._unstable[plan.target] = (
                plan if waiting is None else plan.joining(waiting, max_samples)
            )
        ready = []
        for target in sorted(self._unstable, key=lambda t: (t.namespace, t.workload)):
            if (now - self._last_change[target]).total_seconds() >= self.settings.stable_for:
                ready.append(self._unstable.pop(target))
        self.result.stable_for = self.settings.stable_for
        self.result.waiting = [
            WaitingPolicy(
                namespace=target.namespace,
                workload=target.workload,
                since=rfc3339(self._last_change[target]),
                rules=len(self._rules_seen[target]),
            )
            for target in sorted(self._unstable, key=lambda t: (t.namespace, t.workload))
        ]
        return ready

    def _evidence_to_write(self, quiet: list[PolicyPlan], due: bool) -> list[PolicyPlan]:
        """The unchanged policies whose evidence is written now: those waiting, once the
        evidence interval is over (or at the last flush); the others wait in memory."""
        if self.settings.evidence is None or self.settings.dry_run:
            return []  # nothing to write for them at all
        self._hold_evidence(quiet)
        if not due:
            return []
        self._evidence_due = time.monotonic() + self.settings.evidence_interval
        waiting, self._pending = list(self._pending.values()), {}
        return waiting

    def _hold_evidence(self, quiet: list[PolicyPlan]) -> None:
        for plan in quiet:
            waiting = self._pending.get(plan.target)
            self._pending[plan.target] = (
                plan
                if waiting is None
                else plan.absorbing(waiting, self.settings.options.max_samples)
            )

    # --- the whole session ---------------------------------------------------------------------

    async def run(self, on_final_flush: Callable[[int], None] | None = None) -> RunResult:
        """Stream until stopped, then flush what is left; ``on_final_flush`` hears how many
        policies that last flush writes (it can take a while with many)."""
        gc.freeze()  # what start-up made is never walked again (see flush)
        await self._follow(
            self.flush,
            self.settings.flush_interval,
            self.settings.duration,
            lambda: bool(self._files),
            self.settings.deadline,
        )
        await asyncio.to_thread(self.flush, on_final_flush, final=True)
        self.result.files = sorted(self._files.values(), key=lambda f: str(f.path))
        self.result.health = run_health(self.totals, self.stats, self.started, self.clock())
        if self.settings.evidence is not None and not self.settings.dry_run:
            written = write_outputs(
                [],
                self.settings.output_dir,
                evidence=self.settings.evidence,
                session=self.result.session or self.session,
                health=self.result.health,
                dry_run=False,
                diff=False,
                jobs=1,
            )
            self.result.health_path = written.health_path
            self.result.evidence_dir = self.result.evidence_dir or written.evidence_dir
        gc.unfreeze()  # the capture is over: a long-lived process (cpg-mcp) collects again
        return self.result
