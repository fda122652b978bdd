"""Checking CiliumNetworkPolicy YAML before it reaches a cluster (``cpg lint``, the CI gate
and the pre-commit hook): the rules, each with a code and a fix, the check of one file, and
the availability checks of the files linted together."""

from cpg_core._review.availability import declared_denials
from cpg_core._review.lint import (
    RULES,
    LintFinding,
    LintRule,
    SchemaCheck,
    SchemaProblem,
    invalid_in_cluster,
    lint_text,
    lint_texts,
    lint_together,
    policy_namespaces,
    selects,
    unreadable_file,
)
from cpg_core._review.lint_versions import NEWEST, SUPPORTED, parse_version, supported_text

__all__ = [
    "NEWEST",
    "RULES",
    "SUPPORTED",
    "LintFinding",
    "LintRule",
    "SchemaCheck",
    "SchemaProblem",
    "declared_denials",
    "invalid_in_cluster",
    "lint_text",
    "lint_texts",
    "lint_together",
    "parse_version",
    "policy_namespaces",
    "selects",
    "supported_text",
    "unreadable_file",
]
