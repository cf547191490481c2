"""The fit check's KV prediction reads what the engine will run (roles/preflight/defaults/main.yml).

Preflight runs in its own play, where the engine role's defaults are not loaded, and again from the engine role,
where they are: either way its KV inputs must be the engine's settings (an inventory's engine_* values, else the
profile's). The defaults are templated here by ansible-core's own Templar, as a play would template them.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = pathlib.Path(__file__).resolve().parents[2]
PROFILES = yaml.safe_load((REPO / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]
PREFLIGHT_DEFAULTS = yaml.safe_load((REPO / "roles/preflight/defaults/main.yml").read_text())
ENGINE_DEFAULTS = yaml.safe_load((REPO / "roles/engine/defaults/main.yml").read_text())
KV_INPUTS = ("preflight_speculative_mtp", "preflight_kv_cache_dtype", "preflight_model_dtype", "preflight_block_size")


def _trusted(value):
    """Role defaults as a play holds them: their template strings trusted."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _kv_inputs(profile, inventory=None, engine_defaults_loaded=False):
    variables = {**_trusted(ENGINE_DEFAULTS)} if engine_defaults_loaded else {}
    variables.update(_trusted(PREFLIGHT_DEFAULTS), profiles=PROFILES, profile=profile, **(inventory or {}))
    templar = Templar(loader=DataLoader(), variables=variables)
    return {name.removeprefix("preflight_"): templar.template(trust_as_template(f"{{{{ {name} }}}}")) for name in KV_INPUTS}


@pytest.mark.parametrize("engine_defaults_loaded", [False, True], ids=["preflight play", "from the engine role"])
def test_the_profiles_settings_when_the_inventory_sets_none(engine_defaults_loaded):
    gb10 = _kv_inputs("gb10", engine_defaults_loaded=engine_defaults_loaded)
    assert gb10 == {
        "speculative_mtp": True,
        "kv_cache_dtype": PROFILES["gb10"]["kv_cache_dtype"],
        "model_dtype": PROFILES["gb10"]["dtype"],
        "block_size": PROFILES["gb10"]["block_size"],
    }
    assert _kv_inputs("cpu", engine_defaults_loaded=engine_defaults_loaded)["speculative_mtp"] is False


@pytest.mark.parametrize("engine_defaults_loaded", [False, True], ids=["preflight play", "from the engine role"])
@pytest.mark.parametrize(
    ("inventory", "expected"),
    [
        ({"engine_speculative_method": "ngram"}, {"speculative_mtp": False}),
        ({"engine_mtp_num_speculative_tokens": 0}, {"speculative_mtp": False}),
        ({"engine_kv_cache_dtype": "auto", "engine_block_size": 16}, {"kv_cache_dtype": "auto", "block_size": 16}),
        ({"engine_dtype": "bfloat16"}, {"model_dtype": "bfloat16"}),
    ],
    ids=["n-gram drafter", "no speculative tokens", "kv dtype and block size", "model dtype"],
)
def test_an_inventorys_engine_settings_are_what_the_prediction_counts(inventory, expected, engine_defaults_loaded):
    found = _kv_inputs("gb10", inventory, engine_defaults_loaded=engine_defaults_loaded)
    assert {name: found[name] for name in expected} == expected
    assert _kv_inputs("gb10", engine_defaults_loaded=engine_defaults_loaded) != found
