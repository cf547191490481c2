# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Documentation fragment: what the attributes of a sparkfleet.vllm module mean (each module says its support)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a prediction of whether it would change anything, changing nothing.
  diff_mode:
    description: Returns what changed (or would change in check mode) when run with C(--diff).
  idempotent:
    description: Run twice in a row with the same arguments and nothing else changed, the second run reports no change.
"""

    # A module that only reads: the same answer in check mode, nothing to diff, never a change.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: It only reads.
  diff_mode:
    support: N/A
    details: It only reads.
  idempotent:
    support: full
"""
