# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""NCCL at exactly one version: read what apt/dpkg would do, refuse anything else.

The recipe's image re-pins NCCL 2.30.7 because FlashInfer's pip silently
downgrades it to 2.29.7, which fails on the Spark fabric: a host NCCL at
another version is the same trap. Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

# apt-get -s: "Inst libnccl2 (2.30.7-1+cuda13.0 cuda [amd64])" or, on an
# upgrade/downgrade, "Inst libnccl2 [2.29.7-1+cuda13.0] (2.30.7-1+cuda13.0 ...)".
_INST = re.compile(r"^Inst (\S+) (?:\[(\S+)\] )?\((\S+)")
_REMV = re.compile(r"^Remv (\S+)")
_NOT_FOUND = re.compile(r"Version '([^']+)' for '([^']+)' was not found|Unable to locate package (\S+)")


def parse_apt_simulation(text):
    """`apt-get -s install ...` output -> {"install": {pkg: (old|None, new)}, "remove": [pkg], "missing": [msg]}."""
    install, remove, missing = {}, [], []
    for line in text.splitlines():
        line = line.strip()
        match = _INST.match(line)
        if match:
            install[match.group(1)] = (match.group(2), match.group(3))
            continue
        match = _REMV.match(line)
        if match:
            remove.append(match.group(1))
            continue
        match = _NOT_FOUND.search(line)
        if match:
            missing.append(line.removeprefix("E: "))
    return {"install": install, "remove": remove, "missing": missing}


def problems(node, packages, version, installed, held, simulation, replace_installed=False, repo_url=""):
    """Why NCCL cannot be put at `version` on `node` without surprising anyone.

    installed: {pkg: version} of what dpkg has, or Ansible's package_facts map
    ({pkg: [{"version": ...}]}); held: packages marked hold;
    simulation: parse_apt_simulation() of installing `pkg=version` for each.
    Another installed or held version is refused unless replace_installed.
    """
    found = []
    for package in packages:
        current = installed.get(package)
        if isinstance(current, list):
            current = current[0]["version"] if current else None
        if current is None or current == version:
            continue
        if replace_installed:
            continue
        how = "installed and held" if package in held else "installed"
        found.append(
            f"{node}: {package} {current} is {how}, not the pinned {version}. Nothing was changed on {node}. "
            f"Replace it with the pinned version (run again with -e nccl_replace_installed=true), "
            f"or remove it (sudo apt-mark unhold {' '.join(packages)}; sudo apt-get remove {' '.join(packages)}) and run again."
        )
    for message in simulation["missing"]:
        found.append(
            f"{node}: apt cannot install NCCL {version} from {repo_url or 'the configured repository'}: {message}. "
            f"Check nccl_version and the repository (cuda_repo_url)."
        )
    for package, (_old, new) in sorted(simulation["install"].items()):
        if package in packages and new != version:
            found.append(f"{node}: apt would install {package} {new}, not the pinned {version}. Check /etc/apt/preferences.d for another pin.")
    pinned_away = [package for package in simulation["remove"] if not package.startswith("libnccl")]
    if pinned_away:
        found.append(f"{node}: installing NCCL {version} would remove {', '.join(pinned_away)}. Resolve that by hand and run again.")
    return found


def nccl_conf(settings):
    """/etc/nccl.conf text from the cluster's NCCL settings (NCCL reads KEY=VALUE lines).

    `auto` values are left out: NCCL picks them itself (the GID index among them).
    """
    lines = ["# Written by sparkfleet.vllm (nccl role) from the cluster's nccl_settings; edits are overwritten."]
    for key in sorted(settings):
        value = str(settings[key])
        if value.lower() == "auto":
            lines.append(f"# {key}: auto (chosen at run time)")
            continue
        if not re.fullmatch(r"NCCL_[A-Z0-9_]+", key) or "\n" in value:
            raise ValueError(f"{key}={value!r} is not an NCCL setting (NCCL_NAME: value on one line)")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"
