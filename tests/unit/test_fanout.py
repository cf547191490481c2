"""The chain fan-out with real sockets and real processes on loopback: three hops,
each byte read once at the head; digests equal on every hop; a hop that dies or a
sink that fails ends in a named error and never in a "complete" short file.
The weights manifest (incremental hashing, staging commit) and the image plan."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import engine_image, fanout, weights_manifest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "artifact.bin"
    path.write_bytes(os.urandom(8 << 20) + b"tail")
    return path


def _chain(tmp_path, artifact, workers=3, sink=None, source=None):
    """Head + workers on 127.0.0.1, each worker on its own port; returns every hop's result or error."""
    ports = [_free_port() for _unused in range(workers)]
    outputs = [tmp_path / f"worker{index}.bin" for index in range(workers)]
    status = tmp_path / "status.json"
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers + 1) as pool:
        for index in range(workers):
            jobs[f"worker{index}"] = pool.submit(
                fanout.relay,
                listen=("127.0.0.1", ports[index]),
                forward=("127.0.0.1", ports[index + 1]) if index + 1 < workers else None,
                sink_command=(sink or "dd status=none of={}").format(outputs[index]),
                connect_wait_s=10,
                idle_timeout_s=10,
            )
        jobs["head"] = pool.submit(
            fanout.relay,
            source_command=source or f"cat {artifact}",
            forward=("127.0.0.1", ports[0]),
            status_path=str(status),
            expected_bytes=artifact.stat().st_size,
            connect_wait_s=10,
            idle_timeout_s=10,
        )
        results = {}
        for name, job in jobs.items():
            try:
                results[name] = job.result(timeout=60)
            except fanout.FanoutError as error:
                results[name] = error
    return results, outputs, status


def test_three_workers_receive_the_head_stream_whole(tmp_path, artifact):
    results, outputs, status = _chain(tmp_path, artifact)
    expected = hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert {result["sha256"] for result in results.values()} == {expected}
    assert {result["bytes"] for result in results.values()} == {artifact.stat().st_size}
    for output in outputs:
        assert hashlib.sha256(output.read_bytes()).hexdigest() == expected
    record = json.loads(status.read_text())
    assert (record["state"], record["bytes"], record["sha256"]) == ("done", artifact.stat().st_size, expected)
    # The head ends when the whole chain has: its finish is after every worker's sink finished.
    assert results["head"]["ended_at"] >= max(results[f"worker{i}"]["ended_at"] for i in range(3)) - 0.05


def test_a_failing_sink_is_named_and_upstream_sees_the_break(tmp_path, artifact):
    # The middle worker's sink reads 1 MiB and exits 3, as a docker load with a full disk would.
    results, _outputs, _unused = _chain(tmp_path, artifact, sink="sh -c 'head -c 1048576 > {} ; exit 3'")
    assert all(isinstance(result, fanout.FanoutError) for result in results.values())
    assert any("exited after" in str(result) or "failed (exit 3)" in str(result) for result in results.values())


def test_a_failing_source_fails_the_head_and_the_workers_know(tmp_path, artifact):
    results, _unused, status = _chain(tmp_path, artifact, source=f"sh -c 'head -c 100000 {artifact}; exit 4'")
    assert "the source" in str(results["head"])
    assert "exit 4" in str(results["head"])
    assert json.loads(status.read_text())["state"] == "failed"


def test_a_missing_next_hop_is_named(tmp_path):
    port = _free_port()
    with pytest.raises(fanout.FanoutError, match=f"could not reach the next hop 127.0.0.1:{port}"):
        fanout.relay(source_command="true", forward=("127.0.0.1", port), connect_wait_s=1)


def test_a_worker_whose_upstream_never_comes_is_named():
    port = _free_port()
    with pytest.raises(fanout.FanoutError, match=f"no upstream hop connected to 127.0.0.1:{port}"):
        fanout.relay(listen=("127.0.0.1", port), sink_command="cat", connect_wait_s=0.5)


def test_the_module_runs_as_ansible_runs_it(tmp_path, artifact):
    """Two hops through the module file itself (what the role starts with async)."""
    port = _free_port()
    module = REPO / "plugins/modules/fanout.py"
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    received = tmp_path / "received.bin"

    def run(args):
        path = tmp_path / f"args-{len(list(tmp_path.glob('args-*')))}.json"
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        return subprocess.Popen([sys.executable, str(module), str(path)], stdout=subprocess.PIPE, env=env)

    worker = run({"listen": f"127.0.0.1:{port}", "sink_command": f"dd status=none of={received}"})
    head = run({"source_command": f"cat {artifact}", "forward": f"127.0.0.1:{port}"})
    head_out, worker_out = json.loads(head.communicate(timeout=60)[0]), json.loads(worker.communicate(timeout=60)[0])
    assert head_out["changed"]
    assert head_out["sha256"] == worker_out["sha256"]
    assert received.read_bytes() == artifact.read_bytes()
    bad = run({"listen": "no-port"})
    assert "must be ADDRESS:PORT" in json.loads(bad.communicate(timeout=30)[0])["msg"]


def test_progress_line():
    chain = ["spark1", "spark2", "spark4"]
    line = fanout.describe_progress({"bytes": 2**30, "expected_bytes": 2**31, "started": 0, "updated": 10}, chain)
    assert line == "spark1 -> spark2 -> spark4: 1.00 GiB (50%) of 2.00 GiB, 107 MB/s"
    finishing = fanout.describe_progress({"state": "finishing", "bytes": 2**30}, chain)
    assert finishing == "spark1 -> spark2 -> spark4: all 1.00 GiB sent; the workers' sinks are finishing"


# The weights manifest.


@pytest.fixture
def weights(tmp_path):
    root = tmp_path / "weights"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text('{"a": 1}')
    (root / "model-00001.safetensors").write_bytes(os.urandom(1 << 20))
    (root / "sub" / "tokenizer.json").write_text("{}")
    (root / ".cache" / "huggingface").mkdir(parents=True)
    (root / ".cache" / "huggingface" / "partial.incomplete").write_text("x")
    return root


def test_manifest_lists_the_weights_not_the_bookkeeping(weights):
    files, hashed = weights_manifest.scan(str(weights))
    assert sorted(files) == ["config.json", "model-00001.safetensors", "sub/tokenizer.json"]
    assert hashed == 3
    manifest = weights_manifest.manifest_from_scan(files, {"repo": "r", "revision": "abc"})
    assert manifest["files"]["config.json"] == {"size": 8, "sha256": hashlib.sha256(b'{"a": 1}').hexdigest()}
    assert manifest["total_bytes"] == 8 + (1 << 20) + 2
    # A second scan re-hashes nothing; a changed file (new mtime) is re-hashed alone.
    assert weights_manifest.scan(str(weights))[1] == 0
    (weights / "config.json").write_text('{"a": 2}')
    files_after, hashed_after = weights_manifest.scan(str(weights))
    assert hashed_after == 1
    assert files_after["config.json"]["sha256"] != files["config.json"]["sha256"]


def test_compare_finds_missing_short_corrupt_and_extra(weights, tmp_path):
    manifest = weights_manifest.manifest_from_scan(weights_manifest.scan(str(weights))[0], {})
    worker = tmp_path / "worker"
    (worker / "sub").mkdir(parents=True)
    (worker / "config.json").write_text('{"a": 1}')  # equal
    big = (weights / "model-00001.safetensors").read_bytes()
    (worker / "model-00001.safetensors").write_bytes(big[:-1])  # truncated
    (worker / "sub" / "tokenizer.json").write_text("[]")  # same size, other bytes
    (worker / "stale.bin").write_text("old")
    difference = weights_manifest.compare(manifest, weights_manifest.scan(str(worker))[0])
    assert difference["missing"] == []
    assert difference["wrong"] == ["model-00001.safetensors", "sub/tokenizer.json"]
    assert difference["extra"] == ["stale.bin"]
    assert difference["needed_bytes"] == (1 << 20) + 2


def test_a_corruption_that_keeps_size_and_mtime_needs_full(weights):
    manifest = weights_manifest.manifest_from_scan(weights_manifest.scan(str(weights))[0], {})
    target = weights / "model-00001.safetensors"
    stat = target.stat()
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights_manifest.compare(manifest, weights_manifest.scan(str(weights))[0])["wrong"] == []
    assert weights_manifest.compare(manifest, weights_manifest.scan(str(weights), full=True)[0])["wrong"] == ["model-00001.safetensors"]


def test_commit_moves_only_verified_files_and_names_the_bad(weights, tmp_path):
    manifest = weights_manifest.manifest_from_scan(weights_manifest.scan(str(weights))[0], {})
    worker = tmp_path / "worker"
    staging = worker / weights_manifest.STAGING_NAME
    (staging / "sub").mkdir(parents=True)
    (staging / "config.json").write_bytes((weights / "config.json").read_bytes())
    (staging / "sub" / "tokenizer.json").write_text("[]")  # arrived wrong
    with pytest.raises(weights_manifest.ManifestError) as failure:
        weights_manifest.commit_staged(str(worker), manifest, ["config.json", "sub/tokenizer.json", "model-00001.safetensors"])
    assert "sub/tokenizer.json arrived with 2 bytes" in str(failure.value)
    assert "model-00001.safetensors did not arrive" in str(failure.value)
    assert (worker / "config.json").read_bytes() == (weights / "config.json").read_bytes()
    assert not (worker / "sub" / "tokenizer.json").exists()  # nothing half-right under the final name
    assert not staging.exists()


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({}, "lists no files"),
        ({"files": {"../etc/passwd": {"size": 1, "sha256": "0" * 64}}}, "not a path inside"),
        ({"files": {"/abs": {"size": 1, "sha256": "0" * 64}}}, "not a path inside"),
        ({"files": {"a": {"size": "1", "sha256": "0" * 64}}}, "integer size"),
    ],
)
def test_bad_manifests_are_refused(manifest, message):
    with pytest.raises(weights_manifest.ManifestError, match=message):
        weights_manifest.compare(manifest, {})


# The engine image.

PINNED = "ghcr.io/tonyd2wild/vllm-glm53-flash:sm121-v8@sha256:" + "d7" * 32


def test_references_and_the_name_every_node_runs():
    assert engine_image.parse_reference(PINNED)["tag"] == "sm121-v8"
    assert engine_image.local_reference(PINNED) == "ghcr.io/tonyd2wild/vllm-glm53-flash:sm121-v8"
    assert engine_image.local_reference("registry:5000/team/vllm") == "registry:5000/team/vllm:latest"
    assert engine_image.local_reference("repo@sha256:" + "ab" * 32) == "repo:sha256-" + "ab" * 6
    with pytest.raises(engine_image.ImageSourceError, match="is not sha256:<64 hex>"):
        engine_image.parse_reference("repo:tag@sha256:short")


def test_a_pull_by_digest_is_read_back_by_name_and_digest_without_the_tag():
    """Docker files NAME:TAG@sha256:... under NAME@sha256:... (found on the simulation's registry)."""
    assert engine_image.digest_reference(PINNED) == "ghcr.io/tonyd2wild/vllm-glm53-flash@" + PINNED.split("@")[1]
    assert engine_image.digest_reference("192.168.100.6:5000/sparkfleet/vllm-cpu:0.32.0@sha256:" + "cd" * 32) == (
        "192.168.100.6:5000/sparkfleet/vllm-cpu@sha256:" + "cd" * 32
    )
    assert engine_image.digest_reference("registry:5000/team/vllm:1") == "registry:5000/team/vllm:1"


def test_a_pull_without_digest_warns_or_is_refused():
    (warning,) = engine_image.check_source("pull", "vllm/vllm-openai:latest", require_digest=False)
    assert "has no digest" in warning
    assert "NAME:TAG@sha256:" in warning
    with pytest.raises(engine_image.ImageSourceError, match="engine_image_require_digest is true"):
        engine_image.check_source("pull", "vllm/vllm-openai:latest", require_digest=True)
    assert engine_image.check_source("pull", PINNED, require_digest=True) == []


@pytest.mark.parametrize(
    ("source", "reference", "kwargs", "message"),
    [
        ("fetch", "a:b", {}, "'fetch' is not one of pull, load, build"),
        ("load", "a:b", {}, "engine_image_tarball is empty"),
        ("build", "a:b", {}, "engine_image_build_context is empty"),
        ("build", PINNED, {"context": "images/engine-cpu"}, "carries a digest but is built"),
    ],
)
def test_bad_image_settings_name_the_fix(source, reference, kwargs, message):
    with pytest.raises(engine_image.ImageSourceError, match=message):
        engine_image.check_source(source, reference, require_digest=False, **kwargs)


def test_a_pulled_image_with_another_digest_is_refused():
    engine_image.check_pulled_digest(PINNED, ["ghcr.io/tonyd2wild/vllm-glm53-flash@sha256:" + "d7" * 32])
    with pytest.raises(engine_image.ImageSourceError, match="not the pinned sha256:d7d7"):
        engine_image.check_pulled_digest(PINNED, ["ghcr.io/tonyd2wild/vllm-glm53-flash@sha256:" + "ee" * 32])


def test_the_plan_sends_retags_and_names_different_images():
    nodes = {
        "spark1": {"id": "sha256:head", "holds_head": True},
        "spark2": {"id": "sha256:head", "holds_head": True},
        "spark3": {"id": "sha256:other", "holds_head": True},  # the head's image is there, untagged
        "spark4": {"id": "sha256:other", "holds_head": False},
        "spark5": {"id": "", "holds_head": False},
    }
    plan = engine_image.plan("spark1", list(nodes), nodes)
    assert (plan["same"], plan["retag"], plan["send"]) == (["spark2"], ["spark3"], ["spark4", "spark5"])
    assert plan["different"] == {"spark3": "sha256:other", "spark4": "sha256:other"}
    with pytest.raises(engine_image.ImageSourceError, match="the head spark1 holds no engine image"):
        engine_image.plan("spark1", ["spark1"], {"spark1": {"id": ""}})


def test_disk_shortfalls_name_node_and_sizes():
    required = {"spark2": 10 * 2**30, "spark3": 2**30}
    problems = engine_image.disk_shortfalls(required, {"spark2": 20 * 2**30, "spark3": 3 * 2**29}, 2**30)
    assert problems == ["spark3 has 1.5 GiB free, needs 2.0 GiB (1.0 GiB to receive + 1.0 GiB reserve)"]
    problems = engine_image.disk_shortfalls(5 * 2**30, {"spark2": 4 * 2**30, "spark3": 9 * 2**30}, 2**30)
    assert problems == ["spark2 has 4.0 GiB free, needs 6.0 GiB (5.0 GiB to receive + 1.0 GiB reserve)"]


def test_context_fingerprint_follows_content_and_names(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    first = engine_image.context_fingerprint(str(tmp_path))
    assert engine_image.context_fingerprint(str(tmp_path)) == first
    (tmp_path / "extra").write_text("x")
    assert engine_image.context_fingerprint(str(tmp_path)) != first
    with pytest.raises(engine_image.ImageSourceError, match="is not a directory on the controller"):
        engine_image.context_fingerprint(str(tmp_path / "missing"))


def test_context_fingerprint_cache_is_reused_only_while_no_file_changed(tmp_path):
    context, cache = tmp_path / "context", tmp_path / "cache"
    (context / "wheels").mkdir(parents=True)
    (context / "Dockerfile").write_text("FROM scratch\n")
    (context / "wheels" / "a.whl").write_bytes(b"wheel-a")
    full = engine_image.context_fingerprint(str(context))
    assert engine_image.context_fingerprint(str(context), cache_dir=str(cache)) == full
    [record] = list(cache.iterdir())
    kept = json.loads(record.read_text())
    assert kept["fingerprint"] == full

    # A lying cache entry proves the second call reads the cache, not the files.
    kept["fingerprint"] = "0" * 64
    record.write_text(json.dumps(kept))
    assert engine_image.context_fingerprint(str(context), cache_dir=str(cache)) == "0" * 64

    # Same size, mtime put back: the bytes changed, so did the ctime, and the files are read again.
    wheel = context / "wheels" / "a.whl"
    before = wheel.stat()
    time.sleep(0.01)
    wheel.write_bytes(b"wheel-b")
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    changed = engine_image.context_fingerprint(str(context), cache_dir=str(cache))
    assert changed == engine_image.context_fingerprint(str(context)) != full

    (context / "wheels" / "b.whl").write_bytes(b"")  # a new, empty file
    assert engine_image.context_fingerprint(str(context), cache_dir=str(cache)) == engine_image.context_fingerprint(str(context))

    record.write_text("{not json")  # a damaged cache is recomputed and rewritten
    assert engine_image.context_fingerprint(str(context), cache_dir=str(cache)) == engine_image.context_fingerprint(str(context))
    assert json.loads(record.read_text())["fingerprint"] == engine_image.context_fingerprint(str(context))


def test_context_fingerprint_works_where_the_cache_cannot_be_written(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert engine_image.context_fingerprint(str(tmp_path), cache_dir=str(blocker / "cache")) == engine_image.context_fingerprint(str(tmp_path))
