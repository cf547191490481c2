# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Documentation fragment: the options of a module that talks to the engine's OpenAI-compatible API."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  url:
    description: Base URL of the engine's API, without C(/v1).
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  api_key:
    description: Sent as a bearer token when set (the engine's C(engine_api_key)).
    type: str
"""
