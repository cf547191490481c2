"""A pytest plugin for molecule's verify: each case's CPU, costliest first, at the end of the run.

CI's budget is CPU-bound (docs/measurements.md): what must go is CPU seconds, and a case's wall time says little
about them where another cluster runs beside it. For each case (its call, and the fixtures it was first to set up)
this counts what the controller spent (pytest and every process it waited for: ansible-playbook, its workers, ssh,
docker exec) and what the scenario's own simulated nodes spent (their containers' CPU accounting, the ranks'
containers inside them included). Another scenario's nodes beside it are not counted, nor anything else on the
machine. Each scenario's tests/conftest.py registers it; it only reports and never fails a case.
"""

from __future__ import annotations

import os
import pathlib
import re
import resource
import subprocess
import time

import pytest

# How many cases the summary lists.
SHOWN = 30


def controller_cpu_s():
    """CPU seconds of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def node_cgroup_usage_s(container_id, root=pathlib.Path("/sys/fs/cgroup")):
    """One container's CPU seconds from its cgroup (v1 cpuacct, or v2 cpu.stat); None where neither is readable."""
    v1 = root / "cpuacct" / "docker" / container_id / "cpuacct.usage"
    try:
        return int(v1.read_text()) / 1e9
    except (OSError, ValueError):
        pass
    for v2 in (root / "system.slice" / f"docker-{container_id}.scope" / "cpu.stat", root / "docker" / container_id / "cpu.stat"):
        try:
            usage = re.search(r"^usage_usec (\d+)$", v2.read_text(), re.M)
        except OSError:
            continue
        if usage:
            return int(usage.group(1)) / 1e6
    return None


def scenario_nodes(prefix=None):
    """The container IDs of this scenario's simulated nodes: SIM_NODE_PREFIX (the rehearsal's) then sparkN."""
    prefix = os.environ.get("SIM_NODE_PREFIX", "") if prefix is None else prefix
    listed = subprocess.run(
        ["docker", "ps", "--no-trunc", "--filter", "label=io.sparkfleet.sim", "--format", "{{.ID}} {{.Names}}"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    wanted = re.compile(rf"^{re.escape(prefix)}spark\d+$")
    return [cid for cid, name in (line.split() for line in listed.stdout.splitlines() if len(line.split()) == 2) if wanted.match(name)]


def nodes_cpu_s(nodes):
    """The nodes' CPU seconds together (a node it cannot read counts 0: the ledger only reports)."""
    return sum(node_cgroup_usage_s(cid) or 0.0 for cid in nodes)


def ledger_lines(rows, shown=SHOWN):
    """The summary: rows are (case, wall s, controller CPU s, nodes CPU s); costliest by their sum first."""
    rows = sorted(rows, key=lambda row: -(row[2] + row[3]))
    total = [sum(row[i] for row in rows) for i in (1, 2, 3)]
    lines = [
        f"verify's CPU: {total[1] + total[2]:.0f} CPU s in {len(rows)} cases ({total[1]:.0f} the controller's, {total[2]:.0f} this"
        f" scenario's nodes'), {total[0]:.0f} s of cases; the {min(shown, len(rows))} costliest (CPU s: all = controller + nodes; wall s):"
    ]
    lines += [f"{ctl + nodes:7.1f} = {ctl:6.1f} + {nodes:6.1f}  {wall:6.1f} s  {case}" for case, wall, ctl, nodes in rows[:shown]]
    return lines


class CpuLedger:
    def __init__(self):
        self.rows = []
        self.nodes = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if self.nodes is None:
            self.nodes = scenario_nodes()
        start = (time.monotonic(), controller_cpu_s(), nodes_cpu_s(self.nodes))
        yield
        end = (time.monotonic(), controller_cpu_s(), nodes_cpu_s(self.nodes))
        self.rows.append((item.nodeid.split("::", 1)[-1], *(after - before for before, after in zip(start, end, strict=True))))

    def pytest_terminal_summary(self, terminalreporter):
        if self.rows:
            terminalreporter.section("CPU per case (tests/support/cpu_ledger.py)")
            for line in ledger_lines(self.rows):
                terminalreporter.write_line(line)


def pytest_configure(config):
    config.pluginmanager.register(CpuLedger(), "sparkfleet-cpu-ledger")
