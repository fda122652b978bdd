"""The CiliumNetworkPolicy CRD schema cpg ships (``schemas/``, see its PROVENANCE), as the
check ``cpg lint`` runs on every policy: what the API server would refuse, with the formats
it checks (``cidr``) and the fields it does not know (which Cilium's validator refuses: the
API server would prune them, leaving a rule other than the one written)."""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from cpg_core.lint import SchemaProblem

_UNCHECKED = frozenset({"metadata", "status"})
"""Top-level fields whose content the policy schema leaves to Kubernetes."""


_SCHEMAS = {
    "ClusterNetworkPolicy": "schemas/clusternetworkpolicy-v1alpha2.json",
}
_CILIUM = "schemas/ciliumnetworkpolicy-v2.json"


@functools.cache
def _schema(path: str = _CILIUM) -> dict[str, Any]:
    text = resources.files("cpg_io").joinpath(path).read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _is_cidr(value: object) -> bool:
    """Kubernetes' ``format: cidr`` (Go's net.ParseCIDR): an address, a slash, a prefix
    length the family allows."""
    if not isinstance(value, str):
        return True  # the type check names it
    address, slash, bits = value.partition("/")
    if not slash or not bits.isdigit() or (len(bits) > 1 and bits.startswith("0")):
        return False
    try:
        ipaddress.ip_network(f"{address}/{bits}", strict=False)
    except ValueError:
        return False
    return "%" not in address


@functools.cache
def _validator(path: str = _CILIUM) -> Any:
    import jsonschema  # type: ignore[import-untyped]

    formats = jsonschema.FormatChecker(formats=())
    formats.checks("cidr")(_is_cidr)
    return jsonschema.Draft7Validator(_schema(path), format_checker=formats)


def crd_schema_errors(policy: Mapping[str, Any]) -> list[SchemaProblem]:
    """Each schema violation and unknown field of ``policy``, in document order: a Cilium
    policy against Cilium's CRD, a ClusterNetworkPolicy against its own."""
    path = _SCHEMAS.get(str(policy.get("kind")), _CILIUM)
    found = [
        SchemaProblem(
            path=tuple(error.absolute_path),
            message=_short(error.message),
            validator=str(error.validator),
            value=error.instance if error.validator == "enum" else None,
        )
        for error in _validator(path).iter_errors(dict(policy))
    ]
    found += [
        SchemaProblem(path=where, message=f"unknown field {_dotted(where)}", unknown_field=True)
        for where in _unknown(policy, _schema(path), ())
    ]
    if path != _CILIUM:
        found += _port_ranges(policy)
    return sorted(found, key=lambda p: [str(part) for part in p.path])


def _port_ranges(policy: Mapping[str, Any]) -> list[SchemaProblem]:
    """The CRD's rule its schema cannot state: a port range starts below its end."""
    found = []
    spec = policy.get("spec")
    for section in ("ingress", "egress"):
        rules = spec.get(section) if isinstance(spec, Mapping) else None
        for n, rule in enumerate(rules if isinstance(rules, list) else []):
            protocols = rule.get("protocols") if isinstance(rule, Mapping) else None
            for m, entry in enumerate(protocols if isinstance(protocols, list) else []):
                for name, match in entry.items() if isinstance(entry, Mapping) else ():
                    port = match.get("destinationPort") if isinstance(match, Mapping) else None
                    span = port.get("range") if isinstance(port, Mapping) else None
                    if not isinstance(span, Mapping):
                        continue
                    start, end = span.get("start"), span.get("end")
                    if isinstance(start, int) and isinstance(end, int) and start >= end:
                        found.append(
                            SchemaProblem(
                                path=(
                                    "spec",
                                    section,
                                    n,
                                    "protocols",
                                    m,
                                    name,
                                    "destinationPort",
                                    "range",
                                ),
                                message=f"the range starts at {start}, not below its end {end}",
                                validator="x-kubernetes-validations",
                            )
                        )
    return found


def _unknown(node: Any, schema: Mapping[str, Any], path: tuple[str | int, ...]) -> Iterator[Any]:
    """The paths of the keys the schema does not declare (where it declares its keys)."""
    if isinstance(node, Mapping):
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or "additionalProperties" in schema:
            return
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        for key, value in node.items():
            if not path and key in _UNCHECKED:
                continue
            if key not in properties:
                yield (*path, str(key))
            else:
                yield from _unknown(value, properties[key], (*path, str(key)))
    elif isinstance(node, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for n, item in enumerate(node):
                yield from _unknown(item, items, (*path, n))


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(message: str) -> str:
    """jsonschema quotes whole sub-documents in some messages: keep a line a person reads."""
    return message if len(message) <= 200 else message[:197] + "..."
