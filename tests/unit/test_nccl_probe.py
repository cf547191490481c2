"""The NCCL probe (roles/nccl/files/image_nccl_version.py) asks the library the process mapped, not torch.

torch.cuda.nccl.version() is a constant from the headers torch was compiled with. The recipe's image re-pins
NCCL 2.30.7 under a torch built against another version, so the probe must report what ncclGetVersion of the
mapped libnccl.so.2 answers. A GB10 image cannot run here: a CUDA torch is stood in for by a test double
package (`torch` whose import maps libnccl.so.2, as libtorch_cuda does), and libnccl.so.2 by a test double
compiled from tests/doubles/libnccl_double.c that exports ncclGetVersion.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBE = REPO / "roles/nccl/files/image_nccl_version.py"
LIBNCCL_DOUBLE = REPO / "tests/doubles/libnccl_double.c"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the libnccl.so.2 double")


def _libnccl(directory, code):
    """A libnccl.so.2 test double answering `code` to ncclGetVersion."""
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / "libnccl.so.2"
    subprocess.run(["cc", "-shared", "-fPIC", f"-DNCCL_DOUBLE_VERSION_CODE={code}", "-o", str(library), str(LIBNCCL_DOUBLE)], check=True)
    return library


def _cuda_torch_double(site, built_against, maps=None):
    """TEST DOUBLE for a CUDA build of torch: torch.version.cuda set, torch.cuda.nccl.version() the compiled-in
    constant, and (like libtorch_cuda, which links libnccl.so.2) the library at `maps` mapped at import."""
    package = site / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(f"""\
            # TEST DOUBLE for a CUDA torch (tests/unit/test_nccl_probe.py).
            import ctypes
            import types

            version = types.SimpleNamespace(cuda="13.0")
            cuda = types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: {tuple(built_against)!r}))
            _libnccl = ctypes.CDLL({str(maps)!r}) if {maps is not None!r} else None
            """)
    )


def _nccl_wheel_double(site, version, library):
    """The nvidia-nccl-cu13 wheel's metadata as pip installs it, its RECORD naming the library inside it."""
    target = site / "nvidia/nccl/lib/libnccl.so.2"
    target.parent.mkdir(parents=True)
    shutil.copy(library, target)
    info = site / f"nvidia_nccl_cu13-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: {version}\n")
    (info / "RECORD").write_text(f"nvidia/nccl/lib/libnccl.so.2,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def _probe(site):
    """The probe as the nccl role runs it (python -c), with the doubles first on the path."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.read_text()],
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return json.loads(result.stdout.splitlines()[-1])


def test_the_recipes_image_torch_built_against_2_29_7_loading_2_30_7_reports_2_30_7(tmp_path):
    library = _libnccl(tmp_path / "lib", 23007)
    _cuda_torch_double(tmp_path / "site", (2, 29, 7), maps=library)
    found = _probe(tmp_path / "site")
    assert found["nccl"] == "2.30.7", found
    assert found["torch_nccl"] == "2.29.7", found  # reported, not judged
    assert found["library"]["path"] == str(library)


def test_an_image_downgraded_to_2_29_7_under_a_torch_built_against_2_30_7_reports_2_29_7(tmp_path):
    """The image the old check passed: torch's constant said 2.30.7, the library it loads is FlashInfer's 2.29.7."""
    library = _libnccl(tmp_path / "lib", 22907)
    _cuda_torch_double(tmp_path / "site", (2, 30, 7), maps=library)
    found = _probe(tmp_path / "site")
    assert (found["nccl"], found["torch_nccl"]) == ("2.29.7", "2.30.7"), found


def test_a_library_coding_its_version_the_pre_2_9_way_is_read(tmp_path):
    library = _libnccl(tmp_path / "lib", 2804)
    _cuda_torch_double(tmp_path / "site", (2, 8, 4), maps=library)
    assert _probe(tmp_path / "site")["nccl"] == "2.8.4"


def test_without_a_mapped_library_the_wheels_own_library_is_asked(tmp_path):
    """A torch that maps no NCCL (not loaded yet, or a CPU build beside the wheel): the nvidia-nccl-cu13 wheel's
    library, found through its RECORD, is loaded and asked."""
    library = _libnccl(tmp_path / "build", 23007)
    _cuda_torch_double(tmp_path / "site", (2, 28, 9), maps=None)
    _nccl_wheel_double(tmp_path / "site", "2.30.7", library)
    found = _probe(tmp_path / "site")
    assert found["packages"] == {"nvidia-nccl-cu13": "2.30.7"}
    assert found["nccl"] == "2.30.7", found
    assert found["library"]["path"] == str(tmp_path / "site/nvidia/nccl/lib/libnccl.so.2")


def test_a_library_without_ncclgetversion_is_reported_not_taken_for_a_version(tmp_path):
    fake = tmp_path / "lib/libnccl.so.2"
    fake.parent.mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), "-x", "c", "-"], input="int unrelated(void){return 0;}\n", text=True, check=True)
    _cuda_torch_double(tmp_path / "site", (2, 30, 7), maps=fake)
    found = _probe(tmp_path / "site")
    assert found["nccl"] is None
    assert "ncclGetVersion" in found["library_error"], found
