"""Per-rule attribution: how many flows asked for an allow entry, when, of which kind, and a
few sample flows (the newest, chosen by content so the choice never depends on flow order)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

import attrs

from cpg_core._base.documents import ZERO_TIME, DeclaredBy, SampleFlow, SampleSide
from cpg_core._base.dropreasons import classify_reason, reason_name
from cpg_core._base.flow import Endpoint, Flow, Verdict
from cpg_core._base.l7 import dns_name, url_path
from cpg_core._base.labels import select_labels, workload_name

NO_TIME = ""
_AUDIT = int(Verdict.AUDIT)
_VERDICT_NAMES = {int(v): v.name for v in Verdict}


def time_key(text: str) -> str:
    """An RFC 3339 time as UTC with nine fractional digits, so that keys sort as times do.
    "" for an absent or unreadable time."""
    size = len(text)
    if size == 30 and text[-1] == "Z" and text[19] == ".":
        return text  # Hubble's own nanosecond form
    if text[-1:] == "Z" and text[10:11] == "T" and text[4:5] == "-":
        if size in (24, 27) and text[19] == "." and text[20:-1].isdigit():
            return text[:-1] + "0" * (30 - size) + "Z"  # milli- or microseconds
        if size == 20:
            return text[:-1] + ".000000000Z"  # whole seconds
    if not text:
        return NO_TIME
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return NO_TIME
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    fraction = ""
    if "." in text:  # keep nanoseconds that datetime cannot hold
        digits = text.split(".", 1)[1]
        digits = "".join(c for c in digits[:9] if c.isdigit())
        fraction = digits.ljust(9, "0")
    else:
        fraction = "000000000"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + "." + fraction + "Z"


_LEARNED_CLASSES = {int(Verdict.FORWARDED): "forwarded", int(Verdict.REDIRECTED): "redirected"}
"""The class of a rule learned from traffic that works today (``--learn forwarded``)."""


def flow_class(flow: Flow) -> str:
    """Why this flow was a candidate: ``audit``, ``policy`` (POLICY_DENIED) or ``unknown``."""
    if flow.verdict == _AUDIT:
        return "audit"
    if flow.verdict in _LEARNED_CLASSES:
        return _LEARNED_CLASSES[flow.verdict]
    return classify_reason(flow.drop_reason).value


class SampleKey(NamedTuple):
    """What a sample shows of a flow: compact, and ordered by time then content so the choice
    of samples never depends on the order flows arrived in."""

    time: str
    uuid: str
    source_ip: str
    destination_ip: str
    node: str
    verdict: int
    drop_reason: int
    drop_reason_text: str
    source: Endpoint
    destination: Endpoint
    l7: str
    """The concrete L7 request (``GET /users/17``), or ""."""


def _time_of(sample: Sample) -> str:
    """A sample's time key, without parsing one kept as its line."""
    if isinstance(sample, tuple):
        return sample[2]
    text = sample.time
    return text if (len(text) == 30 and text[-1] == "Z") else time_key(text)


def _newer(current: Sample, other: Sample) -> Sample:
    """Of two samples of one endpoint pair, the one to keep: the newer, and at the same time
    the greater flow (both parsed only then; samples may still be lines)."""
    theirs, ours = _time_of(other), _time_of(current)
    if theirs != ours:
        return other if theirs > ours else current
    flow = other if not isinstance(other, tuple) else other[0](other[1])
    held = current if not isinstance(current, tuple) else current[0](current[1])
    return flow if sample_of(flow) > sample_of(held) else held


def sample_of(flow: Flow) -> SampleKey:
    text = flow.time
    return SampleKey(
        text if (len(text) == 30 and text[-1] == "Z") else time_key(text),
        flow.uuid,
        flow.source_ip,
        flow.destination_ip,
        flow.node_name,
        flow.verdict,
        flow.drop_reason,
        flow.drop_reason_text,
        flow.source,
        flow.destination,
        _l7_detail(flow),
    )


def _l7_detail(flow: Flow) -> str:
    """The concrete L7 request of a sample: ``GET /users/17`` or ``DNS api.example.com``."""
    l7 = flow.l7
    if l7 is None:
        return ""
    if l7.http is not None and l7.http.method:
        return f"{l7.http.method.strip().upper()} {url_path(l7.http.url)}"
    if l7.dns is not None and l7.dns.query:
        return f"DNS {dns_name(l7.dns.query)}"
    return ""


PendingFlow = tuple[Callable[[Any], Flow], Any, str]
"""A sample not parsed yet: (how to parse it, the raw record, its time key). The fast paths
keep this instead of a Flow: in time-ordered input every flow replaces its pair's sample, so
most samples are replaced before anyone reads them, and only the survivors are ever parsed."""
Sample = Flow | PendingFlow


@attrs.define(slots=True)
class RuleStats:
    """What one allow entry (direction, peer, protocol, port) was built from.

    Samples are the newest flows with at most one per (source, destination) endpoint pair:
    a reviewer learns more from ten different pods than from one pod ten times, and keeping
    one flow per pair is much cheaper than keeping every recent flow."""

    count: int = 0
    first: str = NO_TIME
    last: str = NO_TIME
    classes: dict[str, int] = attrs.Factory(dict)
    samples: dict[tuple[Endpoint, Endpoint], Sample] = attrs.Factory(dict)
    declared: tuple[DeclaredBy, ...] = ()
    """The cluster objects that declare this entry (sorted): it is kept open for them, not
    (only) for the flows counted."""

    def add(self, flow: Flow, flow_cls: str, max_samples: int) -> None:
        self.count += 1
        text = flow.time
        key = text if (len(text) == 30 and text[-1] == "Z") else time_key(text)
        newest = key > self.last
        if key:
            if not self.first or key < self.first:
                self.first = key
            if newest:
                self.last = key
        classes = self.classes
        classes[flow_cls] = classes.get(flow_cls, 0) + 1
        if max_samples:
            samples = self.samples
            pair = (flow.source, flow.destination)
            if newest:  # the usual case, flows in time order: newest for its pair too
                samples[pair] = flow
            else:
                current = samples.get(pair)
                if current is None:
                    samples[pair] = flow
                else:
                    if isinstance(current, tuple):  # parsed once, then kept parsed
                        current = samples[pair] = current[0](current[1])
                    if sample_of(flow) > sample_of(current):
                        samples[pair] = flow
            if len(samples) > 4 * max_samples:
                self._trim(max_samples)

    def absorb_counted(
        self,
        count: int,
        first: str,
        last: str,
        pair: tuple[Endpoint, Endpoint],
        sample: PendingFlow | None,
        max_samples: int,
    ) -> None:
        """What :meth:`add` makes of ``count`` policy-denied flows of one endpoint pair,
        oldest and newest time keys ``first`` and ``last``, ``sample`` the newest (unparsed:
        ``(parse, raw, key)``; None when samples are not kept), all at once."""
        self.count += count
        if first and (not self.first or first < self.first):
            self.first = first
        if last > self.last:
            self.last = last
        classes = self.classes
        classes["policy"] = classes.get("policy", 0) + count
        if not max_samples or sample is None:
            return
        samples = self.samples
        current = samples.get(pair)
        samples[pair] = sample if current is None else _newer(current, sample)
        if len(samples) > 4 * max_samples:
            self._trim(max_samples)

    def _settle(self) -> dict[tuple[Endpoint, Endpoint], Flow]:
        """Parse the pending samples; the samples, every one a Flow."""
        samples = self.samples
        for pair, sample in samples.items():
            if isinstance(sample, tuple):
                samples[pair] = sample[0](sample[1])
        return samples  # type: ignore[return-value]

    def _trim(self, limit: int) -> None:
        kept = sorted(self._settle().items(), key=lambda item: sample_of(item[1]))[-limit:]
        self.samples = dict(kept)

    def sample_flows(self) -> list[Flow]:
        """The samples as flows (pending ones parsed)."""
        return list(self._settle().values())

    def take(self) -> RuleStats:
        """What this entry gathered, moved into a new RuleStats, and this one empty again: a
        live capture hands an entry's flows to the writer without copying or parsing them,
        while the fast path keeps adding to this object."""
        taken = RuleStats(
            self.count, self.first, self.last, self.classes, self.samples, self.declared
        )
        self.count = 0
        self.first = self.last = NO_TIME
        self.classes = {}
        self.samples = {}
        return taken

    def copy(self) -> RuleStats:
        return RuleStats(
            self.count,
            self.first,
            self.last,
            dict(self.classes),
            dict(self._settle()),
            self.declared,
        )

    def absorb(self, other: RuleStats, max_samples: int) -> None:
        self.count += other.count
        if other.first and (not self.first or other.first < self.first):
            self.first = other.first
        self.last = max(self.last, other.last)
        for cls, n in other.classes.items():
            self.classes[cls] = self.classes.get(cls, 0) + n
        if other.declared and other.declared != self.declared:
            self.declared = tuple(sorted({*self.declared, *other.declared}))
        mine = self.samples
        for pair, sample in other.samples.items():
            current = mine.get(pair)
            mine[pair] = sample if current is None else _newer(current, sample)
        if max_samples and len(self.samples) > max_samples:
            self._trim(max_samples)
        elif not max_samples:
            self.samples = {}

    def __reduce__(self) -> tuple[type[RuleStats], tuple[object, ...]]:
        # Positional: a worker hands back one of these per allow entry.
        fields = (self.count, self.first, self.last, self.classes, self.samples)
        return (RuleStats, (*fields, self.declared) if self.declared else fields)

    def newest(self, limit: int) -> list[SampleKey]:
        """The ``limit`` newest samples (one per endpoint pair), oldest first."""
        if not limit:
            return []
        return sorted(sample_of(flow) for flow in self._settle().values())[-limit:]


@functools.lru_cache(maxsize=16384)
def _workload_of(labels: tuple[str, ...]) -> str:
    return workload_name(select_labels(labels))


@functools.lru_cache(maxsize=4096)  # per pod: small, so that pods that are gone leave (§D56)
def _side(endpoint: Endpoint, ip: str) -> SampleSide:
    return SampleSide(
        namespace=endpoint.namespace,
        workload=_workload_of(endpoint.labels),
        pod=endpoint.pod_name,
        ip=ip,
    )


_DROP_VERDICTS = frozenset({int(Verdict.DROPPED), int(Verdict.AUDIT), int(Verdict.ERROR)})


def sample_record(sample: SampleKey, protocol: str, port: int) -> SampleFlow:
    """One evidence sample, field names as in the Go tool's schema v2 (plus ``node``)."""
    return SampleFlow(
        time=sample.time or ZERO_TIME,
        src=_side(sample.source, sample.source_ip),
        dst=_side(sample.destination, sample.destination_ip),
        port=port,
        protocol=protocol,
        verdict=_VERDICT_NAMES.get(sample.verdict, str(sample.verdict)),
        drop_reason=(
            sample.drop_reason_text or reason_name(sample.drop_reason)
            if sample.verdict in _DROP_VERDICTS
            else ""  # a learned flow was not dropped
        ),
        node=sample.node,
        l7=sample.l7,
    )
