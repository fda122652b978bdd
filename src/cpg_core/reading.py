"""Reading captures fast: the one hot-path call every engine uses (:class:`LineAggregator`),
the line limits readers must respect, and how to say what an unreadable input looks like."""

from cpg_core._flows.attribution import time_key
from cpg_core._flows.sniff import CAPTURE_HINT, describe_unreadable
from cpg_core._synthesis.lines import (
    MAX_LINE_BYTES,
    MAX_REPORTED,
    OVERSIZED,
    LineAggregator,
    Readers,
    ReadStats,
    merge_stats,
    parse_lines,
)

__all__ = [
    "CAPTURE_HINT",
    "MAX_LINE_BYTES",
    "MAX_REPORTED",
    "OVERSIZED",
    "LineAggregator",
    "ReadStats",
    "Readers",
    "describe_unreadable",
    "merge_stats",
    "parse_lines",
    "time_key",
]
