from cpg_cli.app import main

main()
