"""The one converter between cpg's typed documents and their JSON: wire names, tags of the
peer and L7 unions, and the empty fields the Go schemas leave out. Every JSON byte cpg writes
or serves for a document comes through here."""

from __future__ import annotations

import collections.abc
import enum
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception

from cpg_core._base.documents import (
    AdmittedCount,
    CidrPeerRecord,
    ClusterHealth,
    DeclaredBy,
    DnsRecord,
    DroppedFlowCount,
    DroppedFlowSample,
    DropRecord,
    EndpointPeerRecord,
    EntityPeerRecord,
    Finding,
    FqdnPeerRecord,
    HttpRecord,
    L7Record,
    PeerRecord,
    PolicyEvidence,
    RuleEvidence,
    SampleFlow,
    SampleSide,
    SessionInfo,
    SessionSource,
    VerifyCheck,
    VerifyReport,
)
from cpg_core._base.errors import CpgError
from cpg_core._review.plan_documents import Plan

T = TypeVar("T")


class DocumentError(CpgError):
    """A document does not have the shape its schema says; the message names the field."""


class _UnknownTag(ValueError):
    """A tagged union member this version does not know."""


converter = cattrs.Converter(unstruct_collection_overrides={Sequence: list, tuple: list})


def _is_homogeneous_tuple(cls: Any) -> bool:
    args: tuple[Any, ...] = getattr(cls, "__args__", None) or ()
    return getattr(cls, "__origin__", None) is tuple and len(args) == 2 and args[-1] is ...


def _homogeneous_tuple(cls: Any) -> Callable[[Any, Any], Any]:
    """``tuple[X, ...]`` read item by item with X's hook found once: evidence holds
    thousands of them, and cattrs' own loop looks the hook up and notes each index as it
    goes. A value it cannot read is read again by cattrs, for the message naming the item."""
    inner = cls.__args__[0]
    hook = converter.get_structure_hook(inner)

    def structure(value: Any, wanted: Any) -> Any:
        try:
            return tuple([hook(item, inner) for item in value])
        except Exception:
            return converter._structure_tuple(value, wanted)

    return structure


converter.register_structure_hook_factory(_is_homogeneous_tuple, _homogeneous_tuple)

_PLAIN = (str, int, bool)
_OMITTED: dict[type, tuple[str, ...]] = {
    SampleSide: ("namespace", "workload", "pod", "ip"),
    SampleFlow: ("node", "l7"),
    RuleEvidence: ("l7", "by_session", "declared_by"),
    DeclaredBy: ("what",),
    SessionSource: ("file", "server"),
    SessionInfo: ("inputs",),
    DropRecord: ("remediation",),
    Finding: ("policies",),
    DroppedFlowSample: ("drop_reason",),
}
"""Fields left out of the JSON while they hold their default (Go's ``omitempty``)."""
_RENAMED: dict[type, dict[str, str]] = {
    DropRecord: {"drop_class": "class"},
    DroppedFlowCount: {"drop_class": "class"},
}


def _in_order(cls: type, omitted: tuple[str, ...], renamed: dict[str, str]) -> Callable[[Any], Any]:
    """An unstructure hook that keeps the fields in class order (cattrs' own generated hooks
    move omittable fields to the end, and the Go schemas fix the order)."""
    attrs.resolve_types(cls)
    steps = []
    for field in attrs.fields(cls):
        hook = None if field.type in _PLAIN else converter.get_unstructure_hook(field.type)
        default = field.default if field.name in omitted else attrs.NOTHING
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()  # type: ignore[union-attr]
        steps.append((field.name, renamed.get(field.name, field.name), hook, default))

    def unstructure(value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key, hook, default in steps:
            item = getattr(value, name)
            if default is not attrs.NOTHING and item == default:
                continue
            out[key] = item if hook is None else hook(item)
        return out

    return unstructure


def _tagged(union: Any, tag: str, kinds: dict[str, type]) -> None:
    """Hooks for a union written as one object with a ``tag`` field naming the member."""
    names = {cls: name for name, cls in kinds.items()}
    for cls, name in names.items():
        plain: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter)

        def unstructure(value: Any, _plain: Any = plain, _name: str = name) -> dict[str, Any]:
            return {tag: _name, **_plain(value)}

        converter.register_unstructure_hook(cls, unstructure)

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise _UnknownTag(f"expected an object with a {tag!r} field, got {type(data).__name__}")
        cls = kinds.get(data.get(tag))  # type: ignore[arg-type]
        if cls is None:
            raise _UnknownTag(f"{tag} {data.get(tag)!r} is not one of {', '.join(kinds)}")
        return converter.structure({k: v for k, v in data.items() if k != tag}, cls)

    converter.register_structure_hook_func(lambda t: t == union, structure)


_tagged(
    PeerRecord,
    "type",
    {
        "endpoint": EndpointPeerRecord,
        "entity": EntityPeerRecord,
        "cidr": CidrPeerRecord,
        "fqdn": FqdnPeerRecord,
    },
)
_tagged(L7Record, "protocol", {"http": HttpRecord, "dns": DnsRecord})


# Leaves first: a hook looks up the hooks of its fields when it is made.
for _cls in (
    SampleSide,
    SampleFlow,
    RuleEvidence,
    DeclaredBy,
    SessionSource,
    SessionInfo,
    DropRecord,
    Finding,
    DroppedFlowSample,
    DroppedFlowCount,
):
    _renamed = _RENAMED.get(_cls, {})
    converter.register_unstructure_hook(_cls, _in_order(_cls, _OMITTED.get(_cls, ()), _renamed))
    if _renamed:
        _overrides: dict[str, Any] = {k: override(rename=v) for k, v in _renamed.items()}
        converter.register_structure_hook(
            _cls, make_dict_structure_fn(_cls, converter, **_overrides)
        )


def _unstructure_verify(report: VerifyReport) -> dict[str, Any]:
    return {
        "candidates": converter.unstructure(report.candidates),
        "explicit_deny": converter.unstructure(report.explicit_deny),
        "unexpressible": report.unexpressible,
        "system_namespaces": report.system,
        "passed": report.passed,
        "verdict": report.verdict,
        "checks": [converter.unstructure(c) for c in report.checks],
        **({"declared_denied": list(report.declared)} if report.declared else {}),
    }


def _structure_verify(data: Any, _: Any) -> VerifyReport:
    return VerifyReport(
        checks=converter.structure(data.get("checks") or [], tuple[VerifyCheck, ...]),
        unexpressible=int(data.get("unexpressible", 0)),
        system=int(data.get("system_namespaces", 0)),
        declared=tuple(str(d) for d in data.get("declared_denied") or ()),
    )


converter.register_unstructure_hook(VerifyReport, _unstructure_verify)
converter.register_structure_hook(VerifyReport, _structure_verify)
converter.register_structure_hook(AdmittedCount, make_dict_structure_fn(AdmittedCount, converter))


def _unstructure_plan(plan: Plan) -> dict[str, Any]:
    # Every field, empty lists included, and the would-break flow total (cpg plan -o json,
    # cpg-mcp's get_plan, the --plan input of cpg report).
    data: dict[str, Any] = _plain_plan(plan)
    if not plan.unjudged_flows:
        del data["unjudged_flows"]  # only a live session with a cap on kinds sets it
    data["would_break_flows"] = plan.would_break_flows
    data["verdict"] = plan.verdict
    return data


def _structure_plan(data: Any, _: Any) -> Plan:
    if not isinstance(data, dict):
        raise ValueError(f"expected a plan object, got {type(data).__name__}")
    fields = {k: v for k, v in data.items() if k not in ("would_break_flows", "verdict")}
    return _read_plan(fields, Plan)


_plain_plan = make_dict_unstructure_fn(Plan, converter, fixes=override(omit=True))
_read_plan = make_dict_structure_fn(Plan, converter, fixes=override(omit=True))
converter.register_unstructure_hook(Plan, _unstructure_plan)
converter.register_structure_hook(Plan, _structure_plan)


_TAGS: dict[Any, tuple[str, dict[str, type]]] = {
    PeerRecord: (
        "type",
        {
            "endpoint": EndpointPeerRecord,
            "entity": EntityPeerRecord,
            "cidr": CidrPeerRecord,
            "fqdn": FqdnPeerRecord,
        },
    ),
    L7Record: ("protocol", {"http": HttpRecord, "dns": DnsRecord}),
}
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def document_schema(cls: Any) -> dict[str, Any]:
    """The JSON schema of a document's wire form (what :func:`to_data` gives): its field
    names as written, the tags of its unions, the fields left out while empty as optional.
    cpg-mcp's result models describe their documents with it. Self-contained (no ``$ref``),
    so it can sit inside another schema."""
    return _schema_of(cls, set())


def _schema_of(tp: Any, definitions: set[type]) -> dict[str, Any]:
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    if tp is Any or tp is object:
        return {}
    if tp in _TAGS:
        tag, kinds = _TAGS[tp]
        return {
            "oneOf": [
                _with_tag(_schema_of(kind, definitions), tag, name) for name, kind in kinds.items()
            ]
        }
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        options = [_schema_of(arg, definitions) for arg in args if arg is not type(None)]
        optional = type(None) in args
        if len(options) == 1:
            return {"anyOf": [options[0], {"type": "null"}]} if optional else options[0]
        return {"anyOf": options + ([{"type": "null"}] if optional else [])}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (tuple, list, Sequence, collections.abc.Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": _schema_of(item, definitions)}
    if origin in (dict, Mapping, collections.abc.Mapping):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema_of(value, definitions)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if attrs.has(tp):
        if tp in definitions:
            raise TypeError(f"{tp.__name__} contains itself: no self-contained schema")
        return _object_schema(tp, definitions | {tp})
    return {}


def _object_schema(cls: type, definitions: set[type]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    omitted = _OMITTED.get(cls, ())
    renamed = _RENAMED.get(cls, {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        key = renamed.get(field.name, field.name)
        properties[key] = _schema_of(hints[field.name], definitions)
        if field.name not in omitted:
            required.append(key)
    if cls is Plan:
        properties["would_break_flows"] = {"type": "integer"}
        properties["verdict"] = {"enum": ["breaks", "nothing_breaks", "cannot_judge"]}
        required += ["would_break_flows", "verdict"]
    if cls is VerifyReport:
        properties = {
            "candidates": _schema_of(AdmittedCount, definitions),
            "explicit_deny": _schema_of(AdmittedCount, definitions),
            "unexpressible": {"type": "integer"},
            "system_namespaces": {"type": "integer"},
            "passed": {"type": "boolean"},
            "verdict": {"enum": ["passed", "failed", "cannot_judge"]},
            "checks": {"type": "array", "items": _schema_of(VerifyCheck, definitions)},
        }
        required = list(properties)
    return {"type": "object", "properties": properties, "required": required}


def _with_tag(schema: dict[str, Any], tag: str, name: str) -> dict[str, Any]:
    return {"allOf": [schema, {"properties": {tag: {"const": name}}, "required": [tag]}]}


def to_data(document: Any) -> Any:
    """Plain dicts and lists, with the wire names, ready for JSON or YAML."""
    return converter.unstructure(document)


_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
_DROP_CLASSES = frozenset({"infra", "transient", "noise", "policy", "unknown"})


def _shape_problem(document: Any) -> str | None:
    """A field whose value has not the documented shape (a time that is no RFC 3339 time, a
    drop class cpg does not know): a document written by hand or by an attacker, refused
    before any report shows it."""
    if isinstance(document, PolicyEvidence):
        times = [
            (f"rules[{i}].{name}", getattr(rule, name))
            for i, rule in enumerate(document.rules)
            for name in ("first_seen", "last_seen")
        ]
        times += [
            (f"sessions[{i}].{name}", getattr(session, name))
            for i, session in enumerate(document.sessions)
            for name in ("started_at", "ended_at")
        ]
        times += [
            (f"rules[{i}].samples[{j}].time", sample.time)
            for i, rule in enumerate(document.rules)
            for j, sample in enumerate(rule.samples)
        ]
    elif isinstance(document, ClusterHealth):
        for i, drop in enumerate(document.drops):
            if drop.drop_class not in _DROP_CLASSES:
                return f"drops[{i}].class {drop.drop_class!r} is not a drop class"
        window = document.window
        times = [
            ("window.first_flow", window.first_flow or ""),
            ("window.last_flow", window.last_flow or ""),
        ]
    else:
        return None
    for field, value in times:
        if value and not _TIME.fullmatch(value):
            return f"{field} {value!r} is not an RFC 3339 time"
    return None


def from_data(data: Any, cls: type[T], where: str = "document") -> T:
    """A typed document from decoded JSON. DocumentError names ``where`` and every bad field,
    and a value without its documented shape (times, drop classes)."""
    try:
        document = converter.structure(data, cls)
    except Exception as exc:  # cattrs reports every field it could not read
        problems = (
            cattrs.transform_error(exc, path="", format_exception=_problem)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        raise DocumentError(f"{where}: {'; '.join(problems[:5])}") from None
    problem = _shape_problem(document)
    if problem is not None:
        raise DocumentError(f"{where}: {problem}")
    return document


def _problem(exc: BaseException, expected: Any) -> str:
    if isinstance(exc, _UnknownTag):
        return str(exc)
    return format_exception(exc, expected)


def to_json(document: Any) -> str:
    """The document as JSON text: two-space indent, keys in schema order, final newline."""
    return orjson.dumps(
        to_data(document), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    ).decode()
