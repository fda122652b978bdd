from cpg_mcp.main import main

main()
