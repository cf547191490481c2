#!/usr/bin/env python
"""Benchmark (not a test): the cpu engine image's size and what one fan-out hop of it costs, against a baseline.

The head sends the engine image to every worker (`docker save` on one node, `docker load` on the next), at every
converge, and the rehearsal pushes, pulls and fans out its stand-in made from it: each byte is paid several times
on the machine's two cores. images/engine-cpu/drop_unused_files.py leaves out what no rank loads. This builds the
image twice on this machine's Docker engine, without its build cache, from this checkout's Dockerfile and from the
--baseline commit's (the same context: the scripts the baseline copies must be unchanged), then per round, in
alternating order, saves each to a file (a hop's source side) and loads it back after removing it (its sink side),
and prints each image's size, build, save and load (wall and the machine's CPU seconds, /proc/stat), then the
ratios of the medians. The loaded image must have the built one's ID.

Needs the simulation's base image (`make sim-up` builds sparkfleet-sim/debian:12) and the wheels `make` fetches.
Usage: benchmarks/engine_image_size.py --baseline 01395fe [--rounds 2]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from node_bytecode_cache import machine_cpu_seconds

REPO = pathlib.Path(__file__).resolve().parent.parent
CONTEXT = REPO / "images/engine-cpu"
TAG = "sparkfleet-bench/vllm-cpu:"
# The files this change touched in the build context; every other file of it must match the baseline's.
NEW_FILES = ("images/engine-cpu/Dockerfile", "images/engine-cpu/.dockerignore", "images/engine-cpu/drop_unused_files.py")


def measured(command: list[str], **kwargs) -> tuple[float, float]:
    """(wall s, machine CPU s) of one command, which must succeed."""
    cpu, start = machine_cpu_seconds(), time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.monotonic() - start, machine_cpu_seconds() - cpu


def image_id(tag: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True, text=True, check=True).stdout.strip()


def image_size(tag: str) -> int:
    return int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True, check=True).stdout)


def one_hop(tag: str, scratch: pathlib.Path) -> tuple[float, float, float, float, int]:
    """(save wall, save CPU, load wall, load CPU, bytes) of the image saved to a file, removed, and loaded back."""
    built, archive = image_id(tag), scratch / "image.tar"
    save = measured(["docker", "save", "-o", str(archive), tag])
    size = archive.stat().st_size
    subprocess.run(["docker", "image", "rm", "-f", tag], check=True, capture_output=True)
    load = measured(["docker", "load", "-i", str(archive)])
    archive.unlink()
    if image_id(tag) != built:
        sys.exit(f"{tag} loaded back as {image_id(tag)}, not the built {built}")
    return *save, *load, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit whose Dockerfile is the baseline")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of save and load, each image once a round")
    args = parser.parse_args()
    if not (CONTEXT / "wheels/.complete").exists():
        sys.exit(f"no wheels in {CONTEXT / 'wheels'}: run `make demo-setup` (or `make test`) first")
    excluded = [f":(exclude){path}" for path in NEW_FILES]
    changed = subprocess.run(["git", "-C", str(REPO), "diff", "--name-only", args.baseline, "--", "images/engine-cpu", *excluded],
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    if changed:
        sys.exit(f"the build context differs from {args.baseline} beyond the Dockerfile: {changed}")
    show = ["git", "-C", str(REPO), "show", f"{args.baseline}:images/engine-cpu/Dockerfile"]
    dockerfiles = {"baseline": subprocess.run(show, capture_output=True, text=True, check=True).stdout, "this checkout": (CONTEXT / "Dockerfile").read_text()}
    tags = {"baseline": TAG + "baseline", "this checkout": TAG + "current"}
    built: dict[str, tuple[float, float]] = {}
    for name, dockerfile in dockerfiles.items():
        built[name] = measured(["docker", "build", "-q", "--no-cache", "-t", tags[name], "-f", "-", str(CONTEXT)], input=dockerfile.encode())
        print(f"{name:13}: {image_size(tags[name]) / 2**30:.2f} GiB, built in {built[name][0]:.0f} s ({built[name][1]:.0f} machine CPU s)", flush=True)
    hops: dict[str, list[tuple[float, float, float, float, int]]] = {name: [] for name in tags}
    with tempfile.TemporaryDirectory(prefix="sparkfleet-image-") as scratch:
        for index in range(args.rounds):
            for name in tags if index % 2 == 0 else reversed(tags):
                hops[name].append(one_hop(tags[name], pathlib.Path(scratch)))
                save_s, save_cpu, load_s, load_cpu, size = hops[name][-1]
                print(f"round {index + 1}, {name:13}: {size / 2**30:.2f} GiB saved in {save_s:.1f} s ({save_cpu:.1f} CPU s), "
                      f"loaded in {load_s:.1f} s ({load_cpu:.1f} CPU s)", flush=True)  # fmt: skip
    medians = {name: [statistics.median(figure) for figure in zip(*figures, strict=True)] for name, figures in hops.items()}
    for image in tags.values():
        subprocess.run(["docker", "image", "rm", "-f", image], check=False, capture_output=True)
    ratio = [mine / base for mine, base in zip(medians["this checkout"], medians["baseline"], strict=True)]
    for name, (save_s, save_cpu, load_s, load_cpu, size) in medians.items():
        print(f"median, {name:13}: {size / 2**30:.2f} GiB; save {save_s:.1f} s ({save_cpu:.1f} CPU s), load {load_s:.1f} s ({load_cpu:.1f} CPU s)")
    print(f"this checkout / baseline: bytes {ratio[4]:.2f}x, save wall {ratio[0]:.2f}x CPU {ratio[1]:.2f}x, load wall {ratio[2]:.2f}x CPU {ratio[3]:.2f}x, "
          f"build wall {built['this checkout'][0] / built['baseline'][0]:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
