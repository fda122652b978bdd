"""Which IPs the capture showed as pods', bounded: a session whose pods come and go keeps the
pods it saw last, and forgets the rest (ARCHITECTURE §D56).

Plans need this only for a world peer whose IP was a pod's (Hubble could not identify it:
§D22): such an entry names the pod, or becomes a finding, never a CIDR rule. Those IPs are
never forgotten while an entry holds them; any other pod is forgotten once ``limit`` pods
were seen after it (by the flows' own times, so the result does not depend on the order in
which workers' partial results are merged)."""

from __future__ import annotations

from collections.abc import Collection

from cpg_core._base.flow import Endpoint
from cpg_core._flows.synthesis import endpoint_order

POD_MEMORY_LIMIT = 4096
"""The pods kept at least after forgetting; forgetting starts at twice as many."""


class PodMemory:
    """IP → the newest time a pod was seen with it, and the pod (labels known) it belongs to:
    the first in :func:`endpoint_order` of the pods seen with it."""

    __slots__ = ("_endpoints", "_seen", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = POD_MEMORY_LIMIT if limit is None else limit
        self._seen: dict[str, str] = {}
        self._endpoints: dict[str, Endpoint] = {}

    def __eq__(self, other: object) -> bool:
        """The same pods at the same IPs (the times only order forgetting: the quick
        reader notes fewer sightings of a pod than the full path, never other pods)."""
        if not isinstance(other, PodMemory):
            return NotImplemented
        return self._seen.keys() == other._seen.keys() and self._endpoints == other._endpoints

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PodMemory({len(self._seen)} pods, {len(self._endpoints)} with labels)"

    def __contains__(self, ip: object) -> bool:
        return ip in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def __bool__(self) -> bool:
        return bool(self._seen)

    @property
    def full(self) -> bool:
        """Whether :meth:`forget` has something to do."""
        return len(self._seen) >= 2 * self.limit

    def endpoint(self, ip: str) -> Endpoint | None:
        """The pod seen with ``ip``, when its labels were known."""
        return self._endpoints.get(ip)

    def note(self, ip: str, when: str, endpoint: Endpoint | None) -> None:
        """A pod seen with ``ip`` at time key ``when``; ``endpoint`` when its labels are
        usable in a rule."""
        seen = self._seen
        held = seen.get(ip)
        if held is None or when > held:
            seen[ip] = when
        if endpoint is not None:
            known = self._endpoints.get(ip)
            if known is not endpoint and (
                known is None or endpoint_order(endpoint) < endpoint_order(known)
            ):
                self._endpoints[ip] = endpoint

    def forget(self, keep: Collection[str] = ()) -> int:
        """Forget all but the ``limit`` pods seen last (ties broken by IP) and those in
        ``keep``: how many were forgotten."""
        seen = self._seen
        if len(seen) <= self.limit:
            return 0
        newest = sorted(seen.items(), key=lambda item: (item[1], item[0]), reverse=True)
        gone = [ip for ip, _ in newest[self.limit :] if ip not in keep]
        endpoints = self._endpoints
        for ip in gone:
            del seen[ip]
            endpoints.pop(ip, None)
        return len(gone)

    def absorb(self, other: PodMemory) -> None:
        """Add what ``other`` saw (the result does not depend on the order of absorbing)."""
        seen = self._seen
        for ip, when in other._seen.items():
            held = seen.get(ip)
            if held is None or when > held:
                seen[ip] = when
        endpoints = self._endpoints
        for ip, endpoint in other._endpoints.items():
            known = endpoints.get(ip)
            if known is None or endpoint_order(endpoint) < endpoint_order(known):
                endpoints[ip] = endpoint

    def copy(self) -> PodMemory:
        copied = PodMemory(self.limit)
        copied._seen = dict(self._seen)
        copied._endpoints = dict(self._endpoints)
        return copied
