# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: run our checking filters and return what each refused, so a task can fail with our sentence first.

A checking filter that raises inside set_fact reaches the user behind Ansible's templating chain ("Finalization of
task args ... The filter plugin ... failed: ..."). The roles run their checks through this filter in an assert
instead: the assert's message is ours, and every refusal of the run is named at once.
Documented in refusals.yml (ansible-doc -t filter sparkfleet.vllm.refusals).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.filter import access, engine_image, serve_args, vllm_patches

# The filters a refusal can come from: each raises AnsibleFilterError with our sentence.
CHECKING_FILTERS = {
    **access.FilterModule().filters(),
    **engine_image.FilterModule().filters(),
    **serve_args.FilterModule().filters(),
    **vllm_patches.FilterModule().filters(),
}


def refusals(checks):
    """Run each check ({filter, args, kwargs}) in order; return the message of every one that refused."""
    found = []
    for check in checks:
        name = check.get("filter") if isinstance(check, dict) else None
        if name not in CHECKING_FILTERS:
            raise AnsibleFilterError(f"refusals: {name!r} is not one of our checking filters ({', '.join(sorted(CHECKING_FILTERS))}).")
        try:
            CHECKING_FILTERS[name](*check.get("args", []), **check.get("kwargs", {}))
        except AnsibleFilterError as error:
            found.append(str(error.message))
    return found


class FilterModule:
    """sparkfleet.vllm refusals filter."""

    def filters(self):
        return {"refusals": refusals}
