# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: each rank's attestation of what it will run, and where ranks differ.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import attestation
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import raising_filter_errors


def _wrap(function):
    return raising_filter_errors(function, attestation.AttestationError)


class FilterModule:
    """sparkfleet.vllm rank parity filters."""

    def filters(self):
        return {
            "rank_attestation": _wrap(attestation.rank_attestation),
            "parity_differences": _wrap(attestation.parity_differences),
            "parity_message": _wrap(attestation.parity_message),
            "attestation_summary": _wrap(attestation.attestation_summary),
            "launch_provenance": _wrap(attestation.launch_provenance),
            "fabric_identity": _wrap(attestation.fabric_identity),
        }
