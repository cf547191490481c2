"""A real vLLM CPU server for the stream_bench integration tests, started once per session
(benchmarks/vllm_cpu_server.py: the cpu profile's tiny model, glm45 reasoning parser), with an
API key so 401s are real."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[2]
API_KEY = "sparkfleet-test-key"

_spec = importlib.util.spec_from_file_location("vllm_cpu_server", ROOT / "benchmarks" / "vllm_cpu_server.py")
vllm_cpu_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vllm_cpu_server)


@pytest.fixture(scope="session")
def vllm_server():
    """(base_url, api_key, model) of a running server."""
    try:
        with vllm_cpu_server.tiny_model_server(api_key=API_KEY) as (base, _unused):
            yield base, API_KEY, vllm_cpu_server.MODEL
    except vllm_cpu_server.ServerError as error:
        pytest.fail(str(error))
