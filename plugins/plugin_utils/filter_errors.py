# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""What the filter plugins share: our errors, raised as Ansible's filter error with their own words."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def raising_filter_errors(function, *errors):
    """`function` as a filter: each of `errors` it raises becomes an AnsibleFilterError with the same message."""

    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except errors as error:
            raise AnsibleFilterError(str(error)) from error

    call.__name__ = function.__name__
    call.__doc__ = function.__doc__
    return call
