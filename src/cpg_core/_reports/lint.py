"""``cpg lint`` findings as people, machines and GitHub code scanning (SARIF 2.1.0) read them."""

from __future__ import annotations

import json
from typing import Any

import attrs

from cpg_core._review.lint import RULES, LintFinding
from cpg_core._review.wire import to_data
from cpg_core.text import clean_text, one_line_each, path_uri, shown_path

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/cilium/cilium"


@attrs.frozen(slots=True, kw_only=True)
class LintView:
    findings: tuple[LintFinding, ...]
    files: int
    """How many files were read."""
    version: str = ""
    """cpg's version, for SARIF's tool."""
    notes: tuple[str, ...] = ()
    """What the files need said that is no finding (how Baseline policies are enforced)."""


def lint_text(view: LintView) -> str:
    out = []
    for f in view.findings:
        where = f"{f.file}:{f.line}" if f.line else f.file
        policy = f" {f.policy}" if f.policy else ""
        field = f" {f.field}:" if f.field else ""
        out.append(f"{where}: {f.code} {f.name} ({f.level}){policy}{field} {f.message}")
        out.append(f"    fix: {f.fix}")
    errors = sum(1 for f in view.findings if f.level == "error")
    warnings = len(view.findings) - errors
    if view.findings:
        out.append(f"{view.files} file(s): {errors} error(s), {warnings} warning(s)")
    else:
        out.append(f"{view.files} file(s): no findings")
    out += [f"note: {note}" for note in view.notes]
    return one_line_each(out)


def lint_json(view: LintView) -> str:
    findings = [{**f, "file": shown_path(f["file"])} for f in to_data(list(view.findings))]
    data = {
        "files": view.files,
        "findings": findings,
        "notes": list(view.notes),
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def lint_sarif(view: LintView) -> str:
    used = sorted({f.code for f in view.findings} | set(RULES))
    index = {code: n for n, code in enumerate(used)}
    rules: list[dict[str, Any]] = []
    for code in used:
        rule = RULES[code]
        rules.append(
            {
                "id": code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "help": {"text": rule.fix},
                "defaultConfiguration": {"level": rule.level},
            }
        )
    results = []
    for f in view.findings:
        region = {"startLine": f.line} if f.line else {"startLine": 1}
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": f.level,
                "message": {
                    "text": clean_text(f"{f.policy + ': ' if f.policy else ''}{f.message}. {f.fix}")
                },
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": path_uri(f.file)},
                            "region": region,
                        },
                        **(
                            {"logicalLocations": [{"fullyQualifiedName": f.field}]}
                            if f.field
                            else {}
                        ),
                    }
                ],
            }
        )
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "cpg",
                        "version": view.version or "0",
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
