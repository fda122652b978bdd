"""The options both front ends take, declared once (ARCHITECTURE §L4): the table, and the
lookups the command line, cpg-mcp and the parity test make in it."""

from cpg_core._requests.options import (
    OPTIONS,
    Checked,
    Option,
    Request,
    Value,
    option,
    options_of,
)

__all__ = [
    "OPTIONS",
    "Checked",
    "Option",
    "Request",
    "Value",
    "option",
    "options_of",
]
