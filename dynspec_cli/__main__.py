import sys

try:
    from dynspec_cli.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while Python is still loading dynspec: nothing was started
    sys.stderr.write("dynspec: interrupted\n")
    sys.exit(130)

main()
