"""The rehearsal's reading of a created rank and its closing table (module_utils/rehearsal.py)."""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import rehearsal

# docker inspect of a rank created with the gb10 spec and never started (the fields the summary reads, as
# Docker 20.10 writes them for community.docker's ulimits memlock:-1:-1, --device /dev/infiniband, --gpus all).
CREATED = {
    "Image": "sha256:" + "a" * 64,
    "Args": ["vllm", "serve", "/model", "--headless"],
    "State": {"Status": "created", "Running": False},
    "Config": {"Env": ["NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0", "PATH=/usr/bin"]},
    "HostConfig": {
        "DeviceRequests": [{"Driver": "nvidia", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]], "Options": {}}],
        "Devices": [{"PathOnHost": "/dev/infiniband", "PathInContainer": "/dev/infiniband", "CgroupPermissions": "rwm"}],
        "Ulimits": [{"Name": "memlock", "Hard": -1, "Soft": -1}],
        "ShmSize": 10 * 1024**3,
        "IpcMode": "host",
        "NetworkMode": "host",
        "CapAdd": ["IPC_LOCK"],
        "Binds": ["/var/tmp/models/glm53-flash-fp8:/model:ro"],
    },
}


def test_a_created_rank_reads_back_as_the_docker_cli_would_write_it():
    summary = rehearsal.rank_summary(CREATED)
    assert summary["state"] == "created"
    assert summary["gpus"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert summary["devices"] == ["/dev/infiniband"]
    assert summary["ulimits"] == ["memlock=-1:-1"]
    assert (summary["shm_size"], summary["ipc_mode"], summary["network_mode"], summary["cap_add"]) == (10 * 1024**3, "host", "host", ["IPC_LOCK"])
    assert summary["env_names"] == ["NCCL_IB_HCA", "PATH"]  # names only: the head's API key never reaches the report


def test_no_container_is_missing():
    assert rehearsal.rank_summary(None) == {"state": "missing"}
    assert rehearsal.rank_summary({}) == {"state": "missing"}


def test_the_table_has_a_row_per_node_ready_or_what_is_missing():
    image = "sha256:" + "c" * 64
    common = {"driver": "580.95.05", "nccl": "2.30.7-1+cuda13.3", "image_id": image}
    nodes = {
        "spark1": dict(common, rank=0, driver_owner="DGX OS, nvidia-driver-580-open 580.95.05-0ubuntu1", image_digest="reg:5000/x@sha256:" + "b" * 64,
                       rank_container=rehearsal.rank_summary(CREATED)),
        "spark2": dict(common, rank=1, driver_owner="", image_digest="", rank_container=rehearsal.rank_summary(CREATED)),
        "spark3": dict(common, rank=2, driver_owner="", image_digest="", image_id="sha256:" + "d" * 64, rank_container={"state": "missing"}),
    }  # fmt: skip
    header, first, second, third = rehearsal.table(rehearsal.node_rows(nodes))
    assert header.split() == ["node", "rank", "driver", "nccl", "image", "container", "verdict"]
    assert first.startswith(
        "spark1  0     580.95.05 (DGX OS, nvidia-driver-580-open 580.95.05-0ubuntu1)  2.30.7-1+cuda13.3  sha256:cccccccccccc @sha256:bbbbbbbbbbbb"
    )
    assert first.endswith("gpus nvidia:all, /dev/infiniband, memlock=-1:-1, shm 10 GiB  ready")
    assert second.endswith("ready")  # a worker's image came through the fan-out: the head's ID, no digest of its own
    assert "its rank's container was not created (missing)" in third
    assert "its engine image sha256:dddddddddddd is not the others' sha256:cccccccccccc: run the engine_image role again" in third


def test_a_nodes_facts_come_from_what_the_roles_set_on_it():
    hostvars = {
        "inventory_hostname": "spark3",
        "sparkfleet_rank": 2,
        "nvidia_driver_before": {"version": "580.95.05"},
        "nvidia_driver_os_owned": "DGX OS, nvidia-driver-580-open 580.95.05-0ubuntu1",
        "nccl_build": {"version": "2.30.7-1+cuda13.3", "problem": ""},
        "sparkfleet_engine_image": {"name": "x", "images": [{"Id": "sha256:1", "RepoDigests": ["reg:5000/x@sha256:2"]}]},
    }
    facts = rehearsal.node_facts(hostvars, {"spark3": {"state": "created"}})
    assert facts == {
        "rank": 2, "driver": "580.95.05", "driver_owner": "DGX OS, nvidia-driver-580-open 580.95.05-0ubuntu1", "nccl": "2.30.7-1+cuda13.3",
        "image_id": "sha256:1", "image_digest": "reg:5000/x@sha256:2", "rank_container": {"state": "created"}, "failures": [],
    }  # fmt: skip
    assert rehearsal.node_facts({"inventory_hostname": "spark4"}, {})["rank_container"] == {"state": "missing"}


def test_a_rank_docker_refused_is_missing_with_dockers_words_and_the_others_read_back():
    refused = (
        'Error creating container: 500 Server Error ("error gathering device information while adding custom device'
        ' "/dev/infiniband": no such file or directory")'
    )
    created = [{"engine_member": "spark2", "container": CREATED, "changed": False}, {"engine_member": "spark1", "msg": refused, "failed": False}]
    read_back = [{"engine_member": "spark1", "exists": False, "container": None}, {"engine_member": "spark2", "exists": True, "container": CREATED}]
    ranks = rehearsal.rank_summaries(read_back, created)
    assert ranks["spark1"] == {"state": "missing", "refusal": refused}
    assert ranks["spark2"]["state"] == "created"
    assert "refusal" not in ranks["spark2"]
    assert rehearsal.rank_summaries(read_back) == {"spark1": {"state": "missing"}, "spark2": ranks["spark2"]}


def test_a_nodes_failed_checks_and_dockers_refusal_are_its_verdict_and_the_other_rows_stay_ready():
    common = {"rank": 0, "driver": "580.95.05", "nccl": "2.30.7-1+cuda13.3", "image_id": "sha256:" + "c" * 64}
    nodes = {
        "spark1": dict(common, rank_container=rehearsal.rank_summary(CREATED)),
        "spark3": dict(
            common,
            rank=2,
            rank_container={"state": "missing", "refusal": "error gathering device information while adding custom device."},
            failures=["Docker on spark3 cannot start a container with profile gb10's GPUs and devices (...): ls /dev/infiniband, then run again."],
        ),
    }
    rows = {row["node"]: row for row in rehearsal.node_rows(nodes)}
    assert rows["spark1"]["verdict"] == "ready"
    assert rows["spark3"]["verdict"] == (
        "Docker on spark3 cannot start a container with profile gb10's GPUs and devices (...): ls /dev/infiniband, then run again;"
        " Docker refused its rank's container: error gathering device information while adding custom device"
    )
