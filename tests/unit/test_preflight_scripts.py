"""The preflight scripts run for real: the all-reduce with two gloo ranks on this machine (the venv's torch), the clock burn without a GPU."""

import json
import pathlib
import socket
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "roles/preflight/files/allreduce_check.py"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Timeouts that catch a hang, not slowness: under `make test` these run beside verify in the CPU cgroup of the least
# weight (the Makefile's BESIDE_MOLECULE_IDLE), where one rank's torch import and rendezvous once took over 120 s.
HANG_S = 600


def test_two_ranks_sum_correctly_and_report_bus_bandwidth():
    pytest.importorskip("torch")
    port = str(free_port())
    common = ["--backend", "gloo", "--world-size", "2", "--master-addr", "127.0.0.1", "--master-port", port, "--size-mb", "4", "--timeout-s", str(HANG_S // 2)]
    # As the role passes it: the script's text to `python -c`, then its arguments.
    ranks = [subprocess.Popen([sys.executable, "-c", SCRIPT.read_text(), *common, "--rank", str(rank)], stdout=subprocess.PIPE, text=True) for rank in (1, 0)]
    outputs = [process.communicate(timeout=HANG_S)[0] for process in ranks]
    assert [process.returncode for process in ranks] == [0, 0]
    assert outputs[0] == ""  # only rank 0 reports
    report = json.loads(outputs[1])
    assert report["ranks"] == 2
    assert report["correct"] is True
    assert report["bytes"] == 4 * 1024 * 1024
    # nccl-tests' bus bandwidth: algbw x 2(n-1)/n, so equal to algbw at n = 2.
    assert report["busbw_gbs"] == pytest.approx(report["algbw_gbs"], rel=1e-3)
    assert report["busbw_gbs"] > 0


def test_clock_burn_refuses_clearly_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this checks the message without one")
    script = SCRIPT.with_name("clock_burn.py")
    out = subprocess.run([sys.executable, "-c", script.read_text(), "--seconds", "1"], capture_output=True, text=True, timeout=HANG_S, check=False)
    assert out.returncode == 2
    assert json.loads(out.stdout) == {"error": "no CUDA device in the container: run it with --gpus all on a GPU node"}
