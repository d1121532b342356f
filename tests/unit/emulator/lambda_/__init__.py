"""Tests of emulator/lambda_/: the function workers and their packages."""
