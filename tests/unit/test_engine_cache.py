"""The ranks' caches per image (plugins/module_utils/engine_cache.py): where each profile's caches live, and which
image directories a relaunch prunes."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import engine_cache, serve_args

ROOT = pathlib.Path(__file__).parents[2]
PROFILES = yaml.safe_load((ROOT / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]
IMAGE = "sha256:4f1c0a9b7d2e8c3f5a6b9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"

# The caches a rank fills and the variable that places each (the profiles' cache_env sets them; docs/warm-boots.md).
CACHE_VARIABLES = {
    "VLLM_CACHE_ROOT": "vLLM's torch.compile artifacts (keyed by vLLM's own hash of the model and compile settings)",
    "TORCHINDUCTOR_CACHE_DIR": "inductor's kernels outside vLLM's compiled graphs",
    "TRITON_CACHE_DIR": "Triton's compiled kernels",
    "FLASHINFER_WORKSPACE_BASE": "FlashInfer's JIT-built attention and sampling kernels",
    "DG_JIT_CACHE_DIR": "DeepGEMM's JIT-built FP8 GEMM kernels",
    "TORCH_EXTENSIONS_DIR": "PyTorch C++/CUDA extensions built at run time",
    "CUDA_CACHE_PATH": "the CUDA driver's PTX-to-SASS cache",
    "XDG_CACHE_HOME": "anything else a library keeps under ~/.cache",
}


def caches_outside(env, mount=engine_cache.IMAGE_CACHE_MOUNT):
    """The cache variables of `env` that point anywhere but under `mount`, or are not set: {variable: value}."""
    return {name: env.get(name) for name in CACHE_VARIABLES if not str(env.get(name) or "").startswith(mount.rstrip("/") + "/")}


@pytest.mark.parametrize("profile", ["gb10", "gb10_nvfp4"])
def test_every_cache_a_gpu_rank_fills_is_in_its_images_directory_on_the_node(profile):
    """The rendered environment of a gb10 rank: every cache variable under /cache/image, which the engine role
    mounts from <engine_cache_dir>/images/<image ID> (roles/engine/tasks/read.yml)."""
    env = serve_args.engine_env(PROFILES[profile]["cache_env"] | PROFILES[profile]["env"])
    assert caches_outside(env) == {}
    assert env["VLLM_CACHE_ROOT"] == "/cache/image/vllm"
    assert env["HF_HOME"] == "/cache/huggingface"  # the weights' hub cache belongs to no image


def test_the_cpu_profile_keeps_vllms_cache_in_its_image_and_the_rest_in_the_images_directory():
    """The cpu image carries vLLM's cache, warmed when it was built (images/engine-cpu/warm_caches.py): one image's by
    construction. Its ranks compile nothing (eager, TORCH_COMPILE_DISABLE); whatever else they cache goes to the node."""
    env = serve_args.engine_env(PROFILES["cpu"]["cache_env"] | PROFILES["cpu"]["env"])
    outside = {"VLLM_CACHE_ROOT", "FLASHINFER_WORKSPACE_BASE", "DG_JIT_CACHE_DIR", "CUDA_CACHE_PATH", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"}
    assert set(caches_outside(env)) == outside
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/cache/image/inductor"


def test_an_images_directory_is_named_by_its_id_and_a_bad_id_is_refused():
    assert engine_cache.image_cache_name(IMAGE) == "4f1c0a9b7d2e"
    assert engine_cache.image_cache_name("4f1c0a9b7d2e8c3f") == "4f1c0a9b7d2e"
    with pytest.raises(engine_cache.EngineCacheError, match=r"'vllm:latest' is not a Docker image ID"):
        engine_cache.image_cache_name("vllm:latest")


def test_other_images_caches_are_pruned_oldest_launch_first_down_to_the_limit_and_the_kept_ones_never():
    gib = 1024**3
    listing = "\n".join(
        [
            f"1796300000 {30 * gib} aaaaaaaaaaaa",  # oldest, but the image of the ranks kept for a roll back
            f"1796300100.5 {20 * gib} bbbbbbbbbbbb",
            f"1796300200 {25 * gib} cccccccccccc",
            f"1796300300 {10 * gib} 4f1c0a9b7d2e",  # this launch's image
        ]
    )
    keep = [IMAGE, "sha256:" + "a" * 64]
    assert engine_cache.to_prune(listing, keep, 65 * gib) == ["bbbbbbbbbbbb"]  # 85 GiB: the oldest other one goes
    assert engine_cache.to_prune(listing, keep, 40 * gib) == ["bbbbbbbbbbbb", "cccccccccccc"]  # the kept 40 GiB stay
    assert engine_cache.to_prune(listing, keep, 100 * gib) == []
    assert engine_cache.to_prune(listing, keep, 0) == ["bbbbbbbbbbbb", "cccccccccccc"]
    assert engine_cache.to_prune("", keep, 0) == []
    with pytest.raises(engine_cache.EngineCacheError, match="cannot read the image caches' listing line 'du: cannot access'"):
        engine_cache.to_prune("du: cannot access", keep, 0)
