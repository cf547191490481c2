# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The NVIDIA driver of a cluster: what each node runs, and which nodes need the pinned one.

Decided for all nodes at once because one engine spans them: every rank must
run the same driver, so drift on one node is a cluster problem, not a node's.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import nvidia_smi

# nvidia-smi exits 9 and says this when it is installed but no driver is loaded.
_NO_DRIVER = re.compile(r"couldn't communicate with the NVIDIA driver|No devices were found|Driver/library version mismatch")


class DriverPolicyError(ValueError):
    """Settings that cannot describe a cluster's driver (bad input)."""


def upstream_version(package_version):
    """A Debian package version -> the driver's: '1:580.95.05-0ubuntu1' -> '580.95.05'."""
    version = str(package_version).split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def loaded_driver(rc, stdout, stderr, found=True):
    """What nvidia-smi said -> {state, version, cuda_version, gpus, detail}.

    state is "loaded" (a driver answers), "not_loaded" (nvidia-smi runs but no
    driver answers: not installed, not yet rebooted, or a library mismatch) or
    "absent" (no nvidia-smi at all). Parses the default table, the form every
    driver prints (GB10 prints `Not Supported` for memory: read as None).
    """
    if not found:
        return {"state": "absent", "version": None, "cuda_version": None, "gpus": [], "detail": "nvidia-smi not found"}
    text = (stdout or "") + (stderr or "")
    if rc != 0 or _NO_DRIVER.search(text):
        first = next((line.strip() for line in text.splitlines() if line.strip()), f"exit {rc}")
        return {"state": "not_loaded", "version": None, "cuda_version": None, "gpus": [], "detail": first[:300]}
    table = nvidia_smi.parse_table(stdout)
    return {"state": "loaded", "version": table["driver_version"], "cuda_version": table["cuda_version"], "gpus": table["gpus"], "detail": ""}


def available_versions(madison_outputs):
    """`apt-cache madison PACKAGE` of every node -> the driver versions every node's repository offers."""
    per_node = []
    for text in madison_outputs:
        versions = set()
        for line in (text or "").splitlines():
            parts = [part.strip() for part in line.split("|")]
            if len(parts) >= 2 and parts[1]:
                versions.add(upstream_version(parts[1]))
        per_node.append(versions)
    return sorted(set.intersection(*per_node), key=nvidia_smi.version_tuple) if per_node else []


# What NVIDIA documents for a DGX Spark whose driver must change: its own OS update, never a CUDA-repository driver.
DGX_OS_UPDATE = (
    "Update DGX OS on those nodes the way NVIDIA's DGX Spark User Guide documents (the DGX Dashboard's update, or "
    "sudo apt update && sudo apt full-upgrade, then sudo reboot), one node at a time, until every node runs one driver"
)


def plan(loaded, minimum, target, installs_allowed=True, available=None, allow_downgrade=False, os_owned=None):
    """Which nodes get which driver, and what stops the run.

    loaded: {node: driver version loaded there, or None when none answers}.
    A node needs a driver when none answers, when its driver is below `minimum`,
    or when the nodes do not all run one version. Which one:
    - by default no node is ever downgraded: the cluster converges on the
      newest version it runs, or on `target` when that is newer. When a node
      runs a driver newer than `target`, the others are brought up to it only
      where `available` (the repository's versions, None when unknown) has it;
      otherwise the run stops with every node's version and the ways out.
    - allow_downgrade: every node not at `target` gets `target` (the pin is the
      cluster's truth, downgrades and their reboots included).
    A node that needs no change is never touched (nor rebooted).
    os_owned: {node: its OS's driver packages ("nvidia-driver-580-open 580.95.05-0ubuntu1")} where the OS owns
    the driver (DGX OS: Canonical-signed packages under Secure Boot). Such a node is verified, never given a
    driver nor rebooted: if it needs one, the run stops naming every node's version and DGX OS's own update.
    Returns {"install": {node: reason}, "version": the version installed there,
    "problems": [message]}.
    """
    try:
        minimum_tuple, target_tuple = nvidia_smi.version_tuple(minimum), nvidia_smi.version_tuple(target)
    except nvidia_smi.NvidiaSmiError as error:
        raise DriverPolicyError(f"{error}: set nvidia_driver_min_version and nvidia_driver_version like 580.95.05") from error
    if target_tuple < minimum_tuple:
        raise DriverPolicyError(f"nvidia_driver_version {target} is below nvidia_driver_min_version {minimum}: pin a driver at or above the minimum.")
    install = {}
    for node, version in sorted(loaded.items()):
        if version is None:
            install[node] = "no driver answers"
        elif nvidia_smi.version_tuple(version) < minimum_tuple:
            install[node] = f"driver {version} is below the minimum {minimum}"
    running = {node: version for node, version in loaded.items() if node not in install}
    spread = ", ".join(f"{node} {version}" for node, version in sorted(loaded.items()) if version is not None)
    newest = max(running.values(), key=nvidia_smi.version_tuple) if running else None
    version = target
    problems = []
    if not allow_downgrade and newest is not None and nvidia_smi.version_tuple(newest) > target_tuple:
        version = newest
    mixed = len(set(running.values())) > 1
    if mixed or install:
        for node, running_version in sorted(running.items()):
            if running_version != version:
                direction = "up to" if nvidia_smi.version_tuple(running_version) < nvidia_smi.version_tuple(version) else "down to the pinned"
                install[node] = f"drivers differ across the nodes ({spread}); {direction} {version}"
    if install and version != target and (available is None or version not in available):
        offered = ", ".join(available) if available else "unknown"
        problems.append(
            f"The nodes run {spread}; the newest, {version}, is above the pinned {target} and no node is downgraded by default, "
            f"but the repository does not offer {version} on every node (it offers: {offered}). Nothing was changed. "
            f"Pin it (nvidia_driver_version: {version}) once the repository has it, or bring every node to {target}, "
            f"downgrades and reboots included (nvidia_driver_allow_downgrade: true)."
        )
    # A node whose OS does not own its driver may come as None or "" (Ansible renders an empty template as None).
    os_owned = {node: owner for node, owner in (os_owned or {}).items() if owner}
    owned_needing = sorted(set(install) & set(os_owned))
    if owned_needing:
        table = ", ".join(f"{node} {loaded.get(node) or 'no driver loaded'}" + (f" ({os_owned[node]})" if node in os_owned else "") for node in sorted(loaded))
        reasons = "; ".join(f"{node}: {install[node]}" for node in owned_needing)
        problems.append(
            f"The nodes run {table}. {reasons}. DGX OS owns the driver on {', '.join(owned_needing)} (Canonical-signed packages, "
            "Secure Boot): this role never replaces them nor reboots for them, and nothing was changed. "
            f"{DGX_OS_UPDATE} at or above {minimum}, then run again."
        )
        return {"install": {}, "version": version, "problems": problems}
    if install and not installs_allowed:
        for node, reason in sorted(install.items()):
            problems.append(
                f"{node}: {reason}, and installs are forbidden (nvidia_driver_install: false). "
                f"Install driver {version} there (or allow the role to: nvidia_driver_install: true) and run again."
            )
    return {"install": install, "version": version, "problems": problems}
