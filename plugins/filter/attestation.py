# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: each rank's attestation of what it will run, and where ranks differ.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm rank parity filters."""

    def filters(self):
        return as_filters(
            {
                "rank_attestation": deferred("attestation", "rank_attestation"),
                "parity_refusal": deferred("attestation", "parity_refusal"),
                "attestation_summary": deferred("attestation", "attestation_summary"),
                "launch_provenance": deferred("attestation", "launch_provenance"),
                "fabric_identity": deferred("attestation", "fabric_identity"),
            }
        )
