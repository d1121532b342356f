"""Tests of the local stack: tests/unit/emulator/<package>/ mirrors emulator/<package>/."""
