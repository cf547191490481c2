"""Generate the tiny model that the `cpu` profile serves.

No model can be downloaded on the build machines, and the simulated cluster
needs one that boots in about a minute on two cores: a 2-layer Llama with a
BPE tokenizer trained here in a second and a chat template with the same
thinking switch as GLM (`chat_template_kwargs: {"enable_thinking": false}`).
Weights are not written: the engine serves it with `--load-format dummy`.

The KV-relevant shape (2 layers, 2 KV heads of 32) is what the cpu profile's
KV predictions are checked against, so change it only with those tests.

Usage: python make_tiny_model.py OUTPUT_DIR
"""

import json
import pathlib
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# The longest lane is 1,000,000 tokens; the model must allow it natively.
MAX_POSITION_EMBEDDINGS = 1_048_576
SPECIAL_TOKENS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<think>", "</think>"]

# Training text: enough English for a byte-level BPE with a few hundred merges.
CORPUS = [
    "Reply with exactly: PING-OK",
    "A widget factory makes 12 widgets per hour on each of 3 lines. How many widgets in 8 hours?",
    "The quick brown fox jumps over the lazy dog while the cluster serves tokens.",
    "Four nodes run one engine: the workers start first and the head starts last.",
    "Think step by step, then give the answer in one short sentence.",
    "Lanes trade context length against the number of concurrent sequences.",
] * 20

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|{{ message['role'] }}|>"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and not enable_thinking -%}<think></think>"
    "{%- else -%}<think>{%- endif -%}"
    "{%- endif -%}"
)


def build_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return tokenizer


def model_config(vocab_size: int, eos_token_id: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "bos_token_id": eos_token_id,
        "eos_token_id": eos_token_id,
    }


def main(output_dir: str) -> int:
    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    tokenizer.save(str(out / "tokenizer.json"))
    eos_id = tokenizer.token_to_id("<|endoftext|>")
    config = model_config(tokenizer.get_vocab_size(), eos_id)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        "eos_token": "<|endoftext|>",
        "bos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n", encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": eos_id, "eos_token_id": eos_id}, indent=2) + "\n", encoding="utf-8")
    print(f"tiny model written to {out} (vocab {tokenizer.get_vocab_size()})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
