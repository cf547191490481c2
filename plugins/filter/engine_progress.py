# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: busy or wedged, from two of vLLM's /metrics pages (module_utils/engine_progress.py).

Documented in the YAML file beside this one (ansible-doc -t filter sparkfleet.vllm.engine_progress).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def engine_progress(pages, window_s):
    """Busy or wedged (module_utils/engine_progress.engine_progress)."""
    progress = module_utils("engine_progress")
    return progress.engine_progress([str(page or "") for page in pages], float(window_s))


class FilterModule:
    """sparkfleet.vllm engine progress filter."""

    def filters(self):
        return as_filters(
            {"engine_progress": engine_progress},
            TypeError,
            ValueError,
            describe=lambda error: f"engine_progress: give a list of /metrics pages and the seconds between them ({error})",
        )
