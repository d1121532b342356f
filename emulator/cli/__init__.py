"""What each `python -m emulator` command does (emulator/__main__.py is the command line): up,
invoke, filter-test and iam-report."""
