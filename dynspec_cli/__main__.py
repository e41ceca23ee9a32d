from dynspec_cli.cli.app import main

main()
