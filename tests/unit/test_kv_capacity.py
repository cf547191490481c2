"""KV capacity predictions for known configs, the arithmetic written out, and the engine's print."""

import importlib.util
import json
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import kv_capacity as kv

ROOT = pathlib.Path(__file__).parents[2]
CONFIGS = ROOT / "tests/data/configs"
GIB = 1024**3


def tiny_config():
    """The cpu profile's model, from the script that builds it into the engine image."""
    spec = importlib.util.spec_from_file_location("make_tiny_model", ROOT / "images/engine-cpu/make_tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model_config(vocab_size=384, eos_token_id=0)


def config(name):
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.mark.parametrize(
    ("name", "tp", "kv_dtype", "mtp", "per_token", "kind"),
    [
        # tiny Llama, 2 KV heads of 32, 2 layers, bf16: at TP 1, 2 (K,V) x 2 x 32 x 2 B = 256 B/layer, x 2 = 512 B
        ("tiny", 1, "auto", 0, 2 * 2 * 32 * 2 * 2, "attention"),
        # at TP 4 the 2 KV heads are replicated (1 per rank): 2 x 1 x 32 x 2 B x 2 layers = 256 B
        ("tiny", 4, "auto", 0, 2 * 1 * 32 * 2 * 2, "attention"),
        # DeepSeek-V3-like MLA, bf16: (512 + 64) x 2 B = 1152 B/layer x 61 = 70,272 B on every rank
        ("deepseek-v3-like", 8, "auto", 0, (512 + 64) * 2 * 61, "mla"),
        # ... with fp8_ds_mla: 656 B/layer x 61, and the MTP layer adds one: x 62
        ("deepseek-v3-like", 4, "fp8_ds_mla", 1, 656 * 62, "mla"),
        # ... with fp8_e4m3: (512 + 64) x 1 B x 61
        ("deepseek-v3-like", 4, "fp8_e4m3", 0, 576 * 61, "mla"),
        # sparse MLA (V3.2-like): + indexer 128 fp8 + 4 B scale = 132 B/layer: (656 + 132) x 61
        ("deepseek-v32-like", 4, "fp8_ds_mla", 0, (656 + 132) * 61, "sparse_mla"),
        # GQA 70B-like: 8 KV heads / TP 4 = 2 per rank: 2 x 2 x 128 x 2 B = 1024 B/layer x 80 = 81,920 B
        ("llama-70b-like", 4, "auto", 0, 2 * 2 * 128 * 2 * 80, "attention"),
        # ... at TP 16 the 8 heads are replicated, 1 per rank: 2 x 1 x 128 x 2 B x 80 = 40,960 B
        ("llama-70b-like", 16, "auto", 0, 2 * 1 * 128 * 2 * 80, "attention"),
        # ... fp8 KV halves it: 2 x 2 x 128 x 1 B x 80 = 40,960 B
        ("llama-70b-like", 4, "fp8", 0, 2 * 2 * 128 * 1 * 80, "attention"),
    ],
)
def test_bytes_per_token_per_rank(name, tp, kv_dtype, mtp, per_token, kind):
    cfg = tiny_config() if name == "tiny" else config(name)
    layout = kv.kv_layout(cfg, tp, kv_dtype, mtp_layers=mtp)
    assert layout["bytes_per_token"] == per_token
    assert layout["kind"] == kind
    assert layout["arithmetic"].endswith(f"= {per_token} B per token per rank")


def test_tiny_model_matches_the_engines_own_prints():
    """Both prints were read from real engines: one CPU server at TP 1 (tests/data) and the four-rank
    TP 4 engine of the simulated cluster at lane 500k (README), each with VLLM_CPU_KVCACHE_SPACE=1."""
    memory, how, estimate = kv.kv_memory_per_rank(cpu_kvcache_space_gib=1)
    assert (memory, estimate) == (GIB, False)
    assert "VLLM_CPU_KVCACHE_SPACE=1 GiB" in how
    tp1 = kv.predict(kv.kv_layout(tiny_config(), 1), memory)  # 1 GiB / 512 B
    tp4 = kv.predict(kv.kv_layout(tiny_config(), 4), memory)  # 1 GiB / 256 B
    assert (tp1, tp4) == (2_097_152, 4_194_304)
    single = kv.parse_engine_kv(
        "(EngineCore pid=8870) INFO [kv_cache_utils.py:2327] CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 8,192 tokens per request: 256.00x"
    )
    four = kv.parse_engine_kv("CPU KV cache size: 4,193,498 tokens, Maximum concurrency for 500,000 tokens per request: 8.39x")
    assert kv.compare(tp1, single["tokens"])["ratio"] == 1.0
    assert kv.compare(tp4, four["tokens"])["within_2_percent"]


def test_engine_print_on_two_lines_and_gpu():
    text = (
        "INFO 08-27 [gpu_worker.py] GPU KV cache size: 2,370,000 tokens\n"
        "INFO 08-27 [kv_cache_utils.py] Maximum concurrency for 500,000 tokens per request: 4.74x\n"
    )
    assert kv.parse_engine_kv(text) == {"device": "GPU", "tokens": 2_370_000, "for_tokens": 500_000, "max_concurrency": 4.74}
    assert kv.parse_engine_kv("no such line") is None


def test_lane_fit_reports_the_recipes_oversubscription():
    # Published 500k lane: 2,370,000 KV tokens for 5 x 500,000 = 2,500,000 tokens of occupancy.
    fit = kv.lane_fit(2_370_000, 500_000, 5)
    assert fit["occupancy_tokens"] == 2_500_000
    assert fit["max_full_length_concurrency"] == pytest.approx(4.74)
    assert fit["oversubscription"] == pytest.approx(2_500_000 / 2_370_000)


def test_estimate_from_gmu_says_it_is_one():
    memory, how, estimate = kv.kv_memory_per_rank(gmu=0.85, total_bytes=121 * GIB, weights_per_rank_bytes=78 * GIB, non_kv_reserve_bytes=4 * GIB)
    assert estimate
    assert memory == pytest.approx((0.85 * 121 - 78 - 4) * GIB)
    assert how.startswith("gmu 0.85 x 121.0 GiB - weights 78.0 GiB")


def test_block_size_rounds_down_to_whole_blocks():
    layout = kv.kv_layout(config("llama-70b-like"), 4)
    assert kv.predict(layout, 81_920 * 2304 * 3 + 5, block_size=2304) == 2304 * 3


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"architectures": ["Mystery"]}, "no num_hidden_layers"),
        ({"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 4}, "has no full-attention layer"),
        ({"num_hidden_layers": 4, "architectures": ["X"]}, "X: config.json has neither kv_lora_rank"),
    ],
)
def test_unknown_architectures_are_named(cfg, message):
    with pytest.raises(kv.KvCapacityError, match=message):
        kv.kv_layout(cfg, 4)


def test_unknown_kv_dtype_is_named():
    with pytest.raises(kv.KvCapacityError, match="KV dtype 'int3'"):
        kv.kv_layout(config("llama-70b-like"), 4, "int3")


def test_hybrid_layers_count_full_attention_only_and_say_approximate():
    cfg = dict(config("llama-70b-like"), layer_types=["linear_attention", "linear_attention", "full_attention"] * 2)
    layout = kv.kv_layout(cfg, 4)
    assert layout["layers"] == 2
    assert layout["approximate"]


def test_multimodal_text_config_is_used():
    cfg = {"architectures": ["Glm5NextForConditionalGeneration"], "text_config": config("deepseek-v32-like"), "vision_config": {}}
    assert kv.kv_layout(cfg, 4, "fp8_ds_mla")["kind"] == "sparse_mla"
