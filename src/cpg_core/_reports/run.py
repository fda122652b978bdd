"""The run report: what a replay or a live capture read, decided and wrote, as text for
people (a terminal, a CI log) and as JSON for machines (``-o json``). One typed document,
:class:`RunReport`, built by the run layer from its result; both renderings come from it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cpg_core._base.documents import ClusterHealth, DropRecord, Finding, VerifyReport
from cpg_core._flows.decide import DECISION_LABELS, Decision
from cpg_core._flows.triage import severity_order, top_entries
from cpg_core._review.owners import AlsoSelected
from cpg_core._review.readiness import WorkloadProfile, readiness_summary
from cpg_core._review.wire import converter, to_data
from cpg_core._synthesis.aggregate import HeldBack
from cpg_core._synthesis.lines import ReadStats
from cpg_core._synthesis.profile import CaptureProfile
from cpg_core._synthesis.scope import ScopeReport
from cpg_core.text import one_line_each

MAX_FINDINGS_SHOWN = 20
REDACTED_NOTE = (
    "Evidence redacted (--evidence-redact): the IP addresses of its sample flows were not "
    "written; pod names, labels and CIDR peers (which the policies name) were."
)


@attrs.frozen(slots=True, kw_only=True)
class FileOutcome:
    """What happened to one policy file."""

    path: str
    outcome: str
    """created, updated, unchanged, in-cluster, would-create, would-update, failed, or
    shared (every rule the workload needs is in shared policies: no file of its own)."""
    namespace: str | None = None
    workload: str | None = None
    name: str | None = None
    error: str = ""
    diff: str = ""
    beside: str = ""
    """A person's policy at the workload's path, left as it is; this file is beside it."""


@attrs.frozen(slots=True, kw_only=True)
class WaitingPolicy:
    """A policy ``--stable-for`` keeps unwritten: it gained a rule too recently."""

    namespace: str
    workload: str
    since: str
    """When it last gained a rule (RFC 3339)."""
    rules: int
    """Allow entries it has so far."""


@attrs.frozen(slots=True, kw_only=True)
class DeclaredRead:
    """The cluster's objects a run read (ARCHITECTURE §D58): from where, how many of each
    kind, and what could not be used (one line each)."""

    sources: tuple[str, ...]
    objects: Mapping[str, int]
    notes: tuple[str, ...] = ()
    dependencies: int = 0


@attrs.frozen(slots=True, kw_only=True)
class RunReport:
    """One run, as its report shows it."""

    source: str
    output_dir: str
    dry_run: bool
    evidence: bool
    """Evidence was recorded."""
    stats: ReadStats
    total_flows: int
    decisions: Mapping[Decision, int]
    ignored_protocols: Mapping[str, int]
    ignored_reasons: Mapping[str, int]
    filtered_namespace: int
    files: tuple[FileOutcome, ...]
    health: ClusterHealth | None
    evidence_dir: str | None
    health_path: str | None
    held_back: tuple[HeldBack, ...]
    min_flows: int
    kustomized: bool
    evidence_errors: tuple[str, ...]
    exit_code: int
    verify: VerifyReport | None = None
    redacted: bool = False
    verb: str = "Read"
    """How the summary says the lines came (Read from a file, Received from the relay)."""
    extra: Mapping[str, Any] = attrs.Factory(dict)
    """More facts a run kind adds to the JSON (a live capture's reconnects)."""
    session: str = ""
    """The evidence session this run recorded (empty when it recorded none)."""
    replaced: tuple[str, ...] = ()
    """Recorded sessions whose inputs this replay read again: their counts were replaced."""
    recorded_by: str = ""
    """A recorded session that already counted every input of this replay (evidence left)."""
    relay: str = ""
    """The relay a live run received from (its Next steps judge the policies there)."""
    waiting: tuple[WaitingPolicy, ...] = ()
    evidence_flag: str = ""
    """The --evidence-dir the run was given ("" for the default), repeated in "Next steps"."""
    stable_for: float = 0.0
    """``--stable-for`` in seconds (0: policies are written at every flush)."""
    identities: Mapping[str, int] = attrs.Factory(dict)
    """Sides of flows the identities given filled in (or found untrusted), by kind."""
    flow_path: tuple[str, ...] = ()
    """The settings that made more flows candidates (``learn``, ``learn_allowed``,
    ``include_audit``, ``include_system``): a check of the output needs them too."""
    scope: ScopeReport = attrs.Factory(ScopeReport)
    """What was written for the cluster rather than for the capture (§D47)."""
    notes: tuple[str, ...] = ()
    """What the output needs said that no count says (how Baseline policies are enforced)."""
    overflow: Mapping[str, int] = attrs.Factory(dict)
    """Flows a live session did not keep because a memory cap was reached, by cap
    (``policies``, ``peers``)."""
    caps: Mapping[str, int] = attrs.Factory(dict)
    """The caps themselves (``--max-policies``, ``--max-peers``), for the words."""
    inputs: tuple[str, ...] = ()
    """The files and folders read, as given (``-`` for standard input): Next steps name
    them so that each command runs as printed."""
    declared: DeclaredRead | None = None
    """What was read of the cluster's own objects (``--declarations``), when given."""
    capture: CaptureProfile | None = None
    """How long and how wide the capture was (§D59)."""
    profiles: tuple[WorkloadProfile, ...] = ()
    """Each workload written, what its evidence shows and whether it is ready (not ready
    first)."""
    also_selected: tuple[AlsoSelected, ...] = ()
    """Each policy written that a hand-written policy of the folder selects the pods of too."""

    def count(self, outcome: str) -> int:
        return sum(1 for f in self.files if f.outcome == outcome)

    @property
    def failed(self) -> list[FileOutcome]:
        return [f for f in self.files if f.outcome == "failed"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _top(counts: Mapping[str, int]) -> str:
    if not counts:
        return "(none)"
    shown, more = top_entries(counts)
    text = ", ".join(f"{name} ({n})" for name, n in shown)
    return text + (f" (+{more} more)" if more else "")


def _health_location(report: RunReport) -> str:
    if report.health_path is not None:
        return report.health_path
    if not report.evidence:
        return "(evidence disabled: not written)"
    if report.dry_run:
        return "(dry run: not written)"
    return "(nothing to report: not written)"


def run_text(report: RunReport) -> str:
    """The summary people read in a terminal or a CI log: what was read, what each flow
    became, what no policy can fix, what was written, and what to do next."""
    drops = sorted(report.health.drops if report.health else (), key=severity_order)
    findings = report.health.findings if report.health else ()
    changed = [f for f in report.files if f.outcome in _CHANGED]
    lines = _reading_lines(report) + _capture_lines(report.capture)
    lines += _decision_lines(report) + _no_drops_lines(report)
    lines += _drop_lines(drops) + _finding_lines(findings)
    lines += _policy_lines(report, changed)
    lines += _scope_lines(report.scope)
    lines += declared_lines(report.declared, report.scope)
    lines += readiness_lines(report.profiles)
    if drops or findings or report.stats.lost_events:
        lines.append(f"cluster-health.json: {_health_location(report)}")
    if changed and not report.dry_run:
        lines += _next_steps(report, changed[0])
    lines += _verify_lines(report.verify)
    lines += [f"Note: {note}" for note in report.notes]
    if report.redacted:
        lines.append(REDACTED_NOTE)
    return one_line_each(lines)


NO_DROPS_HINT = (
    "No flow was denied, so there is nothing to turn into rules yet (a cluster without "
    "policies allows everything). If the cluster has policies, capture the drops themselves: "
    "hubble observe --verdict DROPPED -o jsonpb (longer, or with --follow). Without any, three "
    "ways on:",
    "  learn from today's traffic:  cpg replay CAPTURE --learn forwarded, then cpg plan "
    "(docs/no-policies-yet.md: Learning from the traffic that works today)",
    "  start from a default-deny:   cpg bootstrap -n NAMESPACE",
    "  or Cilium's audit mode:      apply a default-deny with policy audit mode on, capture "
    "again, cpg replay --include-audit",
)


def _no_drops_lines(report: RunReport) -> list[str]:
    """The hint a capture without any drop needs: which path leads to policies."""
    decisions = report.decisions
    if decisions.get(Decision.CANDIDATE, 0) or not decisions.get(Decision.NOT_A_DROP, 0):
        return []
    captured = _inputs_words(report)
    if not captured:
        return ["", *NO_DROPS_HINT]
    learn = (
        f"  learn from today's traffic:  cpg replay {captured} --learn forwarded -d "
        f"{shlex.quote(report.output_dir)}, then cpg plan (docs/no-policies-yet.md: Learning from "
        "the traffic that works today)"
    )
    return ["", NO_DROPS_HINT[0], learn, *NO_DROPS_HINT[2:]]


def _reading_lines(report: RunReport) -> list[str]:
    stats = report.stats
    lines = [f"{report.verb} {_plural(stats.lines_read, 'line')} from {report.source}"]
    if stats.malformed:
        shown = ", ".join(str(n) for n in stats.malformed_lines)
        more = " …" if stats.malformed > len(stats.malformed_lines) else ""
        content = max(1, stats.lines_read - stats.blank_lines)
        lines.append(
            f"  malformed lines skipped: {stats.malformed} of {content} "
            f"({100 * stats.malformed / content:.1f} %; line {shown}{more})"
        )
    if stats.blank_lines:
        lines.append(f"  blank lines: {stats.blank_lines}")
    if stats.other_records:
        lines.append(f"  non-flow records (node status…): {stats.other_records}")
    if stats.lost_events:
        lines.append(
            f"  Hubble reported {stats.lost_events} lost events: the capture is incomplete"
        )
    return lines


def _decision_lines(report: RunReport) -> list[str]:
    lines = [f"Flows: {report.total_flows}"]
    width = max(len(label) for _, label in DECISION_LABELS)
    for decision, label in DECISION_LABELS:
        count = report.decisions.get(decision, 0)
        if count or decision is Decision.CANDIDATE:
            lines.append(f"  {label:<{width}}  {count:>8}")
    if report.ignored_protocols:
        ignored = ", ".join(f"{p} {n}" for p, n in sorted(report.ignored_protocols.items()))
        lines.append(f"    by protocol: {ignored}")
    if report.ignored_reasons:
        ignored = ", ".join(f"{r} {n}" for r, n in sorted(report.ignored_reasons.items()))
        lines.append(f"    by reason: {ignored}")
    if report.filtered_namespace:
        lines.append(f"  candidates outside the namespaces chosen: {report.filtered_namespace}")
    if report.identities:
        lines.append(f"Identities filled in: {identity_summary(report.identities)}")
    return lines


_IDENTITY_WORDS = {
    "world_pod": "peers reported as the world named as their pod",
    "identity": "identity numbers given their labels",
    "owner": "pods named by their workload",
    "untrusted": "left as the world (the pod at that IP is not provably the one seen)",
}


def identity_summary(counts: Mapping[str, int]) -> str:
    """What the identities filled in, in words, most telling first."""
    return "; ".join(
        f"{counts[kind]} {words}" for kind, words in _IDENTITY_WORDS.items() if counts.get(kind)
    )


def _drop_lines(drops: list[DropRecord]) -> list[str]:
    if not drops:
        return []
    lines = ["", "Infrastructure and transient drops (no policy can fix these):"]
    name_width = max(len(d.reason) for d in drops)
    for drop in drops:
        lines.append(
            f"  {drop.reason:<{name_width}}  {drop.drop_class:<9}  {_plural(drop.count, 'flow')}"
        )
        lines.append(f"    top nodes:     {_top(drop.by_node)}")
        lines.append(f"    top workloads: {_top(drop.by_workload)}")
        if drop.remediation:
            lines.append(f"    fix:           {drop.remediation}")
    return lines


def _finding_lines(findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return []
    lines = ["", "Findings (traffic that got no allow rule, on purpose or because none fits):"]
    ordered = sorted(findings, key=lambda f: (-f.count, f.kind, f.subject))
    for finding in ordered[:MAX_FINDINGS_SHOWN]:
        label, what, fix = finding.advice()
        lines.append(f"  {label} ({_plural(finding.count, 'flow')}): {what}")
        if fix:
            lines.append(f"    fix: {fix}")
    if len(findings) > MAX_FINDINGS_SHOWN:
        lines.append(f"  (+{len(findings) - MAX_FINDINGS_SHOWN} more in cluster-health.json)")
    return lines


def _also_lines(report: RunReport) -> list[str]:
    """The hand-written policies that select the pods of a policy written, beyond the file
    that holds a workload's name (said with that file already)."""
    beside = {f"{f.namespace}/{f.name}" for f in report.files if f.beside}
    return [
        f"  {also.policy}: also selected by your policy {', '.join(also.by)} (left as it is; "
        "Cilium applies both)"
        for also in report.also_selected[:MAX_FILES_SHOWN]
        if also.policy not in beside
    ]


def _policy_lines(report: RunReport, changed: list[FileOutcome]) -> list[str]:
    output_dir = report.output_dir
    in_cluster = report.count("in-cluster")
    cluster = f", {in_cluster} already in the cluster" if in_cluster else ""
    unchanged = report.count("unchanged")
    failed = len(report.failed)
    tail = cluster + (f", {failed} failed" if failed else "")
    if report.dry_run:
        head = (
            f"Policies (dry run, nothing written): {report.count('would-create')} would be "
            f"created, {report.count('would-update')} updated, {unchanged} unchanged"
        )
    else:
        head = (
            f"Policies in {output_dir}: {report.count('created')} created, "
            f"{report.count('updated')} updated, {unchanged} unchanged"
        )
    lines = ["", head + tail]
    learning = report.count("keep learning")
    if learning:
        lines.append(
            f"  {_plural(learning, 'policy')} not written: "
            "its workload should keep learning (--only-ready; its evidence was written)".replace(
                "policys", "policies"
            )
        )
    shared = report.count("shared")
    if shared:
        lines.append(
            f"  {_plural(shared, 'workload')} need only shared rules (in _shared/): no file "
            "of their own"
        )
    for item in changed[:MAX_FILES_SHOWN]:
        lines.append(f"  {item.outcome:<12} {_relative(item.path, output_dir)}")
        if item.beside:
            lines.append(
                f"               also selected by your policy: {item.beside} (left as it is; "
                "cpg writes its own file beside it)"
            )
    beside = [f for f in report.files if f.beside and f not in changed[:MAX_FILES_SHOWN]]
    for item in beside[:MAX_FILES_SHOWN]:
        lines.append(
            f"  {item.outcome:<12} {_relative(item.path, output_dir)}: also selected by your "
            f"policy {item.beside} (left as it is)"
        )
    lines += _also_lines(report)
    if len(changed) > MAX_FILES_SHOWN:
        lines.append(f"  … and {len(changed) - MAX_FILES_SHOWN} more")
    if report.held_back:
        lines.append(
            f"Held back (seen fewer than --min-flows {report.min_flows} times; not written): "
            f"{len(report.held_back)}"
        )
        for held in report.held_back[:MAX_FILES_SHOWN]:
            lines.append(
                f"  {held.namespace}/{held.workload}: {held.rule} ({_plural(held.flows, 'flow')})"
            )
        if len(report.held_back) > MAX_FILES_SHOWN:
            lines.append(f"  … and {len(report.held_back) - MAX_FILES_SHOWN} more (-o json)")
    lines.extend(overflow_lines(report.overflow, report.caps))
    if report.waiting:
        lines.append(
            f"Waiting (gained a rule within --stable-for {report.stable_for:g}s; not written "
            f"yet): {len(report.waiting)}"
        )
        for waiting in report.waiting[:MAX_FILES_SHOWN]:
            lines.append(
                f"  {waiting.namespace}/{waiting.workload}: {_plural(waiting.rules, 'rule')}, "
                f"last new rule at {waiting.since}"
            )
        if len(report.waiting) > MAX_FILES_SHOWN:
            lines.append(f"  … and {len(report.waiting) - MAX_FILES_SHOWN} more (-o json)")
    if report.evidence_dir is not None and report.files:
        lines.append(
            f"Evidence in {report.evidence_dir} (see: cpg explain NAMESPACE/WORKLOAD -d {output_dir})"
        )
    lines.extend(_session_lines(report))
    return lines


_CAP_WORDS = {
    "policies": (
        "new workloads",
        "--max-policies",
        "policies",
        "capture their namespaces on their own (--namespace) or raise --max-policies",
    ),
    "peers": (
        "new peers",
        "--max-peers",
        "allow entries per policy",
        "raise --max-peers if those peers are real (so many new peers is more often a scan)",
    ),
    "rules": (
        "new peers",
        "--max-rules",
        "allow entries in all",
        "capture fewer namespaces at a time (--namespace) or raise --max-rules",
    ),
}


def overflow_lines(overflow: Mapping[str, int], caps: Mapping[str, int]) -> list[str]:
    """What a live session did not keep because a memory cap was reached: those flows have
    no rule in the policies written, so the words say how to get them."""
    lines = []
    for cap, flows in sorted(overflow.items()):
        if not flows:
            continue
        what, flag, unit, advice = _CAP_WORDS.get(
            cap, (cap, f"--max-{cap}", cap, f"raise --max-{cap}")
        )
        lines.append(
            f"Not kept ({flag} {caps.get(cap, 0)} {unit} reached): {_plural(flows, 'flow')} of "
            f"{what} have no rule in what was written; {advice}"
        )
    return lines


def _scope_lines(scope: ScopeReport) -> list[str]:
    """What was written for the cluster rather than for the capture, and how to narrow it."""
    if scope.empty:
        return []
    lines = ["", "Written for the cluster, not only for the capture:"]
    for service in scope.services[:MAX_FILES_SHOWN]:
        name = f"{service.namespace}/{service.workload}"
        ports = ", ".join(service.ports)
        peers = ", ".join(service.peers) + (f" (+{service.more} more)" if service.more else "")
        if service.direction == "ingress":
            why = "the cluster's DNS" if service.dns else "a service"
            lines.append(
                f"  {name} {ports}: {why} callers of {_plural(service.namespaces, 'namespace')} "
                f"reach; admits the whole cluster (seen: {peers})"
            )
        else:
            lines.append(
                f"  {name} {ports}: a client of {_plural(service.namespaces, 'namespace')}; "
                f"reaches the whole cluster (seen: {peers})"
            )
        lines.append(f"    only today's peers: --exact-peers {name}")
    if len(scope.services) > MAX_FILES_SHOWN:
        lines.append(f"  … and {len(scope.services) - MAX_FILES_SHOWN} more (-o json)")
    if scope.dns_added:
        lines.append(
            f"  DNS (UDP and TCP 53) to {', '.join(scope.dns_servers)} added to "
            f"{len(scope.dns_added)} egress "
            f"{'policy' if len(scope.dns_added) == 1 else 'policies'} the capture showed no "
            "DNS for (--no-dns-rule: none)"
        )
    for known in scope.platform[:MAX_FILES_SHOWN]:
        name = f"{known.namespace}/{known.workload}"
        done = (
            f"{_plural(known.rules, 'rule')} ({_plural(known.flows, 'flow')}) not written"
            if known.treatment == "system"
            else f"{_plural(known.rules, 'rule')} written for the whole cluster ({known.treatment})"
        )
        lines.append(
            f"  {name}: recognised as {known.name} ({known.recognised_by}): {known.why}; {done}"
        )
    if scope.platform:
        lines.append(
            "    the catalogue: docs/catalogue.md; --catalogue FILE adds entries, --catalogue none "
            "turns it off, --exact-peers NS/WORKLOAD writes one workload's rules"
        )
    if len(scope.platform) > MAX_FILES_SHOWN:
        lines.append(f"  … and {len(scope.platform) - MAX_FILES_SHOWN} more (-o json)")
    for skipped in scope.system[:MAX_FILES_SHOWN]:
        lines.append(
            f"  {skipped.namespace}/{skipped.workload}: {_plural(skipped.rules, 'rule')} "
            f"({_plural(skipped.flows, 'flow')}) not written: a system namespace's workload "
            "(--include-system-namespaces writes them)"
        )
    if len(scope.system) > MAX_FILES_SHOWN:
        lines.append(f"  … and {len(scope.system) - MAX_FILES_SHOWN} more (-o json)")
    return lines


def _capture_lines(capture: CaptureProfile | None) -> list[str]:
    """How long and how wide the capture is, in one line."""
    return [f"Capture: {capture.text()}"] if capture is not None and capture.flows else []


MAX_READINESS_SHOWN = 20


def readiness_lines(profiles: Sequence[WorkloadProfile]) -> list[str]:
    """Each workload's readiness, those to keep learning first, with why."""
    if not profiles:
        return []
    lines = ["", f"Readiness: {readiness_summary(profiles)}"]
    for profile in profiles[:MAX_READINESS_SHOWN]:
        if profile.ready:
            lines.append(f"  ready          {profile.name}: {profile.stable_line()}")
        else:
            lines.append(f"  keep learning  {profile.name}: {'; '.join(profile.reasons)}")
    if len(profiles) > MAX_READINESS_SHOWN:
        lines.append(f"  … and {len(profiles) - MAX_READINESS_SHOWN} more (-o json)")
    if any(not p.ready for p in profiles):
        lines.append(
            "  capture longer (the evidence adds up over runs), or write only the ready ones: "
            "--only-ready; the thresholds: --ready-min-span, --ready-stable-for, "
            "--ready-min-flows"
        )
    return lines


MAX_DECLARED_SHOWN = 20


def declared_lines(read: DeclaredRead | None, scope: ScopeReport) -> list[str]:
    """What the cluster declares and what was kept open for it (§D58)."""
    if read is None:
        return []
    objects = ", ".join(f"{n} {kind}" for kind, n in sorted(read.objects.items())) or "nothing"
    lines = [
        "",
        f"What the cluster declares ({', '.join(read.sources)}: {objects}; "
        f"{read.dependencies} {'dependency' if read.dependencies == 1 else 'dependencies'}):",
    ]
    kept = scope.declared
    policies = {(d.namespace, d.workload) for d in kept}
    if kept:
        lines.append(
            f"  kept open: {_plural(len(kept), 'rule')} in {_plural(len(policies), 'policy')}".replace(
                "policys", "policies"
            )
        )
    elif read.dependencies:
        lines.append("  kept open: nothing (no policy written polices an end of a dependency)")
    for item in kept[:MAX_DECLARED_SHOWN]:
        lines.append(
            f"    {item.namespace}/{item.workload} {item.direction} {item.traffic}: {item.by}"
        )
    if len(kept) > MAX_DECLARED_SHOWN:
        lines.append(f"    … and {len(kept) - MAX_DECLARED_SHOWN} more (-o json)")
    if scope.dns_caches:
        lines.append(
            f"  every DNS rule also admits the node-local cache: {', '.join(scope.dns_caches)}"
        )
    for note in read.notes[:MAX_DECLARED_SHOWN]:
        lines.append(f"  left out: {note}")
    if len(read.notes) > MAX_DECLARED_SHOWN:
        lines.append(f"  … and {len(read.notes) - MAX_DECLARED_SHOWN} more left out (-o json)")
    return lines


def _session_lines(report: RunReport) -> list[str]:
    """What the evidence counted: a rerun of a recorded capture replaces, never adds."""
    if report.recorded_by:
        return [
            f"Evidence unchanged: session {report.recorded_by} already counted these inputs "
            "(and more); replaying them again adds nothing"
        ]
    if not report.replaced:
        return []
    if report.replaced == (report.session,):
        return [
            f"  this capture was recorded before (session {report.session}): its counts were "
            "replaced, not added"
        ]
    earlier = ", ".join(s for s in report.replaced if s != report.session)
    return [
        f"  session {report.session} read again what {earlier} read (a file that grew): "
        "their counts were replaced by this run's, so each flow counts once"
    ]


_FLOW_PATH_FLAGS = {
    "learn": "--learn forwarded",
    "learn_allowed": "--learn-allowed",
    "include_audit": "--include-audit",
    "include_system": "--include-system-namespaces",
}


def _inputs_words(report: RunReport) -> str:
    """The run's inputs as a shell reads them ("" when one was standard input or there
    were none: no command can read those flows again)."""
    if not report.inputs or "-" in report.inputs:
        return ""
    return " ".join(shlex.quote(name) for name in report.inputs)


def _next_steps(report: RunReport, first: FileOutcome) -> list[str]:
    output_dir = shlex.quote(report.output_dir)
    target = shlex.quote(f"{first.namespace}/{first.workload}") if first.namespace else ""
    apply = "-k" if report.kustomized else "-R -f"
    evidence = (
        f" --evidence-dir {shlex.quote(report.evidence_flag)}" if report.evidence_flag else ""
    )
    same = "".join(f" {_FLOW_PATH_FLAGS[s]}" for s in report.flow_path if s in _FLOW_PATH_FLAGS)
    lines = [
        "",
        "Next steps:",
        f"  review:  kubectl diff {apply} {output_dir}   (reads the cluster, changes nothing)",
    ]
    captured = _inputs_words(report)
    if report.relay:  # no capture file to check against: judge on the relay's traffic
        lines.append(
            f"  check:   cpg shadow --server {shlex.quote(report.relay)} -d {output_dir} "
            "--duration 10m   (the plan of live traffic; changes nothing)"
        )
    elif not captured:
        lines.append(
            "  check:   keep the flows in a file (they came on standard input) to check the "
            "policies with cpg verify and cpg plan"
        )
    else:
        lines.append(f"  check:   cpg verify {captured} -d {output_dir}{same}")
        if report.decisions.get(Decision.NOT_A_DROP, 0) or "learn" in report.flow_path:
            lines.append(f"  plan:    cpg plan {captured} -d {output_dir}{evidence}")
        else:
            lines.append(
                "  plan:    this capture holds only drops; cpg plan judges what would break "
                "on one with every verdict (hubble observe without --verdict)"
            )
    if report.evidence_dir is not None and target:
        lines.append(f"  explain: cpg explain {target} -d {output_dir}{evidence}")
    lines.append(f"  apply:   kubectl apply {apply} {output_dir}   (yourself, once reviewed)")
    return lines


_CHANGED = ("created", "updated", "would-create", "would-update")
MAX_FILES_SHOWN = 20


def _relative(path: str, root: str) -> str:
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def _verify_lines(checked: VerifyReport | None) -> list[str]:
    if checked is None:
        return []
    lines = [
        f"  verify: {check.traffic}: {check.reason}"
        for check in checked.checks
        if check.allowed == (check.kind == "explicit_deny")
    ]
    lines.append(f"Verify: {checked.summary()}")
    return lines


def run_data(report: RunReport) -> dict[str, Any]:
    """The same facts as the text summary, for machines (``-o json``): the wire form of a
    RunReport."""
    stats = report.stats
    agg = report
    health = report.health
    data: dict[str, Any] = {
        "source": report.source,
        "output_dir": report.output_dir,
        "dry_run": report.dry_run,
        "lines_read": stats.lines_read,
        "blank_lines": stats.blank_lines,
        "malformed": {
            "count": stats.malformed,
            "examples": [{"line": n, "error": why} for n, why in stats.malformed_examples],
        },
        "truncated": stats.truncated or None,
        "lost_events": stats.lost_events,
        "flows": {"total": agg.total_flows}
        | {d.value: agg.decisions.get(d, 0) for d, _ in DECISION_LABELS},
        "ignored": {
            "protocols": dict(sorted(agg.ignored_protocols.items())),
            "drop_reasons": dict(sorted(agg.ignored_reasons.items())),
        },
        "outside_namespaces": agg.filtered_namespace,
        "policies": [
            {
                "path": f.path,
                "outcome": f.outcome,
                **(
                    {"namespace": f.namespace, "workload": f.workload, "name": f.name}
                    if f.namespace is not None
                    else {}
                ),
                **({"error": f.error} if f.error else {}),
                **({"diff": f.diff} if f.diff else {}),
                **({"beside": f.beside} if f.beside else {}),
            }
            for f in report.files
        ],
        "drops": to_data(sorted(health.drops, key=severity_order)) if health else [],
        "noise": dict(health.noise) if health else {},
        "findings": [
            {
                **to_data(finding),
                **dict(zip(("label", "explanation", "fix"), finding.advice(), strict=True)),
            }
            for finding in health.findings
        ]
        if health
        else [],
        "window": to_data(health.window) if health else None,
        "evidence_dir": report.evidence_dir,
        "evidence_session": {
            "id": report.session,
            "replaced": list(report.replaced),
            "recorded_by": report.recorded_by,
        },
        "cluster_health": report.health_path,
        "held_back": [attrs.asdict(held) for held in report.held_back],
        "waiting": [attrs.asdict(waiting) for waiting in report.waiting],
        "errors": [f.error for f in report.failed] + list(report.evidence_errors),
        "exit_code": report.exit_code,
    }
    if report.identities:
        data["identities"] = dict(sorted(report.identities.items()))
    if not report.scope.empty:
        data["cluster_scope"] = attrs.asdict(report.scope)
    if report.capture is not None:
        data["capture_profile"] = attrs.asdict(report.capture)
    if report.profiles:
        data["readiness"] = [attrs.asdict(p) for p in report.profiles]
    if report.declared is not None:
        data["declarations"] = {
            "sources": list(report.declared.sources),
            "objects": dict(sorted(report.declared.objects.items())),
            "dependencies": report.declared.dependencies,
            "notes": list(report.declared.notes),
        }
    if report.notes:
        data["notes"] = list(report.notes)
    if any(report.overflow.values()):
        data["overflow"] = {
            cap: {"flows": flows, "cap": report.caps.get(cap, 0)}
            for cap, flows in sorted(report.overflow.items())
            if flows
        }
    data.update(report.extra)
    if report.verify is not None:
        data["verify"] = to_data(report.verify)
    return data


converter.register_unstructure_hook(RunReport, run_data)


def run_json(report: RunReport) -> str:
    """``-o json``: the report's wire form, indented."""
    return json.dumps(to_data(report), indent=2, ensure_ascii=False)
