"""Judging policies against traffic: plan, why, verify, drift, policy map pressure, availability, lint, and the records they keep.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
