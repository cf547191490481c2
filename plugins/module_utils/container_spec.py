# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""A profile's container settings (GPUs, devices, ulimits, shared memory) in Docker's two spellings.

The engine's ranks are created by community.docker.docker_container, which takes a ulimit as
NAME:SOFT:HARD; preflight's checks (clock burn, all-reduce) run the Docker CLI, which takes
NAME=SOFT[:HARD] and refuses the other ("invalid ulimit argument"). Both come from the same profile
data through this module, so a check's container is built as the engine's is.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

# The names Docker accepts (docker/go-units ulimit.go).
ULIMIT_NAMES = ("core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack")
_VALUE = r"-?\d+"


class ContainerSpecError(ValueError):
    """Profile container settings Docker would refuse (bad input)."""


def ulimit_parts(ulimit):
    """'memlock:-1:-1' (community.docker) or 'memlock=-1:-1' (Docker CLI) -> ('memlock', '-1', '-1')."""
    text = str(ulimit).strip()
    match = re.fullmatch(rf"(?P<name>[a-z]+)[:=](?P<soft>{_VALUE})(?::(?P<hard>{_VALUE}))?", text)
    if not match or match["name"] not in ULIMIT_NAMES:
        raise ContainerSpecError(
            f"ulimit {ulimit!r} is not NAME:SOFT:HARD with a name Docker knows ({', '.join(ULIMIT_NAMES)}): "
            "write it like memlock:-1:-1 in the profile's ulimits."
        )
    return match["name"], match["soft"], match["hard"] or match["soft"]


def ulimit_module(ulimit):
    """community.docker.docker_container's spelling: 'memlock:-1:-1'."""
    return ":".join(ulimit_parts(ulimit))


def ulimit_cli(ulimit):
    """The Docker CLI's spelling: 'memlock=-1:-1'."""
    name, soft, hard = ulimit_parts(ulimit)
    return f"{name}={soft}:{hard}"


def docker_run_options(gpus=False, devices=(), ulimits=(), shm_size=None):
    """`docker run` options for a profile's container settings, as the engine's ranks get them."""
    options = ["--gpus=all"] if gpus else []
    for device in devices or []:
        if not str(device).startswith("/dev/"):
            raise ContainerSpecError(f"device {device!r} is not a path under /dev: write it like /dev/infiniband in the profile's devices.")
        options.append(f"--device={device}")
    options += [f"--ulimit={ulimit_cli(ulimit)}" for ulimit in ulimits or []]
    if shm_size:
        options.append(f"--shm-size={shm_size}")
    return options


# What the Docker CLI prints when it refuses a container, matched in order: the socket and the daemon first
# (the profile is not at fault), then each of the profile's settings, then the image. Each pattern is what Docker
# 20.10 (Ubuntu's docker.io) or 28 printed for that cause.
_REFUSALS = (
    (
        r"permission denied while trying to connect to the Docker daemon socket|unknown server OS",
        "{node}'s Docker socket refused the deploy user: the checks reach it through sudo (become), so give that user"
        " sudo on {node}, or add it to the docker group (sudo usermod -aG docker USER; the host role does), then run again",
    ),
    (
        r"Cannot connect to the Docker daemon|Is the docker daemon running",
        "Docker is not running on {node}: start it (sudo systemctl start docker; the host role enables it), then run again",
    ),
    (
        r"could not select device driver .*gpu",
        "Docker on {node} has no GPU driver registered (profiles[{profile}].gpus): install the NVIDIA Container Toolkit and"
        " register its runtime (sudo nvidia-ctk runtime configure --runtime=docker; sudo systemctl restart docker), then run again",
    ),
    (
        r"error gathering device information while adding custom device \"(?P<device>[^\"]+)\"",
        "{device} is missing on {node} (profiles[{profile}].devices): check that the devices exist (ls {device}; their"
        " driver loaded), or take it out of the profile, then run again",
    ),
    (
        r"invalid ulimit argument|error setting rlimit",
        "Docker on {node} refused a ulimit of profiles[{profile}].ulimits: a ulimit above dockerd's own hard limit cannot"
        " be given to a container (raise LimitMEMLOCK/LimitNOFILE in docker.service), then run again",
    ),
    (
        r"No such image|Unable to find image",
        "{node} does not hold the engine image (checks never pull it): run playbooks/artifacts.yml, then run again",
    ),
)


def docker_refusal_fix(stderr, node, profile):
    """What the Docker CLI printed when it refused a check's container -> what was refused and the fix, in our words."""
    for pattern, fix in _REFUSALS:
        match = re.search(pattern, stderr or "")
        if match:
            return fix.format(node=node, profile=profile, **match.groupdict())
    return (
        f"The profile's gpus, devices or ulimits (profiles[{profile}]) are what the engine's ranks get too: fix them there,"
        " or the cause Docker names, then run again"
    )
