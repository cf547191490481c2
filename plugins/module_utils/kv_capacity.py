# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""How many tokens of KV cache will the engine have? Predicted from config.json, and read back
from the engine's own start-up print.

Per token and per rank, by attention kind (what vLLM allocates):
- standard attention (MHA/GQA): 2 (K and V) x KV heads on this rank x head_dim x dtype bytes, per
  layer. KV heads are split over TP, or replicated (one per rank) when there are fewer than TP.
- MLA (DeepSeek-V2/V3, GLM-5): one latent of kv_lora_rank + qk_rope_head_dim per layer, the same
  on every rank (not split over TP). kv_cache_dtype fp8_ds_mla packs it as 656 bytes.
- sparse MLA (DeepSeek-V3.2, GLM-5.3: `index_topk`): plus the indexer's keys, index_head_dim fp8
  bytes and a 4-byte scale per 128, per layer.
Speculative MTP layers (num_nextn_predict_layers) hold KV too, when MTP is on.

KV memory per rank is explicit on the CPU build (VLLM_CPU_KVCACHE_SPACE) and with
--kv-cache-memory-bytes; otherwise it is estimated as gmu x total - weights - a reserve for
activations and CUDA graphs, and the prediction says it is an estimate.

Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

GIB = 1024**3

DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}
FP8_DS_MLA_BYTES_PER_LAYER = 656  # 512 fp8 latent + 4 fp32 scales + 64 bf16 rope dims
INDEXER_SCALE_BYTES_PER_128 = 4

_KV_LINE = re.compile(r"\b(GPU|CPU|XPU) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


class KvCapacityError(ValueError):
    """A config this arithmetic does not know; the message says what is missing."""


def text_config(config: dict) -> dict:
    # Multimodal configs (…ForConditionalGeneration) keep the language model under text_config.
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def dtype_bytes(kv_cache_dtype: str, model_dtype: str | None, config: dict) -> tuple[int, str]:
    """Bytes per KV element and the dtype name; "auto" is the engine's (else the model's) dtype."""
    name = (kv_cache_dtype or "auto").lower()
    if name == "auto":
        name = (model_dtype if model_dtype and model_dtype != "auto" else None) or config.get("torch_dtype") or config.get("dtype") or "bfloat16"
        name = str(name).replace("torch.", "").lower()
    if name == "fp8_ds_mla":
        return 1, name
    if name not in DTYPE_BYTES:
        raise KvCapacityError(f"KV dtype {name!r} is not known here (known: auto, fp8_ds_mla, {', '.join(sorted(DTYPE_BYTES))})")
    return DTYPE_BYTES[name], name


def kv_layout(config: dict, tp: int, kv_cache_dtype: str = "auto", model_dtype: str | None = None, mtp_layers: int = 0) -> dict:
    """Bytes of KV per token on one rank, with the arithmetic written out."""
    if tp < 1:
        raise KvCapacityError(f"tensor parallel size {tp} must be at least 1")
    cfg = text_config(config)
    layers = cfg.get("num_hidden_layers")
    if not isinstance(layers, int) or layers < 1:
        raise KvCapacityError("config.json has no num_hidden_layers: not a decoder this arithmetic knows")
    architecture = ",".join(config.get("architectures") or [cfg.get("model_type", "?")])
    layer_types = cfg.get("layer_types")
    approximate = False
    if isinstance(layer_types, list) and layer_types:
        attention_layers = sum(1 for kind in layer_types if kind in ("full_attention", "attention"))
        if attention_layers == 0:
            raise KvCapacityError(f"{architecture}: layer_types {sorted(set(layer_types))} has no full-attention layer this arithmetic knows")
        if attention_layers != len(layer_types):
            # Linear/sliding layers keep fixed-size state; vLLM pads hybrid pages to one size.
            approximate = True
        layers = attention_layers
    layers += max(int(mtp_layers), 0)
    element, dtype_name = dtype_bytes(kv_cache_dtype, model_dtype, cfg)

    if cfg.get("kv_lora_rank"):
        latent, rope = int(cfg["kv_lora_rank"]), int(cfg.get("qk_rope_head_dim") or 0)
        if dtype_name == "fp8_ds_mla":
            per_layer, arithmetic = FP8_DS_MLA_BYTES_PER_LAYER, f"MLA fp8_ds_mla {FP8_DS_MLA_BYTES_PER_LAYER} B"
        else:
            per_layer = (latent + rope) * element
            arithmetic = f"MLA ({latent} latent + {rope} rope) x {element} B"
        kind = "mla"
        if cfg.get("index_topk"):
            index_dim = int(cfg.get("index_head_dim") or 128)
            indexer = index_dim + index_dim // 128 * INDEXER_SCALE_BYTES_PER_128
            per_layer += indexer
            arithmetic += f" + indexer ({index_dim} fp8 + {index_dim // 128 * INDEXER_SCALE_BYTES_PER_128} B scales)"
            kind = "sparse_mla"
        arithmetic += " (the same on every rank)"
    else:
        heads = int(cfg.get("num_attention_heads") or 0)
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = cfg.get("head_dim") or (cfg.get("hidden_size", 0) // heads if heads else 0)
        if not kv_heads or not head_dim:
            raise KvCapacityError(f"{architecture}: config.json has neither kv_lora_rank (MLA) nor attention heads and head_dim")
        per_rank = kv_heads // tp if kv_heads >= tp else 1
        per_layer = 2 * per_rank * int(head_dim) * element
        split = f"{kv_heads} KV heads / TP {tp}" if kv_heads >= tp else f"{kv_heads} KV heads replicated over TP {tp}: 1"
        arithmetic = f"2 (K, V) x {per_rank} heads ({split}) x {head_dim} head_dim x {element} B"
        kind = "attention"
    per_token = per_layer * layers
    return {
        "kind": kind,
        "architecture": architecture,
        "layers": layers,
        "kv_dtype": dtype_name,
        "bytes_per_token_per_layer": per_layer,
        "bytes_per_token": per_token,
        "approximate": approximate,
        "arithmetic": f"{arithmetic} = {per_layer} B per layer x {layers} layers = {per_token} B per token per rank",
    }


def predict(layout: dict, kv_memory_bytes: float, block_size: int | None = None) -> int:
    """Tokens that fit in kv_memory_bytes on one rank (whole blocks when block_size is known)."""
    if kv_memory_bytes <= 0:
        return 0
    if block_size:
        return int(kv_memory_bytes // (layout["bytes_per_token"] * block_size)) * block_size
    return int(kv_memory_bytes // layout["bytes_per_token"])


def kv_memory_per_rank(
    cpu_kvcache_space_gib: float | None = None,
    kv_cache_memory_bytes: int | None = None,
    gmu: float | None = None,
    total_bytes: int | None = None,
    weights_per_rank_bytes: int | None = None,
    non_kv_reserve_bytes: int = 0,
) -> tuple[float, str, bool]:
    """(bytes, how it was found, whether it is an estimate)."""
    if kv_cache_memory_bytes:
        return float(kv_cache_memory_bytes), f"--kv-cache-memory-bytes {kv_cache_memory_bytes}", False
    if cpu_kvcache_space_gib:
        return float(cpu_kvcache_space_gib) * GIB, f"VLLM_CPU_KVCACHE_SPACE={cpu_kvcache_space_gib:g} GiB", False
    if gmu and total_bytes and weights_per_rank_bytes is not None:
        memory = gmu * total_bytes - weights_per_rank_bytes - non_kv_reserve_bytes
        how = (
            f"gmu {gmu} x {total_bytes / GIB:.1f} GiB - weights {weights_per_rank_bytes / GIB:.1f} GiB"
            f" - reserve {non_kv_reserve_bytes / GIB:.1f} GiB (activations, CUDA graphs)"
        )
        return max(memory, 0.0), how, True
    raise KvCapacityError("no KV memory to predict from: give VLLM_CPU_KVCACHE_SPACE, --kv-cache-memory-bytes, or gmu with the weights per rank")


def lane_fit(tokens: int, max_model_len: int, max_num_seqs: int) -> dict:
    """How the lane's occupancy compares with the KV capacity (the recipe's oversubscription)."""
    occupancy = max_model_len * max_num_seqs
    return {
        "max_full_length_concurrency": tokens / max_model_len if max_model_len else None,
        "occupancy_tokens": occupancy,
        "oversubscription": occupancy / tokens if tokens else None,
    }


def parse_engine_kv(text: str) -> dict | None:
    """vLLM's start-up print, on one line or two:
    `GPU KV cache size: 2,370,000 tokens` and `Maximum concurrency for 500,000 tokens per request: 4.74x`
    (CPU builds say `CPU`). The first occurrence wins (a relaunch appends a new log only after)."""
    size = _KV_LINE.search(text or "")
    if not size:
        return None
    found = {"device": size.group(1), "tokens": int(size.group(2).replace(",", ""))}
    concurrency = _CONCURRENCY.search(text, size.end())
    if concurrency:
        found["for_tokens"] = int(concurrency.group(1).replace(",", ""))
        found["max_concurrency"] = float(concurrency.group(2))
    return found


def compare(predicted: int, actual: int) -> dict:
    ratio = predicted / actual if actual else None
    return {
        "predicted_tokens": predicted,
        "actual_tokens": actual,
        "ratio": ratio,
        "within_2_percent": ratio is not None and abs(ratio - 1) <= 0.02,
    }
