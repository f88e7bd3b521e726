"""The ``gpu-archs`` label as a checked claim at build time (issue 15 item 2), on the real engine and
registry: a framework package whose GPU library (a real shared object carrying a fat binary made by
NVIDIA's ``ptxas`` + ``fatbinary`` for sm_80 and sm_90, no PTX) is built with a label that claims sm_120
too: the build fails (exit 14) naming the library file and the label, after the push and before the
content tag (so nothing is tagged or signed); the same image labelled truthfully builds, and a CPU image
(``gpu-archs=none``) is never read."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import pytest

from builder.build.plan import BuildOptions
from builder.build.results import raise_for_failures
from builder.build.run import build_variants
from builder.errors import BuildFailedError
from builder.models import RenderedImage
from builder.registry import RegistryClient
from tests import gpu_code
from tests.integration.test_build import make_rendered

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

SITE = "/usr/local/lib/python3.11/dist-packages"
LIB = f"{SITE}/torch/lib/libtorch_cuda.so"


def _framework_image(vid: str, repo: str, mirror_base: str, library: bytes, archs: str) -> RenderedImage:
    """A torch-like package (dist-info + ``torch/lib/libtorch_cuda.so``) labelled ``gpu-archs=archs``."""
    body = (
        f"COPY libtorch_cuda.so {LIB}\n"
        f"COPY METADATA {SITE}/torch-2.7.0+cu128.dist-info/METADATA\n"
        'ENV CUDA_VERSION=12.8.1 NVIDIA_REQUIRE_CUDA="cuda>=12.8"'
    )
    base = make_rendered(vid, repo, mirror_base, body)
    labels = (*base.labels, ("io.builder.gpu-archs", archs))
    context = (
        ("libtorch_cuda.so", library),
        ("METADATA", b"Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0+cu128\n"),
    )
    h = hashlib.sha256(json.dumps([vid, base.dockerfile, archs, hashlib.sha256(library).hexdigest()]).encode())
    return RenderedImage(
        variant=base.variant,
        dockerfile=base.dockerfile,
        context=context,
        content_hash=h.hexdigest(),
        labels=labels,
        build_args=base.build_args,
    )


def test_a_label_the_binaries_disagree_with_fails_the_build_before_any_tag(
    docker_engine: str, registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path
) -> None:
    fb = gpu_code.make_fatbin(tmp_path / "k.fatbin", sass=("sm_80", "sm_90"))
    library = gpu_code.make_library(tmp_path / "libtorch_cuda.so", fb).read_bytes()
    client = RegistryClient(registry_address, insecure=True)
    options = BuildOptions(registry=registry_address, state_dir=tmp_path / "state", workers=1, source_date_epoch=0)

    liar = _framework_image("claim-liar", unique_repo, mirror_base, library, "sm_80,sm_90,sm_120")
    run = build_variants([liar], options, client=client)
    [failed] = run.failed
    assert "io.builder.gpu-archs=sm_80,sm_90,sm_120 claims sm_120" in (failed.error or "")
    assert f"{LIB} (SASS sm_80 sm_90, PTX -)" in (failed.error or "")
    tags = client.list_tags(unique_repo)
    assert liar.content_tag not in tags and "claim-liar" not in tags  # never a tag on the bad image
    assert not [t for t in tags if t.endswith((".sig", ".att"))]
    with pytest.raises(BuildFailedError) as info:
        raise_for_failures(run)
    assert info.value.exit_code == 14
    log = (tmp_path / "state" / "logs" / "claim-liar.log").read_text()
    assert "# FAILED:" in log and "hint: build the framework's GPU code" in log

    honest = _framework_image("claim-honest", unique_repo, mirror_base, library, "sm_80,sm_90")
    cpu = make_rendered("claim-cpu", unique_repo, mirror_base, "COPY hello.txt /hello.txt")
    cpu = RenderedImage(**{**cpu.__dict__, "labels": (*cpu.labels, ("io.builder.gpu-archs", "none"))})
    run = build_variants([honest, cpu], options, client=client)
    assert [r.status for r in run.results] == ["built", "built"], [r.error for r in run.results]
    assert client.resolve(unique_repo, honest.content_tag) == run.results[0].digest
    log = (tmp_path / "state" / "logs" / "claim-honest.log").read_text()
    assert "io.builder.gpu-archs=sm_80,sm_90 (linux/amd64): covered by 1 libraries" in log
    cpu_log = (tmp_path / "state" / "logs" / "claim-cpu.log").read_text()
    assert "covered by" not in cpu_log and "no framework GPU library" not in cpu_log  # never read
