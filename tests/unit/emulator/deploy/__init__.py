"""Tests of emulator/deploy/: samconfig, parameters, rules, code locations, the deployer."""
