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
