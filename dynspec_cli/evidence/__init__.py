"""What is extracted from a log: lines are normalised (lines), typed facts are pulled from
them (rules, server_args), and files are read or followed (scan)."""
