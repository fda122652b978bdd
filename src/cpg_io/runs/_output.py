"""The write stage every run shares: policies merged into their files, their evidence and
cluster-health.json staged and renamed into place as one batch (or, in a dry run, diffed)."""

from __future__ import annotations

import contextlib
import difflib
import threading
from collections.abc import Mapping, Sequence, Set as AbstractSet
from pathlib import Path
from typing import Any

import attrs

from cpg_core import (
    Aggregator,
    ClusterHealth,
    CpgError,
    EvidenceError,
    HeldBack,
    PolicyEvidence,
    PolicyMergeError,
    PolicyPlan,
    PolicyTarget,
    ReplayIdentity,
    RunRequest,
    SelectorMismatchError,
    SessionInfo,
    VerifyReport,
    plan_evidence,
    policies_equivalent,
    redact_ips,
    render_or_merge,
)
from cpg_core.cilium import (
    AlsoSelected,
    also_selected,
    foreign_policy,
    load_all,
    load_one,
    policies_in,
    policy_document,
    specs_police,
)
from cpg_core.declarations import Declarations
from cpg_core.readiness import (
    CaptureProfile,
    ReadinessRules,
    WorkloadProfile,
    not_ready_first,
    rule_records,
    sample_nodes,
    workload_profile,
)
from cpg_core.reading import ReadStats
from cpg_core.reports import DeclaredRead, FileOutcome, RunReport, WaitingPolicy
from cpg_core.sharing import (
    BASELINE_GAPS,
    BASELINE_KIND,
    BASELINE_NOTE,
    EGRESS,
    SHARED_FOLDER,
    BaselinePolicy,
    Exclusions,
    Rule,
    SharedPolicy,
    Sharing,
    move_to_baseline,
    read_baseline,
    read_shared,
    render_baseline,
    render_shared,
    share_rules,
    shared_evidence_plan,
    split_exclusions,
    with_baseline_rules,
    with_exclusions,
)
from cpg_io.engines.workers import map_forked
from cpg_io.errors import Cancelled, StoreError
from cpg_io.evidence_store import EvidenceStore
from cpg_io.policy_files import MAX_FILE_BYTES
from cpg_io.sources import describe_source
from cpg_io.store import (
    PolicyStore,
    StagedWrites,
    folder_lock,
    read_bounded,
    remove_stale_temp_files,
)


@attrs.define
class FileResult:
    path: Path
    outcome: str  # created | updated | unchanged | would-create | would-update | failed
    plan: PolicyPlan | None = None
    diff: str = ""
    error: str = ""
    beside: str = ""
    """A person's policy that holds the workload's path, left as it is (``kind name in
    ns/file.yaml``): this file is cpg's own, written beside it."""


@attrs.define
class RunResult:
    """What a run (a replay or a live capture) read, decided and wrote."""

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
    waiting: list[WaitingPolicy] = attrs.Factory(list)
    """Policies ``--stable-for`` keeps unwritten so far."""
    stable_for: float = 0.0
    verify: VerifyReport | None = None
    """The check of the written policies, when the request asked for one."""
    verify_error: str = ""
    """Why the check could not run (the policies could not be read back)."""
    identity: ReplayIdentity = attrs.Factory(ReplayIdentity)
    """How this replay's inputs relate to the sessions already recorded (§D24)."""
    capture: CaptureProfile | None = None
    """How long and how wide the capture was (§D59)."""
    profiles: dict[str, WorkloadProfile] = attrs.Factory(dict)
    """``namespace/workload`` → what its evidence shows, and whether it is ready."""

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


@attrs.frozen
class EvidenceSettings:
    root: Path
    max_samples: int = 10
    max_sessions: int = 10
    redact: bool = False
    """Write no IP address of a sample flow (evidence committed to a public repository)."""
    replaces: frozenset[str] = frozenset()
    """Recorded sessions whose contribution this run's replaces (it read their inputs)."""


@attrs.define
class Written:
    files: list[FileResult] = attrs.Factory(list)
    evidence_errors: list[str] = attrs.Factory(list)
    evidence_dir: Path | None = None
    health_path: Path | None = None
    shared: list[FileResult] = attrs.Factory(list)
    """The shared policies' files (also in ``files``)."""
    profiles: dict[str, WorkloadProfile] = attrs.Factory(dict)
    """``namespace/workload`` → what the evidence (or this run) shows of it, and whether its
    policy is ready to enforce (§D59)."""
    nodes: set[str] = attrs.Factory(set)
    """The nodes the plans' sample flows name (the capture's profile holds them)."""
    shared_rules: set[Rule] = attrs.Factory(set)
    """The rules of the shared policies written (or found unchanged)."""
    evidence_failed: set[tuple[str, str]] = attrs.Factory(set)
    """``(namespace, workload)`` of the policies written whose evidence was not: a live
    session writes it again."""


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
    share: int = 0,
    baseline: bool = False,
    readiness: ReadinessRules | None = None,
    capture: CaptureProfile | None = None,
    only_ready: bool = False,
    policy_only: frozenset[PolicyTarget] = frozenset(),
) -> Written:
    """Write (or diff) the policies, their evidence and cluster-health.json as one batch
    (none of it when ``cancel`` is set before the batch commits). With ``evidence_only`` the
    policy files are neither read nor written: their rules did not change. The rules at least
    ``share`` workloads need go into shared policies (§D43; 0: none; ``baseline``: egress ones
    in the Baseline tier where they can, §D44); evidence stays whole. Each workload's
    readiness is judged from its evidence after this run (``readiness``, the ``capture``'s
    profile: §D59); with ``only_ready`` the policies of workloads to keep learning are not
    written, while their evidence is (their readiness accumulates)."""
    result = Written()
    batch = StagedWrites()
    proof: _Proof | None = None
    if evidence is not None and session is not None and not dry_run:
        proof = _Proof(EvidenceStore(evidence.root, output_dir, batch), evidence, session)
        result.evidence_dir = proof.store.base
    store = PolicyStore(output_dir, batch)
    with contextlib.ExitStack() as held:
        if not dry_run:
            # One run at a time reads, merges and writes these folders; temp files an earlier,
            # killed run left are removed first.
            held.enter_context(folder_lock(output_dir, "policies"))
            remove_stale_temp_files(output_dir)
            if proof is not None:
                held.enter_context(folder_lock(proof.store.base, "evidence"))
                remove_stale_temp_files(proof.store.base)
        rules_for = readiness or ReadinessRules()
        # Judged under the lock: another run may be folding its flows into the same evidence.
        learning = _to_keep_learning(plans, proof, rules_for, capture) if only_ready else set()
        shared = SharedOutput(Sharing(plans=tuple(plans), shared=()))
        writer = _PlanWriter(
            store,
            batch,
            proof,
            dry_run,
            diff,
            in_cluster,
            evidence_only,
            frozenset(learning),
            _Judge(rules_for, capture),
            policy_only,
        )
        if share and not evidence_only:  # read under the lock: another run may be writing them
            # a workload kept learning is policed by no file, its own or a shared one
            ready = [p for p in plans if p not in learning]
            shared = _with_held(plan_sharing(ready, store, share, baseline), plans, learning)
        # Policies and their evidence are rendered and staged in parallel, then made durable
        # and renamed into place as one batch (see StagedWrites).
        try:
            outcomes = map_forked(writer, list(zip(plans, shared.sharing.plans, strict=True)), jobs)
            for outcome in outcomes:
                batch.adopt(outcome.staged)
            _write_shared_policies(store, shared, plans, proof, dry_run, diff, result)
            if proof is not None and health is not None and health.has_anything_to_report:
                _write_health(proof, health, result)
            if cancel is not None and cancel.is_set():
                raise Cancelled("the run was cancelled before its files were written")
            batch.commit()
        except BaseException:
            batch.abort()
            raise
    for plan, outcome in zip(plans, outcomes, strict=True):
        if plan.target not in policy_only:  # no flows of this run: its profile is unchanged
            result.profiles[f"{plan.namespace}/{plan.workload}"] = outcome.profile
        result.nodes |= outcome.nodes
        if outcome.name is not None:
            workload, name, stem = outcome.name
            outcome.file.plan = attrs.evolve(plan, workload=workload, name=name, stem=stem)
        result.files.append(outcome.file)
        if outcome.evidence_error is not None:
            result.evidence_errors.append(outcome.evidence_error)
            result.evidence_failed.add((plan.namespace, plan.workload))
    result.files += result.shared
    return result


@attrs.frozen
class _Proof:
    """Where a run's evidence goes, and what it records: present unless a dry run or a run
    without evidence."""

    store: EvidenceStore
    settings: EvidenceSettings
    session: SessionInfo

    def write(self, plan: PolicyPlan) -> tuple[PolicyEvidence | None, str | None]:
        """Fold this run into one policy's evidence: the document written, or the error."""
        return write_evidence(self.store, plan, self.session, self.settings)


@attrs.frozen
class _Judge:
    """How a workload's readiness is judged (§D59): the rules, and the capture's profile."""

    rules: ReadinessRules
    capture: CaptureProfile | None

    def profile(self, plan: PolicyPlan, evidence: PolicyEvidence | None) -> WorkloadProfile:
        """From the evidence this run leaves, or (none written) from this run alone."""
        records = evidence.rules if evidence is not None else rule_records(plan.attribution, "", 0)
        return workload_profile(plan.namespace, plan.workload, records, self.rules, self.capture)


def _to_keep_learning(
    plans: Sequence[PolicyPlan],
    proof: _Proof | None,
    rules_for: ReadinessRules,
    capture: CaptureProfile | None,
) -> set[PolicyPlan]:
    """The plans whose workloads are not ready yet, judged on their evidence as this run will
    leave it (no samples are kept: only their times and counts count). A plan whose evidence
    cannot be read is judged on this run alone (its writer names the problem)."""
    judge = _Judge(rules_for, capture)
    held = set()
    for plan in plans:
        doc = None
        if proof is not None:
            with contextlib.suppress(EvidenceError, StoreError):
                doc = plan_evidence(
                    plan,
                    proof.session,
                    proof.store.read(plan.namespace, plan.workload),
                    max_samples=0,
                    max_sessions=proof.settings.max_sessions,
                    replaces=proof.settings.replaces,
                )
        if not judge.profile(plan, doc).ready:
            held.add(plan)
    return held


def _with_held(
    shared: SharedOutput, plans: Sequence[PolicyPlan], held: AbstractSet[PolicyPlan]
) -> SharedOutput:
    """The sharing of the plans not held, with each held plan back in its place, whole."""
    if not held:
        return shared
    reduced = iter(shared.sharing.plans)
    placed = tuple(plan if plan in held else next(reduced) for plan in plans)
    return attrs.evolve(shared, sharing=attrs.evolve(shared.sharing, plans=placed))


@attrs.frozen
class _PlanWriter:
    """One policy and its evidence, rendered and staged (in a worker process when the run
    has several jobs): what it staged travels back with its outcome."""

    store: PolicyStore
    batch: StagedWrites
    proof: _Proof | None
    dry_run: bool
    diff: bool
    in_cluster: Mapping[tuple[str, str], Mapping[str, Any]] | None
    evidence_only: bool
    held: frozenset[PolicyPlan] = frozenset()
    """Plans of workloads to keep learning: their evidence is written, not their policy."""
    judge: _Judge = _Judge(ReadinessRules(), None)
    policy_only: frozenset[PolicyTarget] = frozenset()
    """Targets whose evidence is not touched (their plans carry no flows)."""

    def __call__(self, pair: tuple[PolicyPlan, PolicyPlan]) -> _Outcome:
        plan, reduced = pair  # the whole plan, and what is left of it once shared
        try:
            written = self._policy(plan, reduced)
            error = doc = None
            evidence = self.proof is not None and plan.target not in self.policy_only
            if (
                evidence
                and self.proof is not None
                and written.plan is not None
                and written.outcome != "failed"
            ):
                whole = attrs.evolve(plan, workload=written.plan.workload, name=written.plan.name)
                doc, error = self.proof.write(whole)
        except BaseException:
            StagedWrites.discard(self.batch.take())  # nothing this plan staged outlives it
            raise
        final = written.plan
        return _Outcome(
            file=attrs.evolve(written, plan=None),  # the parent has the plan already
            evidence_error=error,
            staged=self.batch.take(),
            name=(final.workload, final.name, final.stem) if final is not None else None,
            profile=self.judge.profile(plan, doc),
            nodes=sample_nodes(plan.attribution),
        )

    def _policy(self, plan: PolicyPlan, reduced: PolicyPlan) -> FileResult:
        path = self.store.path_for(plan.namespace, plan.file_stem)
        if self.evidence_only:
            return FileResult(path=path, outcome="unchanged", plan=plan)
        if plan in self.held:
            return FileResult(path=path, outcome="keep learning", plan=plan)
        if not reduced.rules and plan.rules and not path.exists():
            # every rule it needs is in shared policies: no file of its own
            return FileResult(path=path, outcome="shared", plan=plan)
        served = frozenset(plan.rules) - frozenset(reduced.rules)
        return write_plan(
            self.store,
            reduced,
            dry_run=self.dry_run,
            diff=self.diff,
            in_cluster=self.in_cluster,
            drop=served,
        )


def _write_shared_policies(
    store: PolicyStore,
    shared: SharedOutput,
    plans: list[PolicyPlan],
    proof: _Proof | None,
    dry_run: bool,
    diff: bool,
    result: Written,
) -> None:
    """The shared policies (and Baseline-tier ones), each with evidence of its own."""
    texts: list[tuple[str, Rule | None, frozenset[PolicyTarget], str]] = [
        (p.name, p.rule, p.members, _shared_text(p, shared.exclusions.get(p.name, ())))
        for p in shared.sharing.shared
    ]
    texts += [(p.name, p.rule, p.members, render_baseline(p)) for p in shared.baseline]
    for name, rule, members, text in texts:
        written = write_shared(store, name, text, dry_run, diff)
        result.shared.append(written)
        if written.outcome != "failed" and rule is not None:
            result.shared_rules.add(rule)
        if proof is not None and written.outcome != "failed" and rule:
            max_samples = proof.settings.max_samples
            _doc, error = proof.write(shared_evidence_plan(name, rule, members, plans, max_samples))
            if error is not None:
                result.evidence_errors.append(error)


def _write_health(proof: _Proof, health: ClusterHealth, result: Written) -> None:
    """cluster-health.json beside the evidence; a failure is reported, the policies and their
    evidence still land."""
    try:
        report: ClusterHealth = health
        if proof.settings.redact:
            report, _removed = redact_ips(report)
        result.health_path = proof.store.write_health(report)
    except StoreError as exc:
        result.evidence_errors.append(str(exc))


def _shared_text(policy: SharedPolicy, exclusions: Exclusions) -> str:
    """A shared policy's text, with the pods a narrowing left out kept out."""
    text = render_shared(policy)
    return with_exclusions(text, policy.name, exclusions) if exclusions else text


@attrs.frozen
class SharedOutput:
    """What the shared files of a run hold: the plans without their shared rules, the
    shared Cilium policies and the Baseline-tier ones, and the pods a narrowing (``plan
    --write-fixes``) left out of a shared policy, by its name."""

    sharing: Sharing
    baseline: tuple[BaselinePolicy, ...] = ()
    exclusions: Mapping[str, Exclusions] = attrs.Factory(dict)


@attrs.define
class _OnDisk:
    """The shared files cpg wrote before (as cpg wrote them) and the ones a human changed."""

    shared: dict[Rule, SharedPolicy] = attrs.Factory(dict)
    baseline: list[BaselinePolicy] = attrs.Factory(list)
    edited: set[Path] = attrs.Factory(set)
    keep: set[Rule] = attrs.Factory(set)
    """Rules of changed files: never taken into a shared policy again."""
    edited_baseline: list[BaselinePolicy] = attrs.Factory(list)
    exclusions: dict[str, Exclusions] = attrs.Factory(dict)
    """Shared policies of cpg's a narrowing left pods out of: the exclusions to keep."""


def _read_shared_folder(store: PolicyStore) -> _OnDisk:
    found = _OnDisk()
    folder = store.root / SHARED_FOLDER
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
        text = store.read(path) or ""
        try:
            docs = load_all(text, str(path))
        except CpgError:
            docs = []
        if docs and all(isinstance(d, Mapping) and d.get("kind") == BASELINE_KIND for d in docs):
            baseline = read_baseline(docs)
            if (
                baseline is not None
                and path.stem == baseline.name
                and render_baseline(baseline) == text
            ):
                found.baseline.append(baseline)
                continue
            found.edited.add(path)
            if baseline is not None:
                found.edited_baseline.append(baseline)
                if baseline.rule is not None:
                    found.keep.add(baseline.rule)
            continue
        policy = read_shared(docs[0]) if len(docs) == 1 and isinstance(docs[0], Mapping) else None
        exclusions: Exclusions = ()
        if policy is None and len(docs) == 1 and isinstance(docs[0], Mapping):
            plain, exclusions = split_exclusions(docs[0])
            policy = read_shared(plain) if exclusions else None
        if policy is None or path.stem != policy.name or _shared_text(policy, exclusions) != text:
            found.edited.add(path)
            if policy is not None:
                found.keep.add(policy.rule)
            continue
        found.shared[policy.rule] = policy
        if exclusions:
            found.exclusions[policy.name] = exclusions
    return found


def _polices_egress(store: PolicyStore, plan: PolicyPlan, on_disk: _OnDisk) -> bool:
    """Whether a Cilium policy this run does not write polices the workload's egress: its
    own file on disk, or a shared Cilium policy already there (an unreadable file counts)."""
    if any(
        rule.direction == EGRESS and plan.target in policy.members
        for rule, policy in on_disk.shared.items()
    ):
        return True
    path = store.path_for(plan.namespace, plan.workload)
    try:
        text = store.read(path)
        if text is None:
            return False
        doc = load_one(text, str(path))
    except (CpgError, StoreError):
        return True
    if not isinstance(doc, Mapping):
        return True
    return specs_police(doc, "egress")


def plan_sharing(
    plans: list[PolicyPlan], store: PolicyStore, min_workloads: int, baseline: bool = False
) -> SharedOutput:
    """Which rules go into shared policies: those ``min_workloads`` plans need, and those a
    shared file cpg wrote already holds (any plan that needs one joins it). A shared file a
    human changed is left alone, and its rule stays in the workloads' own policies. With
    ``baseline``, shared egress rules go into the Baseline tier where they can (§D44)."""
    on_disk = _read_shared_folder(store)
    folder = store.root / SHARED_FOLDER
    if baseline or on_disk.baseline:
        # a workload that leaves the Baseline tier's reach takes its rules along
        plans = with_baseline_rules(plans, on_disk.baseline + on_disk.edited_baseline)
    policed = (
        {plan.target: _polices_egress(store, plan, on_disk) for plan in plans} if baseline else {}
    )
    keep = set(on_disk.keep)
    while True:
        sharing = share_rules(plans, min_workloads, on_disk.shared, keep)
        moved: tuple[BaselinePolicy, ...] = ()
        if baseline:
            sharing, moved = move_to_baseline(sharing, policed, on_disk.baseline)
            if any(p.rule is None and folder / f"{p.name}.yaml" in on_disk.edited for p in moved):
                # a changed default deny may not hold the pods default-deny: Cilium's only
                baseline = False
                continue
        names = [(p.rule, p.name) for p in sharing.shared]
        names += [(p.rule, p.name) for p in moved if p.rule is not None]
        clashing = {rule for rule, name in names if folder / f"{name}.yaml" in on_disk.edited}
        if not clashing - keep:  # never write over a file a human changed
            return SharedOutput(sharing, moved, on_disk.exclusions)
        keep |= clashing


@attrs.define
class _Outcome:
    file: FileResult
    evidence_error: str | None
    staged: list[tuple[str, Path]]
    name: tuple[str, str, str] | None
    """(workload, policy name, file stem) the plan was finally written under."""
    profile: WorkloadProfile
    """What its evidence after this run shows, and whether it is ready (§D59)."""
    nodes: frozenset[str] = frozenset()


def write_evidence(
    store: EvidenceStore, plan: PolicyPlan, session: SessionInfo, settings: EvidenceSettings
) -> tuple[PolicyEvidence | None, str | None]:
    """Fold this session's attribution into one policy's evidence: the document written, or
    the error."""
    try:
        doc = plan_evidence(
            plan,
            session,
            store.read(plan.namespace, plan.workload),
            max_samples=settings.max_samples,
            max_sessions=settings.max_sessions,
            replaces=settings.replaces,
        )
        if settings.redact:
            doc, _removed = redact_ips(doc)
        store.write(plan.namespace, plan.workload, doc)
    except (EvidenceError, StoreError) as exc:
        return None, str(exc)
    return doc, None


def _prepare(
    store: PolicyStore, plan: PolicyPlan, drop: AbstractSet[Rule] = frozenset()
) -> tuple[Path, str | None, str]:
    """Path, current text and new text of one policy file ("": it goes, every rule of it
    now in a shared policy)."""
    path = store.path_for(plan.namespace, plan.file_stem)
    existing = store.read(path)
    text = render_or_merge(
        existing,
        name=plan.name,
        namespace=plan.namespace,
        selector=plan.target.selector,
        rules=plan.rules,
        path=str(path),
        drop=drop,
    )
    return path, existing, text


def _foreign(store: PolicyStore, plan: PolicyPlan) -> tuple[PolicyPlan, str]:
    """The plan moved beside a person's policy that holds its path (cpg never edits one),
    and the words that name it; the plan as it is when the path is free or cpg's."""
    path = store.path_for(plan.namespace, plan.file_stem)
    existing = store.read(path)
    found = foreign_policy(existing, str(path)) if existing is not None else None
    if found is None:
        return plan, ""
    moved = plan.beside_foreign(found.names)
    relative = path.relative_to(store.root).as_posix()
    beside = f"{found.describe()} in {relative}"
    taken = store.read(store.path_for(moved.namespace, moved.file_stem))
    if taken is not None and foreign_policy(taken, str(path)) is not None:
        raise PolicyMergeError(
            f"{relative} and {moved.namespace}/{moved.file_stem}.yaml both hold policies cpg "
            f"did not write ({beside}); cpg never changes them: move one aside"
        )
    return moved, beside


def write_plan(
    store: PolicyStore,
    plan: PolicyPlan,
    *,
    dry_run: bool,
    diff: bool,
    in_cluster: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    drop: AbstractSet[Rule] = frozenset(),
) -> FileResult:
    """Write (or, in a dry run, diff) one policy. A file that already holds a policy for
    other endpoints under the same name is left alone: this policy gets a suffixed name. A
    file a person wrote (no managed-by label) is never changed: the policy is written beside
    it (§D48). With ``in_cluster`` (namespace, name) -> policy, a policy the cluster already
    has an equivalent of is not written. ``drop``: rules a shared policy now serves (a live
    session's rule that reached the share threshold after the file was written)."""
    beside = ""
    try:
        plan, beside = _foreign(store, plan)
        try:
            path, existing, text = _prepare(store, plan, drop)
        except SelectorMismatchError:
            plan = plan.with_selector_suffix()
            path, existing, text = _prepare(store, plan, drop)
    except (PolicyMergeError, StoreError) as exc:
        return FileResult(
            path=store.root / plan.namespace / f"{plan.file_stem}.yaml",
            outcome="failed",
            plan=plan,
            error=str(exc),
        )
    if not text and existing is not None:  # every rule of it is shared now: as a replay writes
        if dry_run:
            return FileResult(path=path, outcome="would-update", plan=plan, beside=beside)
        try:
            store.remove(path)
        except StoreError as exc:
            return FileResult(path=path, outcome="failed", plan=plan, error=str(exc))
        return FileResult(path=path, outcome="shared", plan=plan, beside=beside)
    live = (in_cluster or {}).get((plan.namespace, plan.name))
    if (
        existing != text
        and live is not None
        and policies_equivalent(load_one(text, str(path)), live)
    ):
        return FileResult(path=path, outcome="in-cluster", plan=plan, beside=beside)
    written = write_text(store, path, existing, text, dry_run, diff)
    return attrs.evolve(written, plan=plan, beside=beside)


def write_shared(store: PolicyStore, name: str, text: str, dry_run: bool, diff: bool) -> FileResult:
    path = store.root / SHARED_FOLDER / f"{name}.yaml"
    try:
        existing = store.read(path)
    except StoreError as exc:
        return FileResult(path=path, outcome="failed", error=str(exc))
    return write_text(store, path, existing, text, dry_run, diff)


def write_text(
    store: PolicyStore, path: Path, current: str | None, text: str, dry_run: bool, diff: bool
) -> FileResult:
    """Write one policy file's new text over ``current`` (or, in a dry run, diff it)."""
    if current == text:
        return FileResult(path=path, outcome="unchanged")
    if dry_run:
        shown = ""
        if diff:
            shown = "".join(
                difflib.unified_diff(
                    (current or "").splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=str(path) if current is not None else "/dev/null",
                    tofile=str(path),
                )
            )
        return FileResult(
            path=path,
            outcome="would-create" if current is None else "would-update",
            diff=shown,
        )
    try:
        outcome = store.write(path, text, current)
    except StoreError as exc:
        return FileResult(path=path, outcome="failed", error=str(exc))
    return FileResult(path=path, outcome=outcome.value)


def run_report(
    result: RunResult,
    request: RunRequest,
    *,
    source: str,
    output_dir: Path,
    exit_code: int,
    verb: str = "Read",
    extra: Mapping[str, Any] | None = None,
    evidence_flag: str = "",
    relay: str = "",
    inputs: Sequence[str] | None = None,
) -> RunReport:
    """The run's report document (rendered as text or JSON by cpg_core.reports);
    ``inputs`` as the user gave them (folders unexpanded), else the files read."""
    agg = result.aggregator
    return RunReport(
        relay=relay,
        source=source,
        output_dir=str(output_dir),
        dry_run=request.dry_run,
        evidence=request.evidence.record,
        stats=result.stats,
        total_flows=agg.total_flows,
        decisions=dict(agg.decisions),
        ignored_protocols=dict(agg.ignored_protocols),
        ignored_reasons=dict(agg.ignored_reasons),
        filtered_namespace=agg.filtered_namespace,
        files=tuple(
            FileOutcome(
                path=str(f.path),
                outcome=f.outcome,
                namespace=f.plan.namespace if f.plan is not None else None,
                workload=f.plan.workload if f.plan is not None else None,
                name=f.plan.name if f.plan is not None else None,
                error=f.error,
                diff=f.diff,
                beside=f.beside,
            )
            for f in result.files
        ),
        health=result.health,
        evidence_dir=str(result.evidence_dir) if result.evidence_dir else None,
        health_path=str(result.health_path) if result.health_path else None,
        held_back=tuple(result.held_back),
        min_flows=result.min_flows,
        waiting=tuple(result.waiting),
        evidence_flag=evidence_flag if request.evidence.record and not request.dry_run else "",
        stable_for=result.stable_for,
        identities=dict(result.aggregator.identities),
        kustomized=result.kustomized,
        evidence_errors=tuple(result.evidence_errors),
        exit_code=exit_code,
        verify=result.verify,
        redacted=request.evidence.redact and request.evidence.record,
        verb=verb,
        extra=dict(extra or {}),
        session=result.session.id if result.session is not None else "",
        replaced=tuple(sorted(result.identity.replaces)),
        recorded_by=result.identity.recorded_by,
        flow_path=_flow_path(request),
        inputs=tuple(result.inputs if inputs is None else inputs),
        scope=agg.scope,
        declared=declared_read(agg.options.declarations),
        capture=result.capture,
        profiles=tuple(not_ready_first(result.profiles.values())),
        also_selected=() if request.dry_run else hand_written_beside(output_dir, result.files),
        overflow=dict(agg.overflow),
        caps={
            "policies": agg.options.max_policies,
            "peers": agg.options.max_peers,
            "rules": agg.options.max_rules,
        },
        notes=(BASELINE_NOTE, BASELINE_GAPS)
        if any(
            f.outcome != "failed" and Path(f.path).name.startswith("cpg-baseline-")
            for f in result.files
        )
        else (),
    )


def hand_written_beside(output_dir: Path, files: Sequence[FileResult]) -> tuple[AlsoSelected, ...]:
    """Each policy this run wrote with the hand-written policies of the folder that select its
    pods too (§D48): not only a file that holds the workload's name, every one."""
    written = [
        f.plan
        for f in files
        if f.plan is not None and f.outcome not in ("failed", "keep learning", "shared")
    ]
    if not written or not output_dir.is_dir():
        return ()
    theirs: list[Mapping[str, Any]] = []
    for path in sorted(output_dir.rglob("*.yaml")):
        if path.is_symlink() or SHARED_FOLDER in path.relative_to(output_dir).parts:
            continue
        try:
            text = read_bounded(path, MAX_FILE_BYTES).decode("utf-8")
            if foreign_policy(text, str(path)) is None:
                continue  # cpg's own (or not a policy)
            theirs += [p for doc in load_all(text, str(path)) for p in _policies_of(doc)]
        except (OSError, UnicodeDecodeError, CpgError):
            continue  # a file cpg cannot read is the other commands' to name
    if not theirs:
        return ()
    ours = [policy_document(p.name, p.namespace, p.target.selector, p.rules) for p in written]
    return also_selected(ours, theirs)


def _policies_of(document: Any) -> list[Mapping[str, Any]]:
    try:
        return list(policies_in(document)) if isinstance(document, Mapping) else []
    except CpgError:
        return []


def declared_read(found: Declarations | None) -> DeclaredRead | None:
    """What a run read of the cluster's objects, for its report."""
    if found is None:
        return None
    return DeclaredRead(
        sources=found.sources,
        objects=dict(found.objects),
        notes=found.notes,
        dependencies=len(found.dependencies) + len(found.dns_caches),
    )


def _flow_path(request: RunRequest) -> tuple[str, ...]:
    options = request.capture.decide_options()
    return tuple(
        name
        for name, on in (
            ("learn", options.learn),
            ("learn_allowed", options.learn_allowed),
            ("include_audit", options.include_audit),
            ("include_system", request.capture.scope.include_system),
        )
        if on
    )
