"""Strings leave cpg-mcp cleaned (``cpg_core.text``): no terminal escapes, control or
invisible characters, whatever a pod label or an HTTP path carried."""

from cpg_core.text import clean, clean_text

__all__ = ["clean", "clean_text"]
