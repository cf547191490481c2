# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""What dpkg has installed of a few named packages.

The roles ask dpkg-query about the packages they manage, not package_facts for all of them:
package_facts builds python-apt's whole cache (every repository's package lists), ~0.5 s of CPU
per node per read, and the host stack reads three times a run.
"""

from __future__ import annotations

# dpkg-query -W -f="$QUERY_FORMAT" NAME...: one line per package dpkg knows.
QUERY_FORMAT = "${Package}\\t${db:Status-Abbrev}\\t${Version}\\n"

# The second letter of db:Status-Abbrev is the package's state; these two mean no files of it are installed
# (never installed / purged, or removed with its configuration kept). python-apt's is_installed agrees.
_NOT_INSTALLED = ("n", "c")


def query_argv(packages) -> list:
    """dpkg-query's argv asking about `packages` in QUERY_FORMAT: one line per package dpkg knows, exit code 1
    when it knows none of some (still read). The one place the roles' argv and this parser's format meet."""
    return ["dpkg-query", "-W", f"-f={QUERY_FORMAT}", "--", *[str(name) for name in packages]]


def _rows(query_output: str):
    """(name, status, version) per line of dpkg-query -W -f=QUERY_FORMAT output; another line is refused."""
    for line in (query_output or "").splitlines():
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"dpkg-query line {line!r} is not NAME<TAB>STATUS<TAB>VERSION: query with -f='{QUERY_FORMAT}'")
        yield tuple(fields)


def installed_versions(query_output: str) -> dict:
    """{package: version} of the packages dpkg has installed, from dpkg-query -W -f=QUERY_FORMAT output."""
    return {name: version for name, status, version in _rows(query_output) if len(status) >= 2 and status[1] not in _NOT_INSTALLED and version}


def held_packages(query_output: str) -> list:
    """Names of the packages whose dpkg selection is hold (what `apt-mark showhold` lists), from the same output.

    The first letter of db:Status-Abbrev is the selection: h is hold, whether or not the package is installed.
    """
    return [name for name, status, _version in _rows(query_output) if status.startswith("h")]
