# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The one error wrapper of every filter: our errors raised as Ansible's filter error, in their own words."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# Every error of module_utils is a ValueError naming the bad value and the fix.
OUR_ERRORS = (ValueError,)


def raising_filter_errors(function, *errors, describe=str):
    """`function` as a filter: each of `errors` (ours by default) it raises becomes an AnsibleFilterError whose
    message is `describe(error)` (the error's own words by default)."""
    caught = errors or OUR_ERRORS

    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except caught as error:
            raise AnsibleFilterError(describe(error)) from error

    call.__name__ = function.__name__
    call.__doc__ = function.__doc__
    return call


def as_filters(functions, *errors, describe=str):
    """{name: function} -> {name: filter}, every one wrapped alike."""
    return {name: raising_filter_errors(function, *errors, describe=describe) for name, function in functions.items()}
