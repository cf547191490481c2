"""Rank parity (module_utils/attestation): what differs by design is taken out, anything else is named."""

from __future__ import annotations

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import attestation, serve_args

SETTINGS = {
    "model_path": "/model",
    "served_model_name": "glm-5.3-flash",
    "host": "0.0.0.0",
    "port": 8000,
    "tensor_parallel_size": 4,
    "gpu_memory_utilization": 0.85,
    "extra_args": [],
}
LANE = {"name": "500k", "max_model_len": 500000, "max_num_seqs": 5}


def rank(node_rank, extra_args=(), kv_bytes=None, env=None, image_id="sha256:aaa", **other):
    argv = serve_args.serve_argv(dict(SETTINGS, extra_args=list(extra_args)), lane=LANE, rank=node_rank, nnodes=4, master_addr="10.0.0.1", master_port=29500)
    if kv_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(kv_bytes)]
    base_env = {"VLLM_HOST_IP": f"10.0.0.{node_rank + 1}", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    if node_rank == 0:
        base_env["VLLM_API_KEY"] = "secret-key"
    return attestation.rank_attestation(dict({"image_id": image_id, "argv": argv, "env": dict(base_env, **(env or {})), "kernel": "6.8.0"}, **other))


def engine(**changes):
    ranks = {f"spark{index + 1}": rank(index, kv_bytes=2362232012 if index == 0 else 2576980377) for index in range(4)}
    ranks.update(changes)
    return ranks


def test_ranks_of_one_engine_agree_though_their_place_address_key_and_kv_size_differ():
    ranks = engine()
    assert ranks["spark1"]["argv_sha256"] == ranks["spark4"]["argv_sha256"]
    assert ranks["spark1"]["env_sha256"] == ranks["spark2"]["env_sha256"]
    assert "secret-key" not in repr(ranks["spark1"])
    assert attestation.parity_differences(ranks) == []
    assert attestation.parity_refusal(ranks, "sparks") == ""


def test_a_flag_one_rank_has_is_named_with_both_values():
    ranks = engine(spark3=rank(2, extra_args=["--enable-prefix-caching"], kv_bytes=2576980377))
    (difference,) = attestation.parity_differences(ranks)
    assert difference["node"] == "spark3"
    assert difference["item"] == "argv"
    assert difference["value"] == "--enable-prefix-caching"
    assert difference["reference_node"] == "spark1"
    assert difference["reference_value"] == "(nothing the other lacks)"
    message = attestation.parity_message([difference], "sparks")
    assert message == (
        "The ranks of engine 'sparks' would run different things: spark3: vLLM flags (rank's place and KV size aside): "
        "--enable-prefix-caching where spark1 (the head) has (nothing the other lacks). To fix: give every node the same engine "
        "settings (a host_vars entry on one node, e.g. engine_extra_args, makes a rank differ)."
    )
    assert attestation.parity_refusal(ranks, "sparks") == message


def test_another_image_a_variable_and_a_kernel_are_each_named():
    ranks = engine(spark2=rank(1, image_id="sha256:bbb", env={"OMP_NUM_THREADS": "2"}, kernel="6.11.0"))
    differences = {(item["node"], item["item"]): item for item in attestation.parity_differences(ranks)}
    assert set(differences) == {("spark2", "image_id"), ("spark2", "env"), ("spark2", "kernel")}
    assert (differences["spark2", "image_id"]["value"], differences["spark2", "image_id"]["reference_value"]) == ("sha256:bbb", "sha256:aaa")
    assert differences["spark2", "env"]["value"] == "OMP_NUM_THREADS=2"
    assert differences["spark2", "env"]["reference_value"] == "OMP_NUM_THREADS=1"
    assert differences["spark2", "kernel"]["value"] == "6.11.0"


def test_a_patch_or_host_nccl_that_differs_is_named():
    ranks = engine(spark4=rank(3, patches=["p2"], host_nccl="n2"))
    ranks["spark1"] = rank(0, patches=["p1"], host_nccl="n1")
    items = {item["item"] for item in attestation.parity_differences(ranks) if item["node"] == "spark4"}
    assert items == {"patches", "host_nccl"}


def test_weights_of_another_manifest_or_none_on_one_node_are_named_with_the_fix():
    ranks = {f"spark{index + 1}": rank(index, weights_manifest="w1") for index in range(4)}
    ranks["spark3"] = rank(2, weights_manifest="missing")  # that node has no manifest: not the head's weights
    (difference,) = attestation.parity_differences(ranks)
    assert (difference["node"], difference["item"], difference["value"], difference["reference_value"]) == ("spark3", "weights_manifest", "missing", "w1")
    assert "playbooks/artifacts.yml --tags weights" in attestation.parity_message([difference], "sparks")


def test_a_value_of_a_shared_flag_that_differs_is_a_difference():
    """--max-model-len is the lane's: a rank with another lane's value differs (a half-switched engine)."""
    ranks = engine()
    other = dict(LANE, max_model_len=200000)
    argv = serve_args.serve_argv(SETTINGS, lane=other, rank=1, nnodes=4, master_addr="10.0.0.1", master_port=29500)
    ranks["spark2"] = attestation.rank_attestation({"image_id": "sha256:aaa", "argv": argv, "env": {}, "kernel": "6.8.0"})
    ranks["spark2"]["env"], ranks["spark2"]["env_sha256"] = ranks["spark1"]["env"], ranks["spark1"]["env_sha256"]
    (difference,) = attestation.parity_differences(ranks)
    assert difference["item"] == "argv"
    assert difference["value"] == "--max-model-len 200000"
    assert difference["reference_value"] == "--max-model-len 500000"


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"argv": []}, "needs its image_id"),
        ({"image_id": "sha256:aaa", "env": ["A=1"]}, "must be a mapping, not list"),
    ],
)
def test_what_is_not_an_attestation_is_refused(given, error):
    with pytest.raises(attestation.AttestationError, match=error):
        attestation.rank_attestation(given)


def test_a_reference_that_is_not_a_rank_is_refused():
    with pytest.raises(attestation.AttestationError, match="'spark9' is not among"):
        attestation.parity_differences(engine(), reference="spark9")


def test_status_says_what_the_last_launch_attested_in_one_line():
    record = {"engine": "sparks", "attested_at": "2026-12-01T08:30:00Z", "lane": "500k", "ranks": engine()}
    line = attestation.attestation_summary(record)
    assert line.startswith("rank attestation at 2026-12-01T08:30:00Z (lane 500k): 4 ranks, image sha256:aaa, argv ")
    assert line.endswith("0 patched file(s), weights manifest -, kernel 6.8.0, driver -, repo digest none (loaded, not pulled): every rank the same")
    record["ranks"]["spark2"] = rank(1, image_id="sha256:bbb", kv_bytes=1)
    assert "1 difference(s): The ranks of engine 'sparks' would run different things: spark2: engine image ID: sha256:bbb" in (
        attestation.attestation_summary(record)
    )


def _rendered(node_rank, lane=None, env=None, image_id="sha256:aaa", argv_edit=None):
    argv = serve_args.serve_argv(SETTINGS, lane=lane or LANE, rank=node_rank, nnodes=4, master_addr="10.0.0.1", master_port=29500)
    if argv_edit:
        argv = argv_edit(argv)
    base_env = {"VLLM_HOST_IP": f"10.0.0.{node_rank + 1}", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    return {"image_id": image_id, "argv": argv, "env": dict(base_env, **(env or {}))}


def _without(argv, flag):
    """argv without flag and its value."""
    index = argv.index(flag)
    return argv[:index] + argv[index + 2 :]


def test_a_lane_switch_keeps_the_fabric_identity_of_every_rank():
    other_lane = {"name": "200k", "max_model_len": 200000, "max_num_seqs": 15}
    for node_rank in range(4):
        before, after = (attestation.fabric_identity(_rendered(node_rank, lane=lane)) for lane in (LANE, other_lane))
        assert before == after
        assert before["topology"] == {
            "--distributed-executor-backend": "mp",
            "--master-addr": "10.0.0.1",
            "--master-port": "29500",
            "--nnodes": "4",
            "--node-rank": str(node_rank),
            "--pipeline-parallel-size": "1",
            "--tensor-parallel-size": "4",
        }
        assert before["env"] == {"GLOO_SOCKET_IFNAME": "eth0", "VLLM_HOST_IP": f"10.0.0.{node_rank + 1}"}  # OMP_NUM_THREADS does not steer the fabric


@pytest.mark.parametrize(
    "change",
    [
        {"image_id": "sha256:bbb"},
        {"env": {"NCCL_IB_HCA": "rocep1s0f1"}},
        {"env": {"GLOO_SOCKET_IFNAME": "eth1"}},
        {"argv_edit": lambda argv: [*_without(argv, "--nnodes"), "--nnodes", "3"]},
        {"argv_edit": lambda argv: [*_without(argv, "--tensor-parallel-size"), "-tp", "2"]},
        {"argv_edit": lambda argv: [*_without(argv, "--distributed-executor-backend"), "--distributed-executor-backend=ray"]},
    ],
    ids=["image", "nccl variable", "interface", "another node count", "tensor parallel size in its short form", "executor backend given with ="],
)
def test_what_carries_the_traffic_changes_the_fabric_identity(change):
    assert attestation.fabric_identity(_rendered(1, **change)) != attestation.fabric_identity(_rendered(1))


def test_a_fabric_identity_without_an_image_is_refused():
    with pytest.raises(attestation.AttestationError, match="image_id"):
        attestation.fabric_identity({"argv": [], "env": {}})


def test_a_driver_that_differs_is_named_and_repo_digests_are_recorded_not_compared():
    head = rank(0, kv_bytes=2362232012, driver="580.126.09", repo_digests=["registry.local:5000/vllm-sm121@sha256:" + "d" * 64])
    # spark2 loaded the same image ID from the head (no repo digest) and runs another driver.
    ranks = engine(spark1=head, spark2=rank(1, kv_bytes=2576980377, driver="580.95.05"))
    for name in ("spark3", "spark4"):
        ranks[name] = rank(int(name[-1]) - 1, kv_bytes=2576980377, driver="580.126.09")
    (difference,) = attestation.parity_differences(ranks)
    assert (difference["node"], difference["item"], difference["value"], difference["reference_value"]) == ("spark2", "driver", "580.95.05", "580.126.09")
    assert "load the same NVIDIA driver on every node" in attestation.parity_message([difference], "sparks")
    line = attestation.attestation_summary({"engine": "sparks", "attested_at": "t", "lane": "500k", "ranks": ranks})
    assert ", driver 580.126.09, repo digest sha256:dddddddddddd: 1 difference(s)" in line


def test_the_report_header_names_each_patched_file_and_the_nccl_that_ran():
    """launch_provenance, with the nccl role's probe of an image as a real H200 answered it (tests/data/gpu)."""
    import json
    import pathlib

    probe = json.loads((pathlib.Path(__file__).resolve().parents[1] / "data/gpu/h200-580.159.04-nccl-probe/probe.json").read_text())
    patches = ["4dc91f83043c" + "0" * 52, "ab" * 32]
    record = {"engine": "sparks", "lane": "500k", "ranks": engine(spark1=rank(0, patches=patches))}
    lines = attestation.launch_provenance(record, probe)
    assert lines["patched files"] == "2: sha256 4dc91f83043c, sha256 abababababab"
    assert lines["NCCL"] == ("the image's: torch's NCCL 2.28.9, /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 sha256 1c8618b86673")
    # The cpu image: no CUDA torch, no library. No probe on the head: said so, with the image.
    assert attestation.launch_provenance(record, {"torch_nccl": None, "packages": {}, "library": None})["NCCL"] == (
        "the image's: torch's NCCL none (no CUDA torch), no library file"
    )
    unprobed = attestation.launch_provenance({"ranks": engine()})
    assert unprobed == {"patched files": "none", "NCCL": "the image's, not probed on the head (no record of the nccl role for image sha256:aaa)"}
    # The host's NCCL mounted into the ranks is what they load, whatever the image holds.
    mounted = {"ranks": engine(spark1=rank(0, host_nccl="cd" * 32))}
    assert attestation.launch_provenance(mounted, probe)["NCCL"] == "the host's, mounted into every rank: sha256 cdcdcdcdcdcd"
