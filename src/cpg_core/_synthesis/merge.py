"""Merge newly generated rules into an existing policy file without losing a human's work.

The file is edited as text. A rule is *managed* when it is byte for byte what cpg renders
for it, including cpg's comment above it (the comment works as a checksum: change the rule
and it no longer matches). Managed rules are re-derived from the union of their atoms and the
new atoms, so a policy built over several runs equals the one built in a single run. Every
other rule, comment, key and blank line is kept where it is; new traffic already allowed by a
rule a human wrote is not added again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
import yaml

from cpg_core._base.errors import PolicyMergeError, SelectorMismatchError
from cpg_core._base.labels import LabelItems
from cpg_core._base.rules import (
    DECLARED_BY,
    EGRESS,
    INGRESS,
    Atom,
    Rule,
    declared_pieces,
    describe_rule,
    rule_sort_key,
    rules_from_atoms,
    with_declared,
)
from cpg_core._policy.matcher import covered_by
from cpg_core._policy.write import is_narrowed, labels_selector, rule_from_dict, subject_of
from cpg_core._policy.yamlread import BOUNDED_LOADER, YamlInputError, load_all
from cpg_core._synthesis.render import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    render_policy,
    rule_lines,
)

_SPEC = re.compile(r"^spec:\s*(#.*)?$")
_SECTION = re.compile(r"^  (ingress|egress):\s*(#.*)?$")


@attrs.define
class _Item:
    preamble: list[str]
    lines: list[str]
    data: Any = None
    rule: Rule | None = None  # set when managed

    @property
    def human_comments(self) -> list[str]:
        return self.preamble[:-1] if self.rule is not None else self.preamble


@attrs.define
class _Section:
    direction: str
    header: int  # line index of "  ingress:" / "  egress:"
    lead: list[str]
    items: list[_Item]
    trailer: list[str]
    end: int  # index one past the section's last line
    item_indent: int = 2


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _load(text: str, path: str) -> dict[str, Any]:
    try:
        docs = [d for d in load_all(text, path) if d is not None]
    except YamlInputError as exc:
        raise PolicyMergeError(f"{exc}; fix the file or move it aside") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise PolicyMergeError(
            f"{path}: expected exactly one CiliumNetworkPolicy document; "
            "move the other documents to their own files"
        )
    doc = docs[0]
    if doc.get("kind") != "CiliumNetworkPolicy" or not isinstance(doc.get("spec"), dict):
        raise PolicyMergeError(
            f"{path}: not a CiliumNetworkPolicy with a 'spec' (kind {doc.get('kind')!r}); "
            "cpg only merges into policies it can read — move the file aside"
        )
    return doc


def _scan_section(
    lines: list[str], header: int, spec_end: int, direction: str, path: str
) -> _Section:
    body_end = header + 1
    item_indent: int | None = None
    while body_end < spec_end:
        line = lines[body_end]
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            ind = _indent(line)
            if item_indent is None and ind <= 2 and not stripped.startswith("-"):
                break  # an empty section
            if item_indent is None:
                if not stripped.startswith("-") or ind not in (2, 4):
                    raise PolicyMergeError(
                        f"{path}: line {body_end + 1}: '{direction}' is not a block sequence cpg "
                        "can edit; write it as a YAML block list ('- ...' items) under the key"
                    )
                item_indent = ind
            if ind < item_indent or (ind == item_indent and not stripped.startswith("-")):
                break
            if ind <= 2 and not (ind == item_indent and stripped.startswith("-")):
                break
        body_end += 1
    # Comments and blank lines at the end belong after the section, not to the last item.
    end = body_end
    while end > header + 1 and (
        not lines[end - 1].strip() or (_is_comment(lines[end - 1]) and _indent(lines[end - 1]) <= 2)
    ):
        end -= 1
    lead: list[str] = []
    items: list[_Item] = []
    pending: list[str] = lead
    for index in range(header + 1, end):
        line = lines[index]
        stripped = line.strip()
        if item_indent is not None and _indent(line) == item_indent and stripped.startswith("-"):
            # Comment lines directly above the item are its preamble.
            pre: list[str] = []
            while pending and pending[-1].strip().startswith("#"):
                pre.insert(0, pending.pop())
            items.append(_Item(preamble=pre, lines=[line]))
            pending = items[-1].lines
        else:
            pending.append(line)
    return _Section(direction, header, lead, items, lines[end:body_end], body_end, item_indent or 2)


def _check_items(section: _Section, data: object, path: str, namespace: str) -> None:
    """Pair each item's lines with its rule in the parsed file (an item that is exactly what
    cpg renders for its rule is paired without parsing it again; others are read alone)."""
    if not isinstance(data, list) or len(data) != len(section.items):
        raise PolicyMergeError(
            f"{path}: could not match the '{section.direction}' rules to their lines; "
            "keep one rule per '- ' item in block style, or move the file aside"
        )
    shift = " " * (section.item_indent - 2)
    for item, expected in zip(section.items, data, strict=True):
        rule = rule_from_dict(expected, section.direction, namespace)
        if rule is not None and item.lines == [
            shift + line for line in rule_lines(rule, namespace)[1:]
        ]:
            item.data = expected  # its lines are exactly what cpg renders for that rule
            continue
        indent = _indent(item.lines[0])
        text = "\n".join(line[indent:] if len(line) >= indent else line for line in item.lines)
        try:
            loaded = yaml.load(text, Loader=BOUNDED_LOADER)
        except yaml.YAMLError:
            loaded = None
        if loaded != [expected]:
            raise PolicyMergeError(
                f"{path}: could not match the '{section.direction}' rules to their lines; "
                "keep one rule per '- ' item in block style, or move the file aside"
            )
        item.data = expected


_CPG_COMMENT = re.compile(
    r"^# (?:DNS UDP/53, TCP/53 for .+|(?:(?:[A-Z]+/\d+(?:-\d+)?(?: \(HTTP [^)]*\))?"
    r"|ICMP(?:v[46])? type \d+)(?:, )?)+) (?:from|to) \S.*$"
)
"""The shape of the comment cpg writes above a rule (``TCP/8080, TCP/8443 from shop/app=web``)."""


def _classify(section: _Section, namespace: str) -> int:
    """Mark the rules cpg wrote and nobody changed (managed). A rule someone edited keeps
    its place, and cpg's comment above it is made true again: rewritten for what the rule now
    says when cpg can say it, else dropped. Returns how many comments were corrected."""
    corrected = 0
    shift = " " * (section.item_indent - 2)
    for item in section.items:
        rule = rule_from_dict(item.data, section.direction, namespace)
        if not item.preamble:
            continue
        rendered = [shift + line for line in rule_lines(rule, namespace)] if rule else []
        if rule is not None and item.lines == rendered[1:]:
            last = item.preamble[-1]
            if last == rendered[0]:
                item.rule = rule
                continue
            if last.startswith(rendered[0] + DECLARED_BY):  # cpg's words on who declares it
                declared = declared_pieces(last[len(rendered[0]) :])
                item.rule = attrs.evolve(rule, declared=declared)
                continue
        last = item.preamble[-1]
        if not _CPG_COMMENT.match(last.strip()):
            continue  # a person's own comment: theirs to keep
        fresh = [rendered[0]] if rendered else []
        if [last] != fresh:
            item.preamble = item.preamble[:-1] + fresh
            corrected += 1
    return corrected


def _said(rules: Sequence[Rule]) -> dict[tuple[str, Any, str], tuple[str, ...]]:
    """What each rule's comment says declares it."""
    return {_rule_key(rule): rule.declared for rule in rules if rule.declared}


def _rule_key(rule: Rule) -> tuple[str, Any, str]:
    return (rule.direction, rule.peer, rule.kind)


def merge_policy_text(
    existing: str,
    *,
    name: str,
    namespace: str,
    selector: LabelItems,
    rules: Sequence[Rule],
    path: str = "policy",
) -> str:
    """The existing file with ``rules`` merged in. Raises PolicyMergeError when the file cannot
    be edited safely; the message names the file and what to do."""
    doc = _load(existing, path)
    spec = doc["spec"]
    _check_selector(spec, selector, path)
    lines = existing.split("\n")
    final_newline = existing.endswith("\n")
    if final_newline:
        lines.pop()
    spec_start, spec_end = _spec_span(lines, path)
    sections, corrected = _scan_sections(lines, (spec_start, spec_end), spec, path, namespace)
    managed_atoms: set[Atom] = set()
    attached: dict[tuple[str, Any, str], list[str]] = {}
    for scanned in sections.values():
        for item in scanned.items:
            if item.rule is not None:
                managed_atoms.update(item.rule.atoms())
                attached[_rule_key(item.rule)] = item.human_comments
    atoms = set(managed_atoms)
    by_direction = {d: _direction_rules(sections, d) for d in (INGRESS, EGRESS)}
    for rule in rules:
        for atom in rule.atoms():
            if atom not in managed_atoms and not covered_by(
                atom, by_direction[atom.direction], namespace
            ):
                atoms.add(atom)
    managed = [item.rule for sec in sections.values() for item in sec.items if item.rule]
    merged = with_declared(rules_from_atoms(atoms), [*rules, *managed])
    if atoms == managed_atoms and not corrected and _said(merged) == _said(managed):
        return existing
    edits = _section_edits(merged, sections, attached, namespace, lines, (spec_start, spec_end))
    out = list(lines)
    for start, stop, block in sorted(edits, key=lambda e: e[0], reverse=True):
        out[start:stop] = block  # bottom-up, so earlier line indexes stay valid
    text = "\n".join(out)
    return text + "\n" if final_newline or not text.endswith("\n") else text


def _check_selector(spec: Mapping[str, Any], selector: LabelItems, path: str) -> None:
    written = labels_selector(selector)
    found = subject_of(spec)
    if found != written and not is_narrowed(found, written):  # narrowed: pods left out, kept
        raise SelectorMismatchError(
            f"{path}: its endpointSelector {found!r} differs from the "
            f"one cpg generated ({labels_selector(selector)!r}); restore it or move the file aside"
        )


def _spec_span(lines: list[str], path: str) -> tuple[int, int]:
    """The line of the top-level ``spec:`` and the line after its block."""
    spec_start = next((i for i, line in enumerate(lines) if _SPEC.match(line)), None)
    if spec_start is None:
        raise PolicyMergeError(f"{path}: no top-level 'spec:' line; write the spec in block style")
    spec_end = spec_start + 1
    while spec_end < len(lines):
        line = lines[spec_end]
        if line.strip() and not line.startswith((" ", "#")):
            break
        spec_end += 1
    return spec_start, spec_end


def _scan_sections(
    lines: list[str],
    span: tuple[int, int],
    spec: Mapping[str, Any],
    path: str,
    namespace: str,
) -> tuple[dict[str, _Section], int]:
    """The ingress and egress sections of the spec, their items matched to the rules they
    hold, and how many items were written by cpg but edited (corrected on merge)."""
    spec_start, spec_end = span
    sections: dict[str, _Section] = {}
    corrected = 0
    for i in range(spec_start + 1, spec_end):
        match = _SECTION.match(lines[i])
        if match:
            sections[match.group(1)] = _scan_section(lines, i, spec_end, match.group(1), path)
    for direction in (INGRESS, EGRESS):
        if spec.get(direction) and direction not in sections:
            raise PolicyMergeError(
                f"{path}: '{direction}' is not written as '  {direction}:' followed by a block list; "
                "reformat it in block style or move the file aside"
            )
        if direction in sections:
            _check_items(sections[direction], spec.get(direction) or [], path, namespace)
            corrected += _classify(sections[direction], namespace)
    return sections, corrected


def _section_edits(
    merged: Sequence[Rule],
    sections: Mapping[str, _Section],
    attached: Mapping[tuple[str, Any, str], list[str]],
    namespace: str,
    lines: list[str],
    span: tuple[int, int],
) -> list[tuple[int, int, list[str]]]:
    """(first line, line after, new lines) of each section the merged rules rewrite or add."""
    edits: list[tuple[int, int, list[str]]] = []
    for direction in (INGRESS, EGRESS):
        wanted = [r for r in merged if r.direction == direction]
        found = sections.get(direction)
        if found is not None:
            body = _section_body(found, wanted, attached, namespace)
            edits.append((found.header + 1, found.end - len(found.trailer), body))
        elif wanted:
            block = [f"  {direction}:"]
            for rule in wanted:
                block += attached.get(_rule_key(rule), []) + rule_lines(rule, namespace)
            at = _new_section_line(direction, sections, lines, span)
            edits.append((at, at, block))
    return edits


def _new_section_line(
    direction: str, sections: Mapping[str, _Section], lines: list[str], span: tuple[int, int]
) -> int:
    """Where a new section goes: ingress before egress (above its comments), else at the end
    of the spec (above its trailing blank lines)."""
    spec_start, spec_end = span
    if direction == INGRESS and EGRESS in sections:
        at = sections[EGRESS].header
        while at > spec_start + 1 and _is_comment(lines[at - 1]) and _indent(lines[at - 1]) <= 2:
            at -= 1
        return at
    at = spec_end
    while at > spec_start + 1 and not lines[at - 1].strip():
        at -= 1
    return at


def _direction_rules(sections: Mapping[str, _Section], direction: str) -> list[Any]:
    section = sections.get(direction)
    return [item.data for item in section.items if item.rule is None] if section else []


def _section_body(
    section: _Section,
    wanted: list[Rule],
    attached: Mapping[tuple[str, Any, str], list[str]],
    namespace: str,
) -> list[str]:
    by_key = {_rule_key(r): r for r in wanted}
    present = {_rule_key(item.rule) for item in section.items if item.rule is not None}
    # New managed rules go after the managed rule that sorts just before them (or before the
    # first managed rule, or at the end), in their own order: ``wanted`` is sorted, so that
    # rule's place only moves forward, and one pass over the items finds every place
    # (n log n; placing each by a scan of the section was quadratic: 4,000 new peers took
    # a live flush half a minute).
    managed = [
        (rule_sort_key(item.rule), index)
        for index, item in enumerate(section.items)
        if item.rule is not None
    ]
    by_sort = sorted(managed)
    after: dict[int, list[Rule]] = {}
    first: list[Rule] = []  # before the first managed rule (or at the end, when none is)
    seen, anchor = 0, -1
    for rule in wanted:
        if _rule_key(rule) in present:
            continue
        key = rule_sort_key(rule)
        while seen < len(by_sort) and by_sort[seen][0] < key:
            anchor = max(anchor, by_sort[seen][1])
            seen += 1
        (first if anchor < 0 else after.setdefault(anchor, [])).append(rule)
    opening = managed[0][1] if managed else len(section.items)
    shift = " " * (section.item_indent - 2)
    body = list(section.lead)
    for index, item in enumerate(section.items):
        if index == opening:
            body += [shift + line for rule in first for line in rule_lines(rule, namespace)]
        if item.rule is not None:
            kept = by_key.get(_rule_key(item.rule))
            body += item.human_comments
            if kept is not None:  # None: folded into another rule (an L4 port under DNS)
                body += [shift + line for line in rule_lines(kept, namespace)]
        else:
            body += item.preamble + item.lines
        for rule in after.get(index, []):
            body += [shift + line for line in rule_lines(rule, namespace)]
    if opening == len(section.items):
        body += [shift + line for rule in first for line in rule_lines(rule, namespace)]
    return body


@attrs.frozen(slots=True)
class ForeignPolicy:
    """What a file cpg did not write holds: ``(kind, name)`` of each document."""

    documents: tuple[tuple[str, str], ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for _kind, name in self.documents)

    def describe(self) -> str:
        return ", ".join(f"{kind} {name}".strip() for kind, name in self.documents) or "a file"


_LATER_HEAD = re.compile(r"""^(?:---|\.\.\.|\?|["']?metadata["']?\s*:)""", re.MULTILINE)
"""What after a document's ``spec:`` could start another document or set its metadata again
(a duplicate key wins in YAML)."""


def _heads(existing: str, path: str) -> list[Any]:
    """The documents of ``existing``, as far as their owner goes: a one-document file whose
    metadata comes before its spec is read up to the spec (a rerun asks this of every file,
    and cpg's renderings put metadata first); anything else is read whole."""
    head, spec, rest = existing.partition("\nspec:")
    if spec and not _LATER_HEAD.search(rest):
        try:
            return [d for d in load_all(head, path) if d is not None]
        except YamlInputError:
            pass  # the head alone is not YAML: the whole file says
    return [d for d in load_all(existing, path) if d is not None]


def written_by_cpg(text: str, path: str = "policy") -> bool:
    """Whether a document of ``text`` carries cpg's managed-by label, as parsed (text that
    only quotes the label, or YAML cpg cannot read, is not cpg's)."""
    try:
        docs = _heads(text, path)
    except YamlInputError:
        return False
    return any(_labelled(doc) for doc in docs)


def _labelled(doc: Any) -> bool:
    metadata = doc.get("metadata") if isinstance(doc, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def foreign_policy(existing: str, path: str = "policy") -> ForeignPolicy | None:
    """What ``existing`` holds when cpg did not write it (no document carries cpg's
    managed-by label): cpg never merges into a person's policy, it writes its own beside it.
    None for cpg's own file, an empty one, and one that is not YAML cpg reads (anchors,
    invalid YAML): merging then names the problem, and the file is left as it is."""
    if not existing.strip():
        return None
    # the parsed label decides, never text: a comment or an annotation may quote cpg's mark
    try:
        docs = _heads(existing, path)
    except YamlInputError:
        return None
    found = []
    for doc in docs:
        if _labelled(doc):
            return None
        metadata = doc.get("metadata") if isinstance(doc, Mapping) else None
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        found.append((str(kind or "a document"), str(name or "")))
    return ForeignPolicy(tuple(found)) if found else None


def render_or_merge(
    existing: str | None,
    *,
    name: str,
    namespace: str,
    selector: LabelItems,
    rules: Sequence[Rule],
    path: str = "policy",
    drop: Collection[Rule] = (),
) -> str:
    """The text to write: a fresh rendering, or the existing file with the rules merged in.
    ``drop``: rules a shared policy now serves for this workload; taken out of a file that is
    exactly a rendering this process wrote ("" when none of its rules is left: the file
    goes), never out of one a person or an earlier run shaped (merging only adds).
    A file that is exactly the fresh rendering (a rerun that found the same rules) is kept
    without being read as YAML (ARCHITECTURE §D37): merging parses the file twice over, which
    was most of a rerun's write stage, and merging rules into their own rendering changes
    nothing (a property test holds merge to it for every kind of rule cpg writes). A file
    that is exactly a rendering this process wrote (a live session's earlier flush) is not
    read either: merging into one's own rendering is rendering the union (a property test
    holds merge to that too), so a flush that adds 4,000 peers costs what writing them does."""
    known = _recall(name, namespace, selector, existing) if existing else None
    if known is not None:  # asked first: the fresh rendering need not be made at all
        union = with_declared(
            rules_from_atoms({atom for rule in (*known, *rules) for atom in rule.atoms()}),
            [*known, *rules],
        )
        if drop:
            union = [rule for rule in union if rule not in drop]
            if not union:
                return ""
        text = render_policy(name, namespace, selector, union)
        _remember(name, namespace, selector, text, union)
        return existing if text == existing else text
    fresh = render_policy(name, namespace, selector, rules)
    if existing is None or not existing.strip() or existing == fresh:
        _remember(name, namespace, selector, fresh, rules)
        return fresh
    return merge_policy_text(
        existing, name=name, namespace=namespace, selector=selector, rules=rules, path=path
    )


_RENDERED: dict[bytes, tuple[Rule, ...]] = {}
"""Recent renderings by a digest of (name, namespace, selector, text): the rules each came
from. Only renderings go in (never a file a person edited), so a hit is a file that is
exactly cpg's rendering of those rules."""
_RENDERED_MAX = 1024


def _digest(name: str, namespace: str, selector: LabelItems, text: str) -> bytes:
    return hashlib.blake2b(
        f"{name}\0{namespace}\0{selector!r}\0".encode() + text.encode(), digest_size=16
    ).digest()


def _remember(
    name: str, namespace: str, selector: LabelItems, text: str, rules: Sequence[Rule]
) -> None:
    if len(_RENDERED) >= _RENDERED_MAX:
        _RENDERED.clear()  # a bound, not a policy: the next merge reads the file again
    _RENDERED[_digest(name, namespace, selector, text)] = tuple(rules)


def _recall(name: str, namespace: str, selector: LabelItems, text: str) -> tuple[Rule, ...] | None:
    return _RENDERED.get(_digest(name, namespace, selector, text))


__all__ = [
    "ForeignPolicy",
    "covered_by",
    "describe_rule",
    "foreign_policy",
    "merge_policy_text",
    "render_or_merge",
    "written_by_cpg",
]
