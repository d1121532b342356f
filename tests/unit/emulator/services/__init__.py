"""Tests of emulator/services/: moto fixed per AWS service, one test module per service module."""
