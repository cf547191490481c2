"""Where the engine image and the weights come from, proven with real parts on the simulated cluster.

Runs last: no engine runs by then (test_faults' lost node left no rank, test_host_stack starts none),
so the head's engine image can be removed and fetched again for real.
- a site registry (Debian's docker-registry package, HTTPS with a certificate the nodes trust:
  molecule/resources/images/registry) serving the cpu engine image: pulled by digest on the head
  (every layer downloaded), the same image ID as the one built, the workers re-tagged; a digest the
  registry does not hold refused before anything is pulled or changed;
- the `load` source: a tarball on the controller loaded on the head and fanned out to the workers;
  a tarball holding another name refused, naming what it holds;
- the weights from a stand-in of the Hugging Face Hub's API behind HF_ENDPOINT (a test double:
  molecule/resources/doubles/hf_hub_standin.py) at a pinned commit, reached only with a vaulted
  token, on every node by their sha256, and the token in no output of that run at -vvv.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import secrets
import subprocess
import sys
import tarfile
import time

import pytest
from test_default import CONTAINER, INVENTORY, RANKS, REPO, _env

REGISTRY = "192.168.100.6:5000"
CPU_IMAGE = "sparkfleet/vllm-cpu:0.32.0"
PUSHED = f"{REGISTRY}/sparkfleet/vllm-cpu:0.32.0"
WORKERS = ("spark2", "spark3", "spark4")
STANDIN = REPO / "molecule/resources/doubles/hf_hub_standin.py"
WEIGHTS = "/var/tmp/sparkfleet/models/tiny-glm"  # the cpu profile's generated weights (playbooks/group_vars/all/profiles.yml)


def _node(name, command, check=True):
    return subprocess.run(["docker", "exec", name, "sh", "-c", command], capture_output=True, text=True, check=check).stdout.strip()


def _image_id(name, reference):
    return _node(name, f"docker image inspect -f '{{{{.Id}}}}' {reference} 2>/dev/null || true")


def _built_on(name, image_id):
    """The images on a node built on image_id (its children, theirs, ...), deepest first.

    A head can hold images built FROM the engine image (benchmarks/warm_boot.py's compile image is one);
    Docker keeps a parent while a child holds it, so forgetting the image means forgetting those too.
    """
    rows = _node(name, "docker images -aq --no-trunc | xargs -r docker image inspect -f '{{.Id}} {{.Parent}}'")
    parent_of = {image: parent.strip() for image, _unused, parent in (line.partition(" ") for line in rows.splitlines())}

    def depth(image):
        steps = 0
        while image and image != image_id:
            image, steps = parent_of.get(image, ""), steps + 1
        return steps if image == image_id else None

    found = {image: depth(image) for image in parent_of if image != image_id}
    return sorted((image for image, steps in found.items() if steps), key=lambda image: -found[image])


def _artifacts(*extra):
    """playbooks/artifacts.yml: (return code, raw stdout + stderr, folded stdout, changed per node)."""
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/artifacts.yml"), *extra],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    recap = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    return result.returncode, result.stdout + result.stderr, " ".join(result.stdout.split()), {node: int(n) for node, n in recap.items()}


def _images(names=WORKERS):
    return {name: _node(name, "docker images --digests --no-trunc --format '{{.Repository}}:{{.Tag}} {{.Digest}} {{.ID}}' | sort") for name in names}


# --- a registry, by digest ------------------------------------------------------------------


def test_the_engine_image_is_pulled_by_digest_from_a_registry_and_a_digest_it_lacks_is_refused():
    assert _node("spark1", f"docker ps -aq --filter name=^{CONTAINER}") == "", "a rank (or one kept for a roll back) is left on the head"
    built = _image_id("spark1", CPU_IMAGE)
    assert built, f"the head holds no {CPU_IMAGE}"
    # As a site's CI would publish it: pushed to the registry (layers the registry already holds are not sent again).
    _node("spark1", f"docker tag {CPU_IMAGE} {PUSHED} && docker push {PUSHED} >/dev/null")
    digest = _node("spark1", f"docker image inspect -f '{{{{join .RepoDigests \"\\n\"}}}}' {PUSHED}").split("@")[-1]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), digest
    try:
        # The head forgets the image (every name, every layer, every image built on it): the pull must fetch all of it.
        for child in _built_on("spark1", built):
            _node("spark1", f"docker rmi -f {child} >/dev/null 2>&1 || true")
        _node("spark1", f"docker rmi {CPU_IMAGE} {PUSHED} >/dev/null")
        # What still holds the image, if anything does: every container and every reference on the head.
        held = "docker ps -a --format '{{.Names}} {{.Image}} {{.Status}}'; docker images --digests; docker image inspect -f '{{.RepoTags}} {{.RepoDigests}}' "
        assert _image_id("spark1", built) == "", _node("spark1", held + built, check=False)
        workers_before = _images()

        wrong = f"{PUSHED}@sha256:{hashlib.sha256(b'not pushed').hexdigest()}"
        rc, _unused, folded, changed = _artifacts("--tags", "image", "-e", f"engine_image={wrong}", "-e", "engine_image_source=pull")
        assert rc != 0
        assert f"spark1 could not pull {wrong}:" in folded, folded[-3000:]
        assert "manifest unknown" in folded
        assert "The registry holds no image with that digest in that repository" in folded
        assert set(changed.values()) <= {0}, changed
        assert _image_id("spark1", built) == ""
        assert _images() == workers_before

        pinned = f"{PUSHED}@{digest}"
        rc, _unused, folded, changed = _artifacts(
            "--tags", "image", "-e", f"engine_image={pinned}", "-e", "engine_image_source=pull", "-e", "engine_image_require_digest=true"
        )
        assert rc == 0, folded[-4000:]
        assert changed["spark1"] > 0
        # The registry's bytes are the image the head built: the same ID (its config's digest), the digest recorded.
        assert _image_id("spark1", PUSHED) == built
        assert f"{REGISTRY}/sparkfleet/vllm-cpu@{digest}" in _node("spark1", f"docker image inspect -f '{{{{json .RepoDigests}}}}' {PUSHED}")
        # The workers held that ID under the build's name: re-tagged, nothing sent.
        assert {name: _image_id(name, PUSHED) for name in WORKERS} == dict.fromkeys(WORKERS, built)
        assert "Receive and pass on" not in folded
    finally:
        # The build's name again on the head (the image the next run finds instead of building it).
        if _image_id("spark1", built):
            _node("spark1", f"docker tag {built} {CPU_IMAGE}")
    assert _image_id("spark1", CPU_IMAGE) == built


# --- a tarball ------------------------------------------------------------------------------


@pytest.fixture
def probe_tarball(tmp_path):
    """A small image made on the controller (docker import of one file) and saved as a tarball."""
    name = f"sparkfleet-sim/load-probe:{secrets.token_hex(4)}"
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as archive:
        content = f"load probe {name}\n".encode()
        info = tarfile.TarInfo("probe.txt")
        info.size = len(content)
        archive.addfile(info, io.BytesIO(content))
    subprocess.run(["docker", "import", "-", name], input=layer.getvalue(), capture_output=True, check=True)
    tarball = tmp_path / "probe.tar"
    subprocess.run(["docker", "save", "-o", str(tarball), name], check=True)
    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, check=True).stdout.strip()
    yield name, tarball, image_id
    subprocess.run(["docker", "rmi", name], capture_output=True, check=False)
    for node in RANKS:
        _node(node, f"docker rmi {name} >/dev/null 2>&1 || true")


def test_the_load_source_loads_a_tarball_on_the_head_and_fans_it_out(probe_tarball):
    name, tarball, image_id = probe_tarball
    other = name.rsplit(":", 1)[0] + ":not-in-the-tarball"
    load = ("-e", "engine_image_source=load", "-e", f"engine_image_tarball={tarball}")
    rc, _unused, folded, _unused = _artifacts("--tags", "image", "-e", f"engine_image={other}", *load)
    assert rc != 0
    assert f"{tarball} holds {name}, not {other}. Set engine_image to one of those names" in folded, folded[-3000:]
    assert all(_image_id(node, other) == "" for node in RANKS)

    rc, _unused, folded, changed = _artifacts("--tags", "image", "-e", f"engine_image={name}", *load)
    assert rc == 0, folded[-4000:]
    assert all(changed[node] > 0 for node in RANKS), changed  # loaded on the head, received by every worker
    assert {node: _image_id(node, name) for node in RANKS} == dict.fromkeys(RANKS, image_id)
    assert _node("spark1", f"ls /opt/sparkfleet/image/{tarball.name} 2>/dev/null || true") == ""  # the copy on the head is gone


# --- a Hub, with a token --------------------------------------------------------------------


@pytest.fixture
def hub(tmp_path):
    """The stand-in Hub on the simulated network's gateway (this machine, as the head reaches it), serving
    the cpu profile's tiny model (copied from the head, without our own records) as a private repository at one commit."""
    root, token, revision = tmp_path / "repo", "hf_" + secrets.token_hex(17), secrets.token_hex(20)
    root.mkdir()
    archive = subprocess.run(
        ["docker", "exec", "spark1", "tar", "-C", WEIGHTS, "--exclude=./.cache", "--exclude=./.sparkfleet-*", "-c", "."],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as files:
        files.extractall(root, filter="data")
    (tmp_path / "token").write_text(token)
    gateway = (
        subprocess.run(
            ["docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", "sparkfleet-sim"], capture_output=True, text=True, check=True
        ).stdout.strip()
        or "192.168.100.1"
    )
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(STANDIN), "--root", str(root), "--repo", "sparkfleet-sim/tiny-glm", "--revision", revision,
         "--token-file", str(tmp_path / "token"), "--bind", gateway, "--port-file", str(port_file), "--log", str(log)],
    )  # fmt: skip
    for _unused in range(50):
        if port_file.exists() or server.poll() is not None:
            break
        time.sleep(0.1)
    assert port_file.exists(), "the stand-in Hub did not start"
    yield {"root": root, "token": token, "revision": revision, "endpoint": f"http://{gateway}:{port_file.read_text()}", "log": log, "dir": tmp_path}
    server.terminate()
    server.wait(timeout=10)


def test_weights_come_from_a_hub_at_a_pinned_commit_with_a_token_no_output_shows(hub):
    secrets_file, password = hub["dir"] / "secrets.yml", hub["dir"] / "password"
    password.write_text(secrets.token_hex(16) + "\n")
    secrets_file.write_text(f"model_weights_hf_token: {hub['token']}\n")
    subprocess.run(["ansible-vault", "encrypt", "--vault-password-file", str(password), str(secrets_file)], check=True, capture_output=True)
    target, started = "/var/tmp/sparkfleet/models/tiny-glm-hub", time.time()
    try:
        rc, raw, folded, _unused = _artifacts(
            "--tags", "weights", "-vvv", "-e", f"@{secrets_file}", "--vault-password-file", str(password),
            "-e", json.dumps({"engine_weights_dir": target, "model_weights_source": "hf", "model_weights_repo": "sparkfleet-sim/tiny-glm",
                              "model_weights_revision": hub["revision"], "model_weights_require_pinned_revision": True,
                              "model_weights_hf_endpoint": hub["endpoint"]}),
        )  # fmt: skip
        assert rc == 0, folded[-4000:]
        # Every node holds the repository's files, byte for byte.
        wanted = {str(path.relative_to(hub["root"])): hashlib.sha256(path.read_bytes()).hexdigest() for path in hub["root"].rglob("*") if path.is_file()}
        for node in RANKS:
            listed = _node(node, f"cd {target} && find . -path ./.cache -prune -o -type f ! -name '.sparkfleet-*' -print0 | xargs -0 sha256sum")
            held = {line.split(None, 1)[1].removeprefix("./"): line.split()[0] for line in listed.splitlines()}
            assert held == wanted, node
        # The Hub saw the pinned commit only, every request with the token (it refuses any other).
        requests = [json.loads(line) for line in hub["log"].read_text().splitlines()]
        requests = [request for request in requests if "/sparkfleet-sim/tiny-glm/" in request["path"]]  # not the client's other calls
        assert requests
        assert all(request["authorized"] for request in requests), requests
        assert {request["path"].split("?")[0] for request in requests if "/resolve/" in request["path"]} == {
            f"/sparkfleet-sim/tiny-glm/resolve/{hub['revision']}/{name}" for name in wanted
        }
        # The token: nowhere in -vvv's output, nor in a report this run wrote.
        assert hub["token"] not in raw
        written = [path for path in (REPO / "reports").rglob("*") if path.is_file() and path.stat().st_mtime >= started]
        assert not [str(path) for path in written if hub["token"] in path.read_text(errors="replace")]
        assert _node("spark1", f"ls {target}.hf-token.env 2>/dev/null || true") == ""  # its root-only file is gone
    finally:
        for node in RANKS:
            _node(node, f"rm -rf {target}")
