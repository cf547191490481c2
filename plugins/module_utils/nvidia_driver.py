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


def plan(loaded, minimum, target, installs_allowed=True):
    """Which nodes get the pinned driver, and what stops the run.

    loaded: {node: driver version loaded there, or None when none answers}.
    A node needs `target` when no driver answers, when its driver is below
    `minimum`, or when the nodes do not all run one version (then every node
    not at `target` gets it: the pinned version is the cluster's truth).
    Returns {"install": {node: reason}, "problems": [message]}; problems are
    non-empty only when installs are forbidden (or the settings are wrong).
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
    if len(set(running.values())) > 1:
        spread = ", ".join(f"{node} {version}" for node, version in sorted(running.items()))
        for node, version in sorted(running.items()):
            if version != target:
                install[node] = f"drivers differ across the nodes ({spread}); the pinned one is {target}"
    problems = []
    if install and not installs_allowed:
        for node, reason in sorted(install.items()):
            problems.append(
                f"{node}: {reason}, and installs are forbidden (nvidia_driver_install: false). "
                f"Install driver {target} there (or allow the role to: nvidia_driver_install: true) and run again."
            )
    return {"install": install, "problems": problems}
