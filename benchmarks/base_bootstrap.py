#!/usr/bin/env python
"""Benchmark (not a test): the simulation's Debian 12 base, mmdebstrap against debootstrap.

molecule/resources/images/debian-base/build.sh bootstraps the base image with mmdebstrap; it used debootstrap. Each
round runs both (in alternating order) into throwaway files under /var/tmp, each with the options its build.sh line
gives, and prints each one's wall time and CPU seconds (its own and its children's: apt, dpkg) and the ratio of the
medians. Both must end with the same packages, or it fails.

Needs root, both tools (`apt-get install mmdebstrap debootstrap`) and Debian's archive (this machine's apt mirror).
Usage: benchmarks/base_bootstrap.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

SUITE = "bookworm"
PACKAGES = "python3,ca-certificates"


def apt_mirror() -> str:
    """The mirror this machine's apt uses, as build.sh finds it."""
    for path in [pathlib.Path("/etc/apt/sources.list"), *sorted(pathlib.Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            found = re.search(r"https?://\S+/debian/?(?=\s|$)", path.read_text(), re.M)
        except OSError:
            continue
        if found:
            return found.group(0)
    return "http://deb.debian.org/debian"


def bootstrap_command(tool: str, target: pathlib.Path, mirror: str) -> list[str]:
    if tool == "debootstrap":  # the line build.sh had
        return ["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(target), mirror]
    return [  # the line build.sh has
        "mmdebstrap", "--quiet", "--variant=minbase", f"--include={PACKAGES},usr-is-merged",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", SUITE, str(target), mirror,
    ]  # fmt: skip


def installed_packages(tool: str, target: pathlib.Path) -> set[str]:
    if tool == "debootstrap":
        status = (target / "var/lib/dpkg/status").read_text()
    else:
        with tarfile.open(target) as archive:
            member = archive.extractfile("./var/lib/dpkg/status")
            assert member is not None
            status = member.read().decode()
    return set(re.findall(r"^Package: (\S+)$", status, re.M))


def one_run(tool: str, mirror: str) -> tuple[float, float, set[str]]:
    """Wall seconds, CPU seconds of the tool and its children, the packages it installed."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="sparkfleet-bench-bootstrap.", dir="/var/tmp"))
    target = work / ("rootfs" if tool == "debootstrap" else "rootfs.tar")
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        done = subprocess.run(bootstrap_command(tool, target, mirror), capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.exit(f"{tool} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu, installed_packages(tool, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each bootstrapping with both (order alternates)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("both bootstraps need root: run it as root")
    missing = [tool for tool in ("mmdebstrap", "debootstrap") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"missing {' and '.join(missing)}: apt-get install {' '.join(missing)}")
    mirror = apt_mirror()
    walls: dict[str, list[float]] = {"debootstrap": [], "mmdebstrap": []}
    cpus: dict[str, list[float]] = {"debootstrap": [], "mmdebstrap": []}
    for index in range(args.rounds):
        order = ("debootstrap", "mmdebstrap") if index % 2 == 0 else ("mmdebstrap", "debootstrap")
        packages = {}
        for tool in order:
            wall, cpu, packages[tool] = one_run(tool, mirror)
            walls[tool].append(wall)
            cpus[tool].append(cpu)
        if packages["debootstrap"] != packages["mmdebstrap"]:
            only_old = sorted(packages["debootstrap"] - packages["mmdebstrap"])
            only_new = sorted(packages["mmdebstrap"] - packages["debootstrap"])
            sys.exit(f"the package sets differ: debootstrap only {only_old}, mmdebstrap only {only_new}")
        print(
            f"round {index + 1} ({' then '.join(order)}): debootstrap {walls['debootstrap'][-1]:.1f} s, {cpus['debootstrap'][-1]:.1f} CPU s;"
            f" mmdebstrap {walls['mmdebstrap'][-1]:.1f} s, {cpus['mmdebstrap'][-1]:.1f} CPU s; the same {len(packages['mmdebstrap'])} packages"
        )
    old_wall, new_wall = statistics.median(walls["debootstrap"]), statistics.median(walls["mmdebstrap"])
    old_cpu, new_cpu = statistics.median(cpus["debootstrap"]), statistics.median(cpus["mmdebstrap"])
    print(
        f"base bootstrap from {mirror}, median of {args.rounds}: debootstrap {old_wall:.1f} s, {old_cpu:.1f} CPU s;"
        f" mmdebstrap {new_wall:.1f} s, {new_cpu:.1f} CPU s: mmdebstrap / debootstrap wall {new_wall / old_wall:.2f}x, CPU {new_cpu / old_cpu:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
