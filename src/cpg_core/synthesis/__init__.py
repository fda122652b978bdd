"""Writing policies: aggregation of allow entries, cluster scope, sharing, baselines, rendering and merging into files, narrowing and fixes.

A layer of cpg_core (docs/ARCHITECTURE.md, "The core's layers"): it imports only the layers
below it, and no name starting with an underscore crosses into another layer."""
