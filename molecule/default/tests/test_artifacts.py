"""The engine image and the weights on every node (roles engine_image, model_weights, fanout).

After converge: the cpu image was built on the head from images/engine-cpu and every node holds
the head's image ID; the tiny model was generated on the head and every node holds the same files
and the head's manifest. Then faults on one worker: a weights file corrupted (found by its sha256,
re-sent, the engine not restarted), a worker without room (refused with the sizes before a byte
moves), another image under the engine's tag (refused naming it, then corrected). Bad image
settings stopping preflight are cases of test_faults.py's bad-input matrix.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(pathlib.Path(__file__).parent))

from test_default import _run_playbook, _start_times  # noqa: E402

from ansible_collections.sparkfleet.vllm.plugins.module_utils.engine_image import context_fingerprint  # noqa: E402

NODES = ("spark1", "spark2", "spark3", "spark4")
IMAGE = "sparkfleet/vllm-cpu:0.32.0"
WEIGHTS = "/var/tmp/sparkfleet/models/tiny-glm"
MANIFEST = WEIGHTS + "/.sparkfleet-manifest.json"


def _node(node, *command, check=True):
    result = subprocess.run(["docker", "exec", node, *command], capture_output=True, text=True, check=False)
    if check:
        assert result.returncode == 0, f"{node}: {command}: {result.stderr}"
    return result


def _image_id(node):
    return _node(node, "docker", "image", "inspect", "--format", "{{.Id}}", IMAGE, check=False).stdout.strip()


def _file_digests(node):
    manifest = json.loads(_node(node, "cat", MANIFEST).stdout)
    listing = _node(node, "sh", "-c", f"cd {WEIGHTS} && find . -type f ! -name '.sparkfleet-*' | sort | xargs sha256sum")
    actual = {path[2:]: digest for digest, path in (line.split() for line in listing.stdout.splitlines())}
    return manifest, actual


def test_the_image_was_built_on_the_head_and_every_node_holds_its_id():
    ids = {node: _image_id(node) for node in NODES}
    assert len(set(ids.values())) == 1, ids
    assert ids["spark1"].startswith("sha256:")
    labels = json.loads(_node("spark1", "docker", "image", "inspect", "--format", "{{json .Config.Labels}}", IMAGE).stdout)
    assert labels["io.sparkfleet.context-sha"] == context_fingerprint(str(REPO / "images/engine-cpu"))
    # The head sent it once along the chain: its fan-out record is whole (the workers keep none).
    status = json.loads(_node("spark1", "cat", "/opt/sparkfleet/fanout/engine-image.json").stdout)
    assert status["state"] == "done"
    assert status["bytes"] > 2**30
    for worker in NODES[1:]:
        assert _node(worker, "test", "-e", "/opt/sparkfleet/fanout/engine-image.json", check=False).returncode != 0


def test_the_tiny_model_and_its_manifest_are_on_every_node():
    head_manifest, head_files = _file_digests("spark1")
    assert head_manifest["source"]["generator"] == "make_tiny_model.py"
    assert {"config.json", "tokenizer.json"} <= set(head_files)
    assert {name: entry["sha256"] for name, entry in head_manifest["files"].items()} == head_files
    for worker in NODES[1:]:
        assert _file_digests(worker) == (head_manifest, head_files), worker


def _corrupt(node, name):
    """Flip bytes in place: same size, new mtime (what a bad disk or a stray write leaves)."""
    flip = f"f = open('{WEIGHTS}/{name}', 'r+b'); f.seek(2); b = f.read(4); f.seek(2); f.write(bytes(x ^ 0xFF for x in b))"
    _node(node, "python3", "-c", flip)


def test_a_corrupt_weights_file_on_a_worker_is_found_refused_without_room_then_repaired():
    before = _start_times()
    _unused, head_files = _file_digests("spark1")
    _corrupt("spark3", "tokenizer.json")
    _unused, damaged = _file_digests("spark3")
    assert damaged["tokenizer.json"] != head_files["tokenizer.json"]

    # No room: refused before anything moves, with the node, free and needed sizes.
    out = _run_playbook_failing("playbooks/artifacts.yml", "-e", "model_weights_disk_reserve_gib=1000000")
    assert "spark3 has" in out
    assert "GiB free, needs" in out
    assert "Nothing was sent" in out
    assert _file_digests("spark3")[1] == damaged
    assert _node("spark3", "test", "-e", f"{WEIGHTS}/.sparkfleet-incoming", check=False).returncode != 0

    out, changed = _run_playbook("playbooks/artifacts.yml")
    assert "spark3: 0 file(s) missing, 1 of another size or sha256 (tokenizer.json)" in out
    assert changed["spark3"] > 0
    assert changed["spark2"] == 0
    assert changed["spark4"] == 0
    assert _file_digests("spark3")[1] == head_files
    assert _start_times() == before  # the running engine was not touched


def test_another_image_under_the_tag_on_a_worker_is_refused_then_corrected():
    head_id = _image_id("spark1")
    _node("spark3", "docker", "tag", "sparkfleet-sim/debian:12", IMAGE)
    other = _image_id("spark3")
    assert other != head_id

    out = _run_playbook_failing("playbooks/artifacts.yml", "-e", "engine_image_correct=false")
    assert f"spark3 hold another image under {IMAGE} (spark3: {other})" in out
    assert "Ranks on different images hang NCCL" in out
    assert _image_id("spark3") == other  # refused: nothing changed

    out, changed = _run_playbook("playbooks/artifacts.yml")
    assert {node: _image_id(node) for node in NODES} == dict.fromkeys(NODES, head_id)
    assert changed["spark3"] == 1
    assert changed["spark2"] == 0


# Bad image settings (no digest where one is required, unknown source, load without a tarball)
# stopping preflight: the bad-input matrix of test_faults.py.


def _run_playbook_failing(playbook, *extra):
    from test_default import _env

    result = subprocess.run(
        ["ansible-playbook", "-i", str(REPO / "molecule/resources/inventory/hosts.yml"), str(REPO / playbook), *extra],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode != 0, result.stdout[-3000:]
    return " ".join(result.stdout.split())


def test_patch_sources_copies_vllms_own_files_out_of_the_image_with_their_sha256():
    """What a user makes a whole-file patch from: the image's file, and the sha256 its manifest entry needs."""
    out, changed = _run_playbook("playbooks/patch_sources.yml")
    assert set(changed.values()) == {0}
    manifest = yaml.safe_load((REPO / "patches/manifest.yml").read_text())
    base = next(entry["base_sha256"] for entry in manifest["patches"] if entry["name"] == "sm12x-persistent-topk-guard-file")
    assert f"vllm/model_executor/layers/indexer_topk.py: sha256 {base}" in out, out[-3000:]
    assert "vllm/model_executor/layers/sparse_attn_indexer_kpool.py: not in this image" in out  # the GLM image's file, not vLLM 0.32's
    head_id = _image_id("spark1").split(":")[-1][:12]
    copied = REPO / "reports/patch-sources" / head_id / "vllm/model_executor/layers/indexer_topk.py"
    assert hashlib.sha256(copied.read_bytes()).hexdigest() == base
    assert "vLLM 0.32.0+cpu" in out
