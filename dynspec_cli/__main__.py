from dynspec_cli.cli.main import main

main()
