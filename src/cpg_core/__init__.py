"""cpg_core: pure functions and values from Hubble flows to CiliumNetworkPolicy YAML."""
