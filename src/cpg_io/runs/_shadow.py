"""``cpg shadow``: proposed policies judged on live traffic before anyone applies them. Every
verdict is streamed from Hubble Relay and judged with the plan's matcher as it arrives; each
flush prints the traffic that would break for the first time and rewrites the plan so far, so
a run of hours or days can be read while it goes. The final plan is ``cpg plan`` over the
same flows as a file."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from prometheus_client.core import Metric

from cpg_core import CANNOT_JUDGE, Message, PolicyEvidence, Setting
from cpg_core.identities import IdentityBook
from cpg_core.readiness import not_ready_first, seconds_of, shadowed
from cpg_core.reports import PlanView, plan_rollout, render
from cpg_core.shadow import PlanJudge, ShadowRequest, WouldBreak
from cpg_io.errors import IoError
from cpg_io.evidence_store import EvidenceStore, default_evidence_root
from cpg_io.identities import identity_refresh
from cpg_io.kube import RelayConnection
from cpg_io.metrics import family
from cpg_io.relay_receiver import StreamSettings
from cpg_io.runs._access import RelayAccess, open_relay
from cpg_io.runs._plan import judged_policies
from cpg_io.runs._relay import RelayReader, every_verdict_stream
from cpg_io.runs._session import rfc3339, utc_now
from cpg_io.store import atomic_write_text

log = logging.getLogger("cpg.shadow")


@attrs.frozen
class ShadowSettings:
    stream: StreamSettings
    proposal: str
    """The folder of the proposed policies, as the plan names it."""
    origin: str
    """Where the policies applied today came from."""
    policies: int
    flush_interval: float = 5.0
    duration: float | None = None
    """Seconds to run once the relay answered (``--duration``)."""
    deadline: float | None = None
    """Seconds from the start to ``--until``."""
    report: Path | None = None
    """The plan so far, rewritten at every flush (``cpg plan -o json``'s shape)."""
    proposed: tuple[dict[str, Any], ...] = ()
    """The proposed policies, for the rollout order (as ``cpg plan`` gives it)."""
    files: Mapping[str, str] = attrs.Factory(dict)
    """Each proposed policy's file, by ``namespace/name``."""


def shadow(
    request: ShadowRequest,
    access: RelayAccess,
    *,
    evidence_dir: Path | None = None,
    now: str | None = None,
    on_break: Callable[[list[WouldBreak]], None] | None = None,
) -> ShadowCapture:
    """A shadow session, connected and ready to run (``cpg shadow`` and a cpg-mcp session
    alike): the way to the relay set up, the proposed and current policies read once.
    RequestError for a window that is over, RelaySetupError for a failed set-up; what could
    not be read but does not stop the session is in ``problems``. The caller runs it and
    closes it, whatever happens."""
    now = now or rfc3339(utc_now())
    check, live = request.check, request.live
    since, _until, _stop_after = live.live_window(now)
    duration, deadline = live.live_stop(now)
    relay = open_relay(live, access)
    try:
        judged = judged_policies(
            check,
            kubeconfig=access.kubeconfig,
            context=access.context,
            kube_dir=relay.temp_dir,
        )
        problems = list(judged.problems)
        store = EvidenceStore(evidence_dir or default_evidence_root(judged.folder), judged.folder)
        evidence: dict[str, PolicyEvidence] = {}
        for namespace, _workload, doc in store.read_all(problems.append, None):
            evidence[f"{namespace}/{doc.policy.name}"] = doc
    except BaseException:
        relay.close()
        raise
    judge = PlanJudge(
        judged.proposal,
        judged.current,
        current_source=judged.source,
        options=check.decide_options(judged.agent),
        evidence=evidence,
        agent=judged.agent,
        max_kinds=live.live.max_kinds,
        declarations=judged.declarations,
        readiness=check.readiness,
    )
    stream = every_verdict_stream(
        live, relay.server, since=since, tls=access.tls, include_audit=check.include_audit
    )
    settings = ShadowSettings(
        stream=stream,
        proposal=str(judged.folder),
        origin=judged.origin,
        policies=len(judged.proposal),
        flush_interval=live.live.flush_interval,
        duration=duration,
        deadline=deadline,
        report=Path(request.report) if request.report else None,
        proposed=tuple(judged.proposal),
        files=judged.files,
    )
    capture = ShadowCapture(settings, judge, on_break=on_break, relay=relay, problems=problems)
    capture.identities = judged.identities
    capture.metrics_addr = live.live.metrics_addr
    capture.identity_refresh = identity_refresh(
        check.identity_sources,
        kubeconfig=access.kubeconfig,
        context=access.context,
        temp_dir=relay.temp_dir,
    )
    return capture


def _break_key(item: WouldBreak) -> tuple[str, ...]:
    t = item.traffic
    return (t.direction, t.source, t.destination, t.protocol, str(t.port), item.policy)


class ShadowCapture(RelayReader):
    """One shadow session. ``on_break`` hears, at each flush, the kinds of traffic that would
    break for the first time; ``stop`` ends the session."""

    def __init__(
        self,
        settings: ShadowSettings,
        judge: PlanJudge,
        on_break: Callable[[list[WouldBreak]], None] | None = None,
        *,
        relay: RelayConnection | None = None,
        problems: list[str] | None = None,
    ) -> None:
        super().__init__(settings.stream)
        self.relay = relay
        self.problems = problems or []
        """What could not be read at set-up (evidence, the cluster's version), as warnings."""
        self.settings = settings
        self.judge = judge
        self.on_break = on_break
        self.flushes = 0
        self.report_error = ""
        self.identities: IdentityBook | None = None
        """Fills in the sides of each flow Hubble left without identity, before judging."""
        self.last: PlanView | None = None
        """The plan as of the last flush (a status line reads it)."""
        self._announced: set[tuple[str, ...]] = set()
        self._breaking: dict[str, int] = {}
        """Flows that would break so far, by the endpoint newly policed."""
        self._last_break: dict[str, float] = {}
        """When each endpoint last had a flow that would break: the newest flow of the flush
        that counted more of them (to a flush interval)."""
        self._flushing = threading.Lock()
        self._planning = threading.Lock()

    def _take_flow(self, f: object, response: object) -> None:
        flow = self._converter.flow(f, response)
        if self.identities is not None:
            flow = self.identities.resolve(flow)[0]
        self._judge(self.judge.add, flow)

    def _use_identities(self, book: IdentityBook | None) -> None:
        self.identities = book

    def metric_families(self) -> Iterator[Metric]:
        yield from super().metric_families()
        view = self.last
        breaks = view.plan.would_break if view is not None else ()
        yield family("cpg_shadow_would_break", value=len(breaks))
        by_policy: dict[str, int] = {}
        for item in breaks:
            name = item.policy or "(none)"
            by_policy[name] = by_policy.get(name, 0) + item.traffic.flows
        flows = family("cpg_shadow_would_break_flows", ["policy"])
        for name, count in sorted(by_policy.items()):
            flows.add_metric([name], count)
        yield flows

    def flows_not_kept(self) -> dict[str, int]:
        return {"kinds": self.judge.kept.unjudged}

    def cap_warning(self, cap: str) -> str:
        return Message(
            Setting("max_kinds"),
            f" {self.judge.kept.cap} reached: flows of further new kinds of traffic are "
            "counted, not judged, so the verdict can no longer be 'nothing breaks' (raise ",
            Setting("max_kinds"),
            " or watch fewer namespaces at a time)",
        )

    def so_far(self) -> PlanView:
        """The plan of every flow received so far (the session is not disturbed: a copy of
        what was received is judged while the stream goes on; one plan at a time)."""
        with self._planning:
            with self._lock:
                judged = self.judge.snapshot()
            plan = judged.plan()
            self.judge.keep_memos(judged)
        settings = self.settings
        return PlanView(
            plan=plan,
            proposal=settings.proposal,
            origin=settings.origin,
            policies=settings.policies,
        )

    def flush(self) -> PlanView:
        """Judge what was received, tell ``on_break`` what breaks for the first time, and
        rewrite the report file."""
        with self._flushing:
            view = self.last = self._judged_ready(self.so_far())
            self.flushes += 1
            fresh = []
            for item in view.plan.would_break:
                key = _break_key(item)
                if key not in self._announced:
                    self._announced.add(key)
                    fresh.append(item)
            if fresh and self.on_break is not None:
                self.on_break(fresh)
            report = self.settings.report
            if report is not None:
                try:
                    atomic_write_text(report, render(view, "json") + "\n")
                    self.report_error = ""
                except (OSError, IoError) as exc:
                    if not self.report_error:
                        log.warning("could not write the plan so far to %s: %s", report, exc)
                    self.report_error = str(exc)
            return view

    def _judged_ready(self, view: PlanView) -> PlanView:
        """The plan with each workload's readiness judged on this run too (§D59)."""
        plan = view.plan
        capture = plan.capture
        last = seconds_of(capture.last) if capture is not None else None
        counted: dict[str, int] = {}
        for item in plan.would_break:
            counted[item.endpoint] = counted.get(item.endpoint, 0) + max(item.traffic.flows, 1)
        for endpoint, flows in counted.items():
            if flows > self._breaking.get(endpoint, 0) and last is not None:
                self._last_break[endpoint] = last
        self._breaking = counted
        span = capture.span_seconds if capture is not None else 0.0
        judged = [
            shadowed(
                profile,
                self.judge.readiness_rules,
                span=span,
                last=last,
                last_break=self._last_break.get(profile.name),
            )
            for profile in plan.readiness
        ]
        plan = attrs.evolve(plan, readiness=tuple(not_ready_first(judged)))
        rollout = plan_rollout(
            plan,
            self.settings.proposed,
            self.settings.files,
            folder=self.settings.proposal,
            shadow_for=self.judge.readiness_rules.stable_for,
        )
        return attrs.evolve(view, plan=attrs.evolve(plan, rollout=rollout))

    async def run(self) -> PlanView:
        """Stream until stopped, then judge everything received: the final plan."""
        settings = self.settings

        def flushed() -> None:
            self.flush()

        await self._follow(
            flushed, settings.flush_interval, settings.duration, lambda: False, settings.deadline
        )
        return await asyncio.to_thread(self.flush)


def shadow_verdict(view: PlanView) -> tuple[int, str]:
    """The exit code of a finished shadow session (0 nothing breaks, 3 something would or a
    policy map would overflow, 4 nothing forwarded was seen to judge) and what to say."""
    plan = view.plan
    if plan.breaks:
        return 3, ""
    if plan.overflows:
        return 3, "a pod's policy map would overflow: its agent could not apply the policies"
    if plan.unjudged_flows:
        return 4, (
            f"{plan.unjudged_flows} flows of kinds of traffic past the session's cap were not "
            "judged: cannot say nothing breaks"
        )
    if not plan.can_judge:
        return 4, CANNOT_JUDGE.replace("this capture", "the stream")
    return 0, ""
