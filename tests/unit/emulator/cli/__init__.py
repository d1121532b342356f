"""Tests of emulator/cli/: the `python -m emulator` commands."""
