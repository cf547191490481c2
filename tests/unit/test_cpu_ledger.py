"""tests/support/cpu_ledger.py: the verify plugin's cgroup readings and its summary."""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.tests.support.cpu_ledger import ledger_lines, node_cgroup_usage_s


def test_a_nodes_cpu_is_read_from_cgroup_v1_or_v2_and_none_where_neither_is_there(tmp_path):
    (tmp_path / "v1/cpuacct/docker/aaa").mkdir(parents=True)
    (tmp_path / "v1/cpuacct/docker/aaa/cpuacct.usage").write_text("2500000000\n")
    (tmp_path / "v2/system.slice/docker-bbb.scope").mkdir(parents=True)
    (tmp_path / "v2/system.slice/docker-bbb.scope/cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert node_cgroup_usage_s("aaa", root=tmp_path / "v1") == 2.5
    assert node_cgroup_usage_s("bbb", root=tmp_path / "v2") == 1.5
    assert node_cgroup_usage_s("ccc", root=tmp_path / "v1") is None


def test_the_summary_lists_the_costliest_cases_first_with_the_totals():
    rows = [("cheap", 2.0, 0.5, 0.5), ("dear", 100.0, 40.0, 80.0), ("middling", 30.0, 10.0, 5.0)]
    lines = ledger_lines(rows, shown=2)
    assert lines[0].startswith("verify's CPU: 136 CPU s in 3 cases (50 the controller's, 86 this scenario's nodes'), 132 s of cases; the 2 costliest")
    assert [line.split()[-1] for line in lines[1:]] == ["dear", "middling"]
    assert lines[1].split()[:5] == ["120.0", "=", "40.0", "+", "80.0"]
