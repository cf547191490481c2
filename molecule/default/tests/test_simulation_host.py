"""The test machine's own check (molecule/resources/host-check.sh), against the real Docker engine that holds the cluster.

Its disk floor is a new machine's need, less what an earlier run left here and the next one reuses instead of
writing: the simulation's images and kept storage (sparkfleet-sim/*, sparkfleet-sim-*), as the engine reports
them. A machine that ran the tests before passes with less free disk than a new one; anything else's volumes do
not lower the floor. Volumes of a known size make the figure checkable beside the clusters' own, which grow while
the rehearsal runs: docker reports a file's size, so a sparse file of 1000 GB adds 1000 GB to that figure and no
block to the disk. The figures are GiB, as `df` and the floors are.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import uuid

REPO = pathlib.Path(__file__).resolve().parents[3]
HOST_CHECK = REPO / "molecule/resources/host-check.sh"
NEW_MACHINE_GB = 1_000_000  # more than any disk here: the check refuses, and its refusal names the figures


def _reused_gb():
    """The GB host-check takes from the disk floor, from its refusal (which names the floor it then needs)."""
    environment = {**os.environ, "SIM_MIN_DISK_GB": str(NEW_MACHINE_GB)}
    result = subprocess.run(["bash", str(HOST_CHECK)], env=environment, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    found = re.search(rf"this needs (\d+) GB \({NEW_MACHINE_GB} GB on a new machine, less the (\d+) GB", result.stderr)
    assert found, result.stderr
    needed, reused = int(found[1]), int(found[2])
    assert needed == NEW_MACHINE_GB - reused
    return reused


def _volume_with_sparse_file(name, gigabytes):
    subprocess.run(["docker", "volume", "create", name], check=True, capture_output=True)
    inspected = subprocess.run(["docker", "volume", "inspect", "--format", "{{.Mountpoint}}", name], check=True, capture_output=True, text=True)
    mountpoint = inspected.stdout.strip()
    subprocess.run(["truncate", "-s", f"{gigabytes}G", f"{mountpoint}/sparse"], check=True)


def test_the_disk_floor_is_lowered_by_the_simulations_kept_storage_and_by_nothing_else():
    tag = uuid.uuid4().hex[:8]
    ours, theirs = f"sparkfleet-sim-floor-test-{tag}", f"unrelated-floor-test-{tag}"
    reused_before = _reused_gb()
    # The cluster is up: the head's Docker storage alone holds the engine image (2.7 GB).
    assert reused_before >= 2, reused_before
    try:
        _volume_with_sparse_file(ours, 1000)
        _volume_with_sparse_file(theirs, 1000)
        reused_with = _reused_gb()
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", ours, theirs], check=False, capture_output=True)
    # The clusters' own storage may grow or shrink by a few GiB meanwhile; the unrelated volume's 1000 would double the step.
    assert 1000 - 20 <= reused_with - reused_before <= 1000 + 20, (reused_before, reused_with)
