"""Tests of emulator/core/: calls, faults, filters, ARNs and values."""
