"""Checking CiliumNetworkPolicy YAML before it reaches a cluster (``cpg lint``, the CI gate
and the pre-commit hook): the rules, each with a code and a fix, and the check of one file."""

from cpg_core._lint import (
    RULES,
    LintFinding,
    LintRule,
    SchemaCheck,
    lint_text,
    policy_namespaces,
    selects,
)

__all__ = [
    "RULES",
    "LintFinding",
    "LintRule",
    "SchemaCheck",
    "lint_text",
    "policy_namespaces",
    "selects",
]
