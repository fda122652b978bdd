"""Spec-level equivalence: do two policies allow the same traffic as written?

Order of rules, of ports, of selectors and of list entries does not matter; metadata does not
matter. Used to tell "nothing to change" apart from "same text" (a re-indented file, a policy
already in the cluster)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cpg_core._base.documents import PolicyDocument

_SORTABLE_LISTS = frozenset(
    {
        "fromEndpoints",
        "toEndpoints",
        "fromEntities",
        "toEntities",
        "fromCIDR",
        "toCIDR",
        "fromCIDRSet",
        "toCIDRSet",
        "toFQDNs",
        "toPorts",
        "ports",
        "icmps",
        "fields",
        "http",
        "dns",
        "matchExpressions",
        "values",
        "except",
    }
)


def _normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        return {k: _normalise(v, k) for k, v in sorted(value.items()) if v not in (None, [], {})}
    if isinstance(value, list):
        items = [_normalise(v) for v in value]
        if key in _SORTABLE_LISTS:
            unique = {json.dumps(i, sort_keys=True): i for i in items}
            return [unique[k] for k in sorted(unique)]
        return items
    if key == "port" and isinstance(value, int):
        return str(value)
    if key == "type" and isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def normalise_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """A canonical form of a CNP spec: rules are sets, lists inside rules are sets."""
    spec = dict(spec or {})
    out: dict[str, Any] = _normalise(
        {
            k: v
            for k, v in spec.items()
            if k not in ("ingress", "egress", "ingressDeny", "egressDeny")
        }
    )
    for direction in ("ingress", "egress", "ingressDeny", "egressDeny"):
        rules = [_normalise(rule) for rule in spec.get(direction) or []]
        unique = {json.dumps(r, sort_keys=True): r for r in rules}
        if unique:
            out[direction] = [unique[k] for k in sorted(unique)]
    return out


def specs_equivalent(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two policy specs are the same rules, whatever their order and formatting."""
    return normalise_spec(a) == normalise_spec(b)


def policies_equivalent(a: PolicyDocument, b: PolicyDocument) -> bool:
    """Whether two policy documents select the same endpoints with the same rules: the same
    specs (``spec`` and the entries of ``specs`` alike), whatever their order and formatting."""
    return _spec_set(a) == _spec_set(b)


def _spec_set(document: PolicyDocument) -> set[str]:
    listed = document.get("specs")
    specs = [document.get("spec"), *(listed if isinstance(listed, list) else [])]
    found = (normalise_spec(spec if isinstance(spec, Mapping) else None) for spec in specs)
    return {json.dumps(spec, sort_keys=True) for spec in found if spec}
