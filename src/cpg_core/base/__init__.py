"""Plain values every layer shares: flows and endpoints, labels, rules as atoms, the evidence and report records, drop reasons, errors.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
