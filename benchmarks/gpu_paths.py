"""Run the collection's GPU code paths on whatever NVIDIA GPUs this machine has (not a test: no GPU in CI).

Every path goes through the collection's own files, as the roles run them:
- gmu_check (the module, with its arguments, as Ansible runs a module): gmu 0.85 on the idle GPU,
  then again while another process of this script holds most of GPU 0's memory;
- gpu_driver_info (the module) on the real nvidia-smi;
- preflight's clock burn (roles/preflight/files/clock_burn.py), judged as preflight judges it;
- the NCCL version probe (roles/nccl/files/image_nccl_version.py) against this machine's PyTorch;
- preflight's all-reduce (roles/preflight/files/allreduce_check.py), NCCL backend, one process per
  GPU as the role runs one per node (each process sees only its own GPU): world size 1, then every
  GPU with the gb10 profile's NCCL settings minus those that need RDMA hardware, then once more with
  one rank given a wrong master port, as a user would meet that mistake.

Prints one line per path (ran / result / what it proves) and writes what the GPUs answered under
--out: nvidia-smi's outputs and every script's output, which become tests/data/gpu/ (unit-tested in CI).
Needs ansible-core importable (the modules use AnsibleModule) and a CUDA PyTorch.

Usage: python3 benchmarks/gpu_paths.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
MODULES = REPO / "plugins/modules"
CLOCK_BURN = REPO / "roles/preflight/files/clock_burn.py"
ALLREDUCE = REPO / "roles/preflight/files/allreduce_check.py"
NCCL_PROBE = REPO / "roles/nccl/files/image_nccl_version.py"
# preflight's defaults (roles/preflight/defaults/main.yml): preflight_clock_check.min_mhz
CLOCK_MIN_MHZ = 1500
# The gb10 profile's NCCL settings, as the ranks get them (playbooks/group_vars/all/nccl.yml), minus what needs RDMA
# hardware this machine lacks: NCCL_NET=IB and NCCL_IB_* (no HCA), and the derived NCCL_IB_HCA,
# NCCL_SOCKET_IFNAME (the Spark's interface names) and NCCL_IB_GID_INDEX (resolved from the HCA).
NCCL_FILE = REPO / "playbooks/group_vars/all/nccl.yml"
NEEDS_RDMA = ("NCCL_IB_",)


def gb10_nccl_settings() -> tuple[dict, list[str]]:
    """(the settings kept, the names dropped) from the cluster's nccl_settings."""
    import yaml  # PyYAML: there wherever Ansible is

    settings = yaml.safe_load(NCCL_FILE.read_text())["nccl_settings"]
    kept = {name: str(value) for name, value in settings.items() if name != "NCCL_NET" and not name.startswith(NEEDS_RDMA)}
    dropped = [*sorted(set(settings) - set(kept)), "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX"]
    return kept, dropped


def env_with_collection(extra: dict | None = None) -> dict:
    # The repository as ansible_collections/sparkfleet/vllm (make makes this link; a device machine's copy lacks it).
    link = REPO / "collections/ansible_collections/sparkfleet/vllm"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to("../../..")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "collections"), os.environ.get("PYTHONPATH", "")])))
    # NVLink multicast stays off wherever the machine set it (shared GPUs): never unset here.
    env.update(extra or {})
    return env


def run_module(name: str, args: dict) -> dict:
    """The module as Ansible runs it on a host: its file with an args file."""
    handle, path = tempfile.mkstemp(prefix=f"{name}-args-", suffix=".json")
    with os.fdopen(handle, "w") as stream:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, stream)
    args_file = pathlib.Path(path)
    done = subprocess.run(
        [sys.executable, str(MODULES / f"{name}.py"), str(args_file)], capture_output=True, text=True, env=env_with_collection(), timeout=300, check=False
    )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"failed": True, "msg": f"not JSON (rc {done.returncode}): {done.stdout[-800:]} {done.stderr[-800:]}"}


def last_json(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def allreduce(world: int, port: int, env_extra: dict, size_mb: float, timeout_s: int, rank_ports: dict | None = None) -> tuple[list[dict], float]:
    """allreduce_check.py as the preflight role runs it: one process per rank, each seeing one GPU."""
    processes = []
    started = time.monotonic()
    for rank in range(world):
        argv = [sys.executable, str(ALLREDUCE), "--backend", "nccl", "--rank", str(rank), "--world-size", str(world)]
        argv += [
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str((rank_ports or {}).get(rank, port)),
            "--size-mb",
            str(size_mb),
            "--timeout-s",
            str(timeout_s),
        ]
        env = env_with_collection({"CUDA_VISIBLE_DEVICES": str(rank), **env_extra})
        processes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    results = []
    for rank, process in enumerate(processes):
        try:
            out, err = process.communicate(timeout=timeout_s + 120)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        results.append({"rank": rank, "rc": process.returncode, "stdout": out[-4000:], "stderr": err[-4000:], "report": last_json(out)})
    return results, time.monotonic() - started


class GpuHolder:
    """Another process that holds GPU memory (as a leftover engine or a desktop would)."""

    def __init__(self, gib: float):
        code = (
            "import sys, time, torch\n"
            f"held = torch.empty(int({gib} * 1024**3), dtype=torch.uint8, device='cuda:0')\n"
            "torch.cuda.synchronize(); print('held', flush=True)\n"
            "time.sleep(600)\n"
        )
        self.process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.process.stdout.readline()
        if line.strip() != "held":
            raise RuntimeError("the holder process could not allocate GPU memory")

    def release(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--burn-seconds", type=float, default=5.0)
    options = parser.parse_args()
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    record: dict = {"paths": {}}

    def say(path: str, ran: str, result: str, proves: str, data=None):
        line = f"{path}: {ran} | {result} | {proves}"
        print(line, flush=True)
        lines.append(line)
        record["paths"][path] = {"ran": ran, "result": result, "proves": proves, "data": data}

    smi = {
        "nvidia-smi.txt": ["nvidia-smi"],
        "query-gmu.csv": ["nvidia-smi", "--query-gpu=index,name,memory.total,memory.used,memory.free", "--format=csv,noheader,nounits"],
        "query-clocks.csv": ["nvidia-smi", "--query-gpu=index,clocks.current.sm,clocks.max.sm,pstate", "--format=csv,noheader,nounits"],
    }
    for name, argv in smi.items():
        (out / name).write_text(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)

    import torch  # after nvidia-smi's own outputs: this process takes no GPU memory before gmu_check

    gpus = torch.cuda.device_count()
    record["machine"] = {"gpus": gpus, "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}

    driver = run_module("gpu_driver_info", {"nvidia_smi": "nvidia-smi"})
    say(
        "gpu_driver_info",
        "module on the real nvidia-smi",
        f"driver {driver.get('version')} (CUDA {driver.get('cuda_version')}), {len(driver.get('gpus', []))} GPU(s)",
        "the driver read parses a real table",
        driver,
    )

    gmu_args = {"gmu": 0.85, "is_head": True, "report_only": True, "require_gpu": True}
    fits = run_module("gmu_check", gmu_args)
    say(
        "gmu_check idle",
        "module, gmu 0.85",
        f"{fits.get('verdict')} (memory {fits.get('memory')}, recommended {fits.get('recommended_gmu')})",
        "0.85 fits an idle discrete GPU",
        fits,
    )

    total_gib = torch.cuda.get_device_properties(0).total_memory / 1024**3
    holder = GpuHolder(round(total_gib * 0.4, 1))
    try:
        held = run_module("gmu_check", gmu_args)
        (out / "query-gmu-held.csv").write_text(subprocess.run(smi["query-gmu.csv"], capture_output=True, text=True, check=True).stdout)
    finally:
        holder.release()
    say(
        "gmu_check held",
        f"module, gmu 0.85, another process holding {total_gib * 0.4:.0f} GiB",
        f"{held.get('verdict')}, recommended {held.get('recommended_gmu')}: {held.get('message', '')[:160]}",
        "memory held by another process is refused with the gmu that would fit",
        held,
    )

    burn = subprocess.run(
        [sys.executable, str(CLOCK_BURN), "--seconds", str(options.burn_seconds)],
        capture_output=True,
        text=True,
        env=env_with_collection(),
        timeout=300,
        check=False,
    )
    report = last_json(burn.stdout)
    verdict = "fine" if burn.returncode == 0 and report.get("sm_clock_mhz", 0) >= CLOCK_MIN_MHZ else "wedged or failed"
    say(
        "clock_burn",
        f"roles/preflight/files/clock_burn.py --seconds {options.burn_seconds}",
        f"{verdict}: {report}",
        f"preflight's verdict (>= {CLOCK_MIN_MHZ} MHz under load)",
        {"rc": burn.returncode, "stdout": burn.stdout, "stderr": burn.stderr[-2000:]},
    )

    probe = subprocess.run([sys.executable, str(NCCL_PROBE)], capture_output=True, text=True, timeout=120, check=False)
    found = last_json(probe.stdout)
    say(
        "nccl probe",
        "roles/nccl/files/image_nccl_version.py",
        f"torch's NCCL {found.get('torch_nccl')}, packages {found.get('packages')}, library {found.get('library')}",
        "the probe reads a CUDA torch's NCCL and the library file it loaded (path, sha256)",
        found,
    )

    single, seconds = allreduce(1, free_port(), {}, 256, 120)
    say(
        "allreduce world 1",
        "allreduce_check.py, nccl, 1 rank, 256 MB",
        f"{single[0]['report']} in {seconds:.1f} s",
        "the check runs with NCCL on a real GPU",
        single,
    )

    if gpus >= 2:
        kept, dropped = gb10_nccl_settings()
        many, seconds = allreduce(gpus, free_port(), kept, 256, 120)
        head = many[0]["report"]
        say(
            f"allreduce world {gpus}",
            f"allreduce_check.py, nccl, {gpus} ranks (one GPU each), gb10 NCCL settings minus {', '.join(dropped)}",
            f"sum correct {head.get('correct')}, busbw {head.get('busbw_gbs')} GB/s, rcs {[r['rc'] for r in many]}, {seconds:.1f} s",
            "the multi-rank check, its sum and busbw, with the profile's settings path",
            many,
        )
        port = free_port()
        wrong, seconds = allreduce(2, port, kept, 16, 20, rank_ports={1: port + 1})
        messages = [last_json(r["stdout"]).get("error") or r["stderr"].strip().splitlines()[-1:] for r in wrong]
        say(
            "allreduce wrong master port",
            f"as above, 2 ranks, rank 1 given port {port + 1} instead of {port}, timeout 20 s",
            f"rcs {[r['rc'] for r in wrong]} after {seconds:.1f} s; {messages}",
            "a user's wrong port ends both ranks after the timeout with a message",
            wrong,
        )
    else:
        say("allreduce world N", "not run", f"{gpus} GPU on this machine", "needs a machine with several GPUs")

    (out / "gpu-paths.json").write_text(json.dumps(record, indent=1, default=str))
    (out / "gpu-paths.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
