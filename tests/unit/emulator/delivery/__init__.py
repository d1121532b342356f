"""Tests of emulator/delivery/: the event source mapping engine, its pollers and the pipes."""
