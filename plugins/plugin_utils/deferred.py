# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Our module_utils, imported when a filter is first called, not when its filter file is.

To find one filter of a collection, ansible-core imports every filter file of that collection (Jinja2Loader walks the
package and calls each file's filters()), and it does so in every worker it forks: once per task and host. What a
filter file imports at its top, every task that uses any of our filters pays again. Our filter files therefore import
none of our module_utils at their top; the logic behind them comes in at the first call (docs/measurements.md has
the figure).
"""

from __future__ import annotations

import importlib

MODULE_UTILS = "ansible_collections.sparkfleet.vllm.plugins.module_utils"


def module_utils(name):
    """module_utils/NAME (imported once per process, at the first call)."""
    return importlib.import_module(f"{MODULE_UTILS}.{name}")


def deferred(module, function):
    """module_utils/MODULE's FUNCTION, imported at the first call of what this returns."""

    def call(*args, **kwargs):
        return getattr(module_utils(module), function)(*args, **kwargs)

    call.__name__ = function
    call.__qualname__ = f"{module}.{function}"
    return call
