"""cpg_mcp: the read-only MCP stdio server (``cpg-mcp``), a composition root over cpg_core and
cpg_io. It writes nothing but JSON-RPC frames on stdout, and files only in its session dir."""
