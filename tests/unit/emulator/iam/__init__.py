"""Tests of emulator/iam/: policy evaluation, request authorizations and the access record."""
