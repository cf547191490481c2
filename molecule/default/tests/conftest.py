"""Verify's own plugin: each case's CPU, costliest first, at the end of the run (tests/support/cpu_ledger.py)."""

from ansible_collections.sparkfleet.vllm.tests.support import cpu_ledger


def pytest_configure(config):
    cpu_ledger.pytest_configure(config)
