"""`ansible-galaxy collection build` ships the collection and none of its test bench."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tarfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tarball_names(tmp_path_factory):
    galaxy = shutil.which("ansible-galaxy")
    assert galaxy, "ansible-galaxy is not on PATH (make venv)"
    out = tmp_path_factory.mktemp("build")
    subprocess.run([galaxy, "collection", "build", "--output-path", str(out), str(REPO)], check=True, capture_output=True)
    (tarball,) = out.glob("sparkfleet-vllm-*.tar.gz")
    with tarfile.open(tarball) as archive:
        return {member.name for member in archive.getmembers()}


@pytest.mark.parametrize(
    "required",
    [
        "roles/engine/tasks/main.yml",
        "plugins/module_utils/serve_args.py",
        "playbooks/site.yml",
        "meta/runtime.yml",
        "docs/lanes.md",
        # The engine role reads them from the collection root (engine_patches_dir).
        "patches/manifest.yml",
        "patches/sm12x-persistent-topk-guard.diff",
        "patches/sm12x-persistent-topk-guard.indexer_topk.py.txt",
        "roles/nccl/files/image_nccl_version.py",
        # The cpu profile builds its image and generates its model from here (paths relative to the root).
        "images/engine-cpu/Dockerfile",
        "images/engine-cpu/make_tiny_model.py",
        "roles/model_weights/files/hf_download.py",
        "plugins/action/fanout_watch.py",
    ],
)
def test_tarball_holds_the_collection(tarball_names, required):
    assert required in tarball_names


def test_tarball_holds_no_test_bench_or_caches(tarball_names):
    tops = {name.split("/")[0] for name in tarball_names}
    assert not tops & {"molecule", "tests", ".cache", ".venv", ".ci", "collections", ".ansible", "benchmarks"}, tops
    assert not [name for name in tarball_names if "__pycache__" in name or name.endswith((".whl", ".tar"))]
