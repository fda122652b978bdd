"""Which flows of a capture a question is about, with ``hubble observe``'s filter names and
meanings where they overlap: a pod by ``[namespace/]name`` prefix, labels as ``key=value``
(all must match), namespaces, the destination port, the L4 protocol, the verdict, the uuid.
Flags of one kind are alternatives (any may match); different kinds must all match."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cpg_core._base.flow import Endpoint, Flow, Verdict
from cpg_core._base.request_error import RequestError, split_values
from cpg_core.text import shown

VERDICTS = tuple(v.name for v in Verdict if v.name != "VERDICT_UNKNOWN")


def _labels_of(endpoint: Endpoint) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in endpoint.labels:
        source, _, rest = text.partition(":")
        key, _, value = rest.partition("=")
        out.setdefault(key, value)
        out.setdefault(f"{source}:{key}", value)
    if endpoint.namespace:
        out.setdefault("io.kubernetes.pod.namespace", endpoint.namespace)
    return out


def _parse_selector(text: str, field: str) -> tuple[tuple[str, str | None], ...]:
    pairs = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not key.strip():
            raise RequestError(field, f"{shown(text)}: a label is key=value (or key alone)")
        pairs.append((key.strip(), value.strip() if eq else None))
    if not pairs:
        raise RequestError(field, f"{shown(text)} names no label")
    return tuple(pairs)


def _parse_pod(text: str, field: str) -> tuple[str, str]:
    namespace, slash, name = text.strip().rpartition("/")
    if not name:
        raise RequestError(field, f"{shown(text)}: give [namespace/]pod-name (a prefix)")
    return (namespace if slash else "default", name)


@attrs.frozen(slots=True, kw_only=True)
class FlowFilter:
    """Validated filters; ``matches(flow)`` says whether a flow is selected."""

    from_pod: tuple[tuple[str, str], ...] = ()
    to_pod: tuple[tuple[str, str], ...] = ()
    pod: tuple[tuple[str, str], ...] = ()
    from_label: tuple[tuple[tuple[str, str | None], ...], ...] = ()
    to_label: tuple[tuple[tuple[str, str | None], ...], ...] = ()
    label: tuple[tuple[tuple[str, str | None], ...], ...] = ()
    from_namespace: tuple[str, ...] = ()
    to_namespace: tuple[str, ...] = ()
    namespace: tuple[str, ...] = ()
    port: tuple[int, ...] = ()
    protocol: tuple[str, ...] = ()
    verdict: tuple[int, ...] = ()
    uuid: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        from_pod: Iterable[str] = (),
        to_pod: Iterable[str] = (),
        pod: Iterable[str] = (),
        from_label: Iterable[str] = (),
        to_label: Iterable[str] = (),
        label: Iterable[str] = (),
        from_namespace: Iterable[str] = (),
        to_namespace: Iterable[str] = (),
        namespace: Iterable[str] = (),
        port: Iterable[str | int] = (),
        protocol: Iterable[str] = (),
        verdict: Iterable[str] = (),
        uuid: Iterable[str] = (),
    ) -> FlowFilter:
        ports = []
        for value in port:
            try:
                number = int(str(value).strip())
            except ValueError:
                number = -1
            if not 0 <= number <= 65535:
                raise RequestError("port", f"{shown(str(value))} is not a port (0-65535)")
            ports.append(number)
        protocols = [p.strip().upper() for p in split_values(protocol)]
        for proto in protocols:
            if proto not in ("TCP", "UDP", "SCTP", "ICMPV4", "ICMPV6"):
                raise RequestError(
                    "protocol", f"{shown(proto)} is not TCP, UDP, SCTP, ICMPv4 or ICMPv6"
                )
        verdicts = []
        for name in split_values(verdict):
            word = name.strip().upper()
            if word not in VERDICTS:
                raise RequestError(
                    "verdict", f"{shown(name)} is not a verdict ({', '.join(VERDICTS)})"
                )
            verdicts.append(int(Verdict[word]))
        return cls(
            from_pod=tuple(_parse_pod(p, "from_pod") for p in from_pod),
            to_pod=tuple(_parse_pod(p, "to_pod") for p in to_pod),
            pod=tuple(_parse_pod(p, "pod") for p in pod),
            from_label=tuple(_parse_selector(s, "from_label") for s in from_label),
            to_label=tuple(_parse_selector(s, "to_label") for s in to_label),
            label=tuple(_parse_selector(s, "label") for s in label),
            from_namespace=tuple(split_values(from_namespace)),
            to_namespace=tuple(split_values(to_namespace)),
            namespace=tuple(split_values(namespace)),
            port=tuple(ports),
            protocol=tuple(p.replace("ICMPV", "ICMPv") for p in protocols),
            verdict=tuple(verdicts),
            uuid=tuple(u.strip() for u in uuid if u.strip()),
        )

    @property
    def empty(self) -> bool:
        return not any(getattr(self, f.name) for f in attrs.fields(type(self)))

    def matches(self, flow: Flow) -> bool:
        src, dst = flow.source, flow.destination
        if self.uuid and flow.uuid not in self.uuid:
            return False
        if self.verdict and flow.verdict not in self.verdict:
            return False
        if self.protocol and flow.protocol not in self.protocol:
            return False
        if self.port and flow.port not in self.port:
            return False
        if self.from_namespace and src.namespace not in self.from_namespace:
            return False
        if self.to_namespace and dst.namespace not in self.to_namespace:
            return False
        if self.namespace and not {src.namespace, dst.namespace} & set(self.namespace):
            return False
        if self.from_pod and not _pod_in(src, self.from_pod):
            return False
        if self.to_pod and not _pod_in(dst, self.to_pod):
            return False
        if self.pod and not (_pod_in(src, self.pod) or _pod_in(dst, self.pod)):
            return False
        if self.from_label and not _labels_in(src, self.from_label):
            return False
        if self.to_label and not _labels_in(dst, self.to_label):
            return False
        return not self.label or _labels_in(src, self.label) or _labels_in(dst, self.label)


def _pod_in(endpoint: Endpoint, pods: tuple[tuple[str, str], ...]) -> bool:
    return any(
        endpoint.namespace == namespace and endpoint.pod_name.startswith(prefix)
        for namespace, prefix in pods
    )


def _labels_in(
    endpoint: Endpoint, selectors: tuple[tuple[tuple[str, str | None], ...], ...]
) -> bool:
    labels = _labels_of(endpoint)
    return any(
        all(key in labels and (value is None or labels[key] == value) for key, value in selector)
        for selector in selectors
    )
