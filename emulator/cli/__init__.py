"""The `python -m emulator` subcommands that stand apart from the running stack: filter-test and
iam-report."""
