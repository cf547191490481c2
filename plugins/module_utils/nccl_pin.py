# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""NCCL at exactly one version on the hosts: read what apt/dpkg would do, then decide.

The recipe's image re-pins NCCL 2.30.7 because FlashInfer's pip silently
downgrades it to 2.29.7, which fails on the Spark fabric. The engine loads the
NCCL inside its image (the nccl role checks that one on every node), so a host
with another libnccl2 is reported and left as it is, unless the host's NCCL is
made the engine's (nccl_host_library_for_engine): then it is the same trap and
is refused. Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

# apt-get -s: "Inst libnccl2 (2.30.7-1+cuda13.3 cuda [amd64])" or, on an
# upgrade/downgrade, "Inst libnccl2 [2.29.7-1+cuda13.0] (2.30.7-1+cuda13.3 ...)".
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


# NVIDIA's package versions: UPSTREAM-REVISION+cudaMAJOR.MINOR ("2.30.7-1+cuda13.3").
_BUILD = re.compile(r"^(?P<upstream>[^+]+)\+cuda(?P<major>\d+)\.(?P<minor>\d+)$")


class NcclPinError(ValueError):
    """A pin the repository cannot satisfy, or one that is not spelled as NVIDIA spells versions."""


def offered_versions(madison_output):
    """`apt-cache madison libnccl2` -> the versions the repository offers ("2.30.7-1+cuda13.3", ...)."""
    versions = []
    for line in (madison_output or "").splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) >= 2 and parts[1] and parts[1] not in versions:
            versions.append(parts[1])
    return versions


def resolve_version(pin, offered, cuda_major):
    """The package version to install for `pin` on a node whose CUDA major version is `cuda_major`.

    pin: NCCL's upstream version and revision ("2.30.7-1"), as NVIDIA names a release; the
    repository publishes each release once per CUDA it was built for ("2.30.7-1+cuda13.3"). The
    newest build for the node's CUDA major is taken: CUDA's minor-version compatibility runs any
    13.x build on a 13.0 driver. A pin that already names a build ("2.30.7-1+cuda13.3") is taken
    as it is, when the repository offers it.
    """
    pin, major = str(pin).strip(), str(cuda_major).strip()
    if not re.fullmatch(r"\d+\.\d+\.\d+-\d+(\+cuda\d+\.\d+)?", pin):
        raise NcclPinError(f"nccl_version {pin!r} is not an NCCL release: write it as NVIDIA does, like 2.30.7-1 (or one build, like 2.30.7-1+cuda13.3).")
    if not major.isdigit():
        raise NcclPinError(f"the node's CUDA major version {cuda_major!r} is not a number: set nccl_cuda_major, like 13.")
    if "+" in pin:
        if pin in offered:
            return pin
        candidates = []
    else:
        candidates = [
            (int(match["minor"]), version)
            for version, match in ((version, _BUILD.match(version)) for version in offered)
            if match and match["upstream"] == pin and match["major"] == major
        ]
    if candidates:
        return max(candidates)[1]
    same_release = [version for version in offered if version.split("+", 1)[0] == pin.split("+", 1)[0]]
    listed = ", ".join(offered) if offered else "nothing"
    raise NcclPinError(
        f"NCCL {pin} has no build for CUDA {major} in the repository"
        + (f" (it has {', '.join(same_release)})" if same_release else "")
        + f"; it offers: {listed}. Pin a release it has a CUDA {major} build of (nccl_version, like 2.30.7-1), or check the repository (cuda_repo_url)."
    )


def other_versions(packages, version, installed):
    """{package: installed version} for each of `packages` installed at another version than `version`.

    installed: {pkg: version} of what dpkg has, or Ansible's package_facts map ({pkg: [{"version": ...}]}).
    """
    found = {}
    for package in packages:
        current = installed.get(package)
        if isinstance(current, list):
            current = current[0]["version"] if current else None
        if current is not None and current != version:
            found[package] = current
    return found


def other_version_report(node, packages, version, installed, held):
    """What a node with another host NCCL is told when it is left as it is ("" when there is none)."""
    others = other_versions(packages, version, installed)
    if not others:
        return ""
    listed = ", ".join(f"{package} {current}{' (held)' if package in held else ''}" for package, current in others.items())
    return (
        f"{node}: {listed} on the host, not the pinned {version}: left as it is. The engine loads the NCCL inside its "
        f"image (checked on every node), not the host's. To pin the host too, run again with -e nccl_replace_installed=true; "
        f"to make the host's NCCL the engine's, set nccl_host_library_for_engine: true (then another version is refused)."
    )


def problems(node, packages, version, installed, held, simulation_output, replace_installed=False, repo_url="", engine_uses_host_library=True):
    """Why NCCL cannot be put at `version` on `node` without surprising anyone.

    installed: {pkg: version} of what dpkg has, or Ansible's package_facts map
    ({pkg: [{"version": ...}]}); held: packages marked hold;
    simulation_output: what `apt-get --simulate install pkg=version ...` printed (stdout and stderr).
    Another installed or held version is refused when the engine uses the host's library, unless
    replace_installed; otherwise it is no problem (other_version_report says why, the node is left alone).
    """
    found = []
    others = other_versions(packages, version, installed)
    if others and not replace_installed and not engine_uses_host_library:
        return []  # nothing will be installed here: what apt would do does not matter
    simulation = parse_apt_simulation(simulation_output or "")
    for package, current in others.items():
        if replace_installed:
            continue
        how = "installed and held" if package in held else "installed"
        found.append(
            f"{node}: {package} {current} is {how}, not the pinned {version}, and the engine loads the host's NCCL "
            f"(nccl_host_library_for_engine). Nothing was changed on {node}. "
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
