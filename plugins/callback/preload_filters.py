# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Callback plugin: this collection's filter plugins loaded once, in the controller's main process."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload_filters
type: aggregate
short_description: Load this collection's filters once, before Ansible forks its task workers
version_added: 0.1.0
author: sparkfleet developers (@sparkfleet)
description:
  - Ansible runs every task for every host in a worker process forked from C(ansible-playbook). A worker that
    templates one of this collection's filters (C(sparkfleet.vllm.checked_gmu), ...) has ansible-core load every
    filter file of the collection, then the module_utils behind the filter it calls (which ansible-core's collection
    loader compiles from source each time); the worker exits with them, and the next one loads them again.
  - This callback loads them once, when the playbook starts, in the main process; the workers it forks inherit them.
    It changes no result, and prints only at -vvv (how many files it loaded, and any it could not load).
  - The project's C(ansible.cfg) enables it; with an installed collection, add it to C(callbacks_enabled).
  - A filter file that fails to load here is loaded, and fails, where a task uses it, as without this callback.
requirements:
  - Enabled in C(callbacks_enabled) (ANSIBLE_CALLBACKS_ENABLED).
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import filter_preload


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sparkfleet.vllm.preload_filters"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        loaded, problems = filter_preload.preload(filter_loader)
        self._display.vvv(f"preload_filters: {len(loaded)} files of sparkfleet.vllm loaded before any worker forks")
        for problem in problems:
            self._display.vvv(f"preload_filters: not loaded: {problem}")
