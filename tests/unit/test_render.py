"""Rendering: golden Dockerfiles, determinism, content hash inputs, base resolution in renders, render --check."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
from typing import TYPE_CHECKING, Protocol

import pytest

from builder import bases, compat, matrix, render
from builder.errors import RenderStaleError, UnpinnedBaseError
from builder.labels import OWN
from builder.registry.reference import qualify
from tests.conftest import ROOT, Cli, CliResult

if TYPE_CHECKING:
    from pathlib import Path

    from builder.models import RenderedImage, Variant

GOLDEN = ROOT / "tests" / "data" / "golden"
IMAGES = ROOT / "images"
LOCKS = ROOT / "locks"
FAKE_CUDA_DIGEST = "sha256:" + "a" * 64
FAKE_MIRROR_DIGEST = "sha256:" + "b" * 64
#: Fixed, machine-independent base facts for the golden files.
BASES = bases.BaseResolution(
    upstream={"nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04": FAKE_CUDA_DIGEST},
    mirrors={"debian:bookworm": ("registry.example:5000/mirror/debian:bookworm", FAKE_MIRROR_DIGEST)},
)


def _variants() -> dict[str, Variant]:
    paths = [*sorted((ROOT / "matrices").glob("*.yaml")), ROOT / "tests" / "data" / "matrices" / "tiny.yaml"]
    return {v.id: v for m in matrix.load_matrices(paths) for v in m.variants}


VARIANTS = _variants()


def _render(vid: str, bases: bases.BaseResolution = BASES, **kw: Path) -> RenderedImage:
    return render.render_variant(
        VARIANTS[vid], images_dir=kw.get("images_dir", IMAGES), locks_dir=kw.get("locks_dir", LOCKS), bases=bases
    )


GOLDEN_FILES = sorted(GOLDEN.glob("*/*.Dockerfile"))


def test_every_family_has_a_golden_file() -> None:
    families = {p.parent.name for p in GOLDEN_FILES}
    assert families >= {"pytorch", "jax", "tensorflow", "tiny"}


@pytest.mark.parametrize("golden", GOLDEN_FILES, ids=lambda p: p.stem)
def test_render_matches_golden_dockerfile(golden: Path) -> None:
    r = _render(golden.stem)
    assert r.variant.family == golden.parent.name
    assert r.dockerfile == golden.read_text(), f"render of {golden.stem} differs from {golden}"


@pytest.mark.parametrize("vid", sorted(VARIANTS))
def test_dockerfile_is_production_grade(vid: str) -> None:
    r = _render(vid)
    text = r.dockerfile
    v = r.variant
    assert "# syntax=" not in text
    lines = text.splitlines()
    first_instr = next(line for line in lines if line and not line.startswith("#"))
    assert first_instr.startswith("ARG BASE_IMAGE=")
    assert "FROM ${BASE_IMAGE}" in lines
    assert "USER 10001:10001" in lines
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert "apt-get install -y --no-install-recommends" in text
    assert "python3 -m venv /opt/venv" in text or f"python{v.python} -m venv /opt/venv" in text
    if v.packages:
        assert "--mount=type=secret,id=ca_bundle,required=false" in text
        assert "--require-hashes" in text and "--no-cache-dir" in text
        assert "PIP_CERT=/run/secrets/ca_bundle" in text
        assert "-r /tmp/requirements.lock" in text
    assert "ca-certificates.crt" not in text and "COPY" not in text
    labels = dict(r.labels)
    assert labels[OWN + "variant"] == v.id
    assert labels[OWN + "accelerator"] == v.accelerator.kind
    assert labels[OWN + "framework.version"] == v.framework.version
    assert labels[OWN + "content-hash"] == r.content_hash
    # one spelling for "no GPU code": a CPU image and a framework build without kernels both say none
    assert labels.get(OWN + "gpu-archs") == (",".join(v.gpu_archs) or ("none" if v.accelerator.kind == "cpu" else None))
    assert labels["org.opencontainers.image.base.name"] == qualify(bases.symbolic_name(v.base.reference))
    assert not any(k.startswith("io.builder.") for k in labels)  # the project's own namespace only
    if v.accelerator.kind == "cuda":
        assert v.accelerator.version is not None
        req = compat.require_cuda(v.accelerator.version)
        assert f'ENV NVIDIA_REQUIRE_CUDA="{req}"' in text
        assert req.startswith(f"cuda>={v.accelerator.version}")
        assert 'NVIDIA_VISIBLE_DEVICES="all"' in text
        assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility"' in text
        assert labels[OWN + "min-driver"] == compat.min_driver(v.accelerator.version)
        assert labels[OWN + "cuda.version"] == v.accelerator.version
    else:
        assert "NVIDIA_REQUIRE_CUDA" not in text
    if v.accelerator.kind == "rocm":
        assert labels[OWN + "rocm.version"] == v.accelerator.version
    for name, value in v.build_args:
        assert f'ARG {name}="{value}"' in text
        assert (name, value) in r.build_args
    # every static label of RenderedImage.labels that is machine-independent is in the Dockerfile
    for key, value in labels.items():
        if key not in (
            OWN + "content-hash",
            "org.opencontainers.image.base.digest",
            OWN + "lock.sha256",
            OWN + "base.mirror",
            OWN + "base.mirror-digest",
        ):
            assert f'{key}="{value}"' in text


def test_render_is_deterministic_across_processes() -> None:
    """Same inputs, byte-identical output and the same hash, also under another hash seed."""
    ids = ["torch2.11-cu128-py3.11-ubuntu24.04", "jax0.7-cu128-py3.11-debian12", "tiny-cpu-py3.11-debian12"]
    here = [(r.dockerfile, r.content_hash, r.labels) for r in (_render(i) for i in ids)]
    again = [(r.dockerfile, r.content_hash, r.labels) for r in (_render(i) for i in ids)]
    assert here == again
    code = (
        "import json,sys; sys.path.insert(0, sys.argv[1]); from tests.unit import test_render as t;"
        "print(json.dumps([[r.dockerfile, r.content_hash] for r in (t._render(i) for i in json.loads(sys.argv[2]))]))"
    )
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code, str(ROOT), json.dumps(ids)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        assert json.loads(out) == [[d, h] for d, h, _ in here]


def test_content_hash_covers_base_digest_but_not_the_pull_location() -> None:
    vid = "jax0.7-cu128-py3.11-debian12"
    a = _render(vid)
    other_digest = bases.BaseResolution(
        mirrors={"debian:bookworm": ("registry.example:5000/mirror/debian:bookworm", "sha256:" + "c" * 64)}
    )
    b = _render(vid, other_digest)
    moved = bases.BaseResolution(
        mirrors={"debian:bookworm": ("elsewhere.example/mirror/debian:bookworm", FAKE_MIRROR_DIGEST)}
    )
    c = _render(vid, moved)
    assert a.dockerfile == b.dockerfile == c.dockerfile  # committed text: no machine-local digest
    assert FAKE_MIRROR_DIGEST not in a.dockerfile and "registry.example" not in a.dockerfile
    assert a.content_hash != b.content_hash  # a new base digest is a new content tag
    assert a.content_hash == c.content_hash  # where the mirror lives does not change the image
    assert dict(a.build_args)["BASE_IMAGE"] == f"registry.example:5000/mirror/debian:bookworm@{FAKE_MIRROR_DIGEST}"
    assert dict(c.build_args)["BASE_IMAGE"] == f"elsewhere.example/mirror/debian:bookworm@{FAKE_MIRROR_DIGEST}"
    # a mirror's digest is not the upstream name's: it is recorded under the project's own keys
    assert "org.opencontainers.image.base.digest" not in dict(a.labels)
    assert dict(a.labels)[OWN + "base.mirror-digest"] == FAKE_MIRROR_DIGEST
    assert dict(a.labels)[OWN + "base.mirror"] == "registry.example:5000/mirror/debian:bookworm"
    assert dict(a.labels)["org.opencontainers.image.base.name"] == "docker.io/library/debian:bookworm"
    assert a.content_tag == f"{vid}-{a.content_hash[:12]}"


def test_upstream_base_is_pinned_in_the_dockerfile_and_mirror_mapped_in_build_args() -> None:
    vid = "torch2.11-cu128-py3.11-ubuntu24.04"
    mapped = dataclasses.replace(BASES, mirror_map=(("docker.io/nvidia", "mirror.corp:5000/nvidia"),))
    r = _render(vid, mapped)
    ref = "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
    assert f"ARG BASE_IMAGE={ref}@{FAKE_CUDA_DIGEST}" in r.dockerfile
    assert (
        dict(r.build_args)["BASE_IMAGE"]
        == f"mirror.corp:5000/nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@{FAKE_CUDA_DIGEST}"
    )
    assert r.content_hash == _render(vid).content_hash
    # base.name is the fully qualified name and base.digest that name's digest (not the mirror's name)
    assert dict(r.labels)["org.opencontainers.image.base.name"] == f"docker.io/{ref}"
    assert dict(r.labels)["org.opencontainers.image.base.digest"] == FAKE_CUDA_DIGEST


def test_unpinned_base_and_missing_lock_are_refused() -> None:
    r = _render("torch2.11-rocm7.2-py3.12-ubuntu24.04")
    assert any("not pinned" in u for u in r.unpinned)
    assert "# Base: UNPINNED" in r.dockerfile
    assert "org.opencontainers.image.base.digest" not in dict(r.labels)  # never a value that is no digest
    with pytest.raises(UnpinnedBaseError) as err:
        render.require_pinned(r)
    assert err.value.exit_code == 13
    demo = _render("jax0.7-cpu-py3.11-debian12")
    assert demo.unpinned == ()
    render.require_pinned(demo)
    no_mirror = _render("jax0.7-cpu-py3.11-debian12", bases.BaseResolution())
    assert any("mirror record" in u for u in no_mirror.unpinned)
    assert no_mirror.dockerfile == demo.dockerfile


def test_lock_is_part_of_the_context_and_the_hash(tmp_path: Path) -> None:
    vid = "tiny-cpu-py3.11-debian12"
    locks = tmp_path / "locks"
    shutil.copytree(LOCKS, locks)
    a = _render(vid, locks_dir=locks)
    ctx = dict(a.context)
    assert ctx["requirements.lock"] == (locks / f"{vid}.txt").read_bytes()
    assert a.unpinned == ()
    p = locks / f"{vid}.txt"
    p.write_text(p.read_text() + "# changed\n")
    b = _render(vid, locks_dir=locks)
    assert b.content_hash != a.content_hash and b.dockerfile == a.dockerfile
    p.unlink()
    c = _render(vid, locks_dir=locks)
    assert any("no dependency lock" in u for u in c.unpinned)
    no_pkgs = _render("tiny-cu128-py3.11-debian12", locks_dir=locks)
    assert no_pkgs.unpinned == () and "requirements.lock" not in dict(no_pkgs.context)
    assert "pip install" not in no_pkgs.dockerfile


def test_template_and_context_files_are_part_of_the_hash(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images)
    vid = "tiny-cpu-py3.11-debian12"
    a = _render(vid, images_dir=images)
    (images / "tiny" / "context").mkdir()
    (images / "tiny" / "context" / "probe.py").write_text("print('hi')\n")
    b = _render(vid, images_dir=images)
    assert dict(b.context)["probe.py"] == b"print('hi')\n"
    assert b.content_hash != a.content_hash and b.dockerfile == a.dockerfile
    base = images / "_common" / "Dockerfile.base.j2"
    base.write_text(base.read_text() + "{# x #}\n")
    c = _render(vid, images_dir=images)
    assert c.content_hash != b.content_hash
    (images / "tiny" / "README.md").write_text("docs only\n")
    assert _render(vid, images_dir=images).content_hash == c.content_hash


def _project_copy(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("images", "matrices", "locks", "rendered"):
        shutil.copytree(ROOT / name, proj / name)
    for name in ("builder.toml", "bases.lock.json"):
        shutil.copy(ROOT / name, proj / name)
    return proj


class InProject(Protocol):
    def __call__(self, proj: Path, *args: str, code: int | None = 0) -> CliResult: ...


@pytest.fixture
def builder(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> InProject:
    """``builder -C PROJ ARGS`` in-process, as on any machine: no ``BUILDER_*`` settings of this one and no
    mirror record (a state directory that does not exist)."""
    for name in [k for k in os.environ if k.startswith("BUILDER_")]:
        monkeypatch.delenv(name)

    def run(proj: Path, *args: str, code: int | None = 0) -> CliResult:
        monkeypatch.setenv("BUILDER_STATE_DIR", str(proj / ".state-that-does-not-exist"))
        return cli("-C", str(proj), *args, code=code)

    return run


def test_committed_renders_are_current_on_any_machine(tmp_path: Path, builder: InProject) -> None:
    """What CI runs: `builder render --check` on the committed tree (no mirror record here)."""
    doc = builder(_project_copy(tmp_path), "render", "--check", "--json").json()
    assert not doc["stale"] and doc["unchanged"] == len(doc["variants"]) > 0


def test_render_check_fails_after_a_template_edit_and_passes_after_rerendering(
    tmp_path: Path, builder: InProject
) -> None:
    proj = _project_copy(tmp_path)
    tpl = proj / "images" / "jax" / "Dockerfile.j2"
    tpl.write_text(tpl.read_text().replace('print("jax", v)', 'print("jax version", v)'))
    err = builder(proj, "--json", "render", "--check", code=12).json()["error"]
    assert err["kind"] == "render-stale"
    diff = err["details"]["diff"]
    assert '-RUN python -c \'import jax, sys; v = jax.__version__; print("jax", v)' in diff
    assert '+RUN python -c \'import jax, sys; v = jax.__version__; print("jax version", v)' in diff
    assert "jax/jax0.7-cpu-py3.11-ubuntu24.04.Dockerfile" in " ".join(err["details"]["stale"])
    assert all("/jax" in s or s.startswith("demo/") for s in err["details"]["stale"])
    doc = builder(proj, "render", "--json").json()
    assert doc["changed"] == sorted(err["details"]["stale"]) and not doc["added"] and not doc["removed"]
    builder(proj, "render", "--check")


def test_render_check_notices_removed_and_orphaned_variants(tmp_path: Path, builder: InProject) -> None:
    proj = _project_copy(tmp_path)
    orphan = proj / "rendered" / "jax" / "jax0.1-cpu-py3.11-ubuntu24.04.Dockerfile"
    orphan.write_text("FROM scratch\n")
    # a render in the earlier layout (a folder per variant) is replaced like an orphan
    legacy = proj / "rendered" / "jax" / "jax0.7-cpu-py3.11-ubuntu24.04" / "Dockerfile"
    legacy.parent.mkdir()
    legacy.write_text((proj / "rendered" / "jax" / "jax0.7-cpu-py3.11-ubuntu24.04.Dockerfile").read_text())
    res = builder(proj, "--json", "render", "--check", code=12)
    assert res.json()["error"]["details"]["stale"] == [
        "jax/jax0.1-cpu-py3.11-ubuntu24.04.Dockerfile",
        "jax/jax0.7-cpu-py3.11-ubuntu24.04/Dockerfile",
    ]
    builder(proj, "render")
    assert not orphan.exists() and not legacy.parent.exists()
    builder(proj, "render", "--check")
    # a whole matrix removed: its renders are stale too (when every matrix is rendered)
    (proj / "matrices" / "tensorflow.yaml").unlink()
    stale = builder(proj, "--json", "render", "--check", code=12).json()["error"]["details"]["stale"]
    assert stale and all(s.startswith("tensorflow/") for s in stale)
    builder(proj, "render", "--matrix", str(proj / "matrices" / "jax.yaml"), "--check")
    builder(proj, "render")
    assert not (proj / "rendered" / "tensorflow").exists()
    builder(proj, "render", "--check")


def test_check_renders_api_raises_with_a_unified_diff(tmp_path: Path) -> None:
    rendered = [_render("tiny-cpu-py3.11-debian12"), _render("tiny-cu128-py3.11-debian12")]
    report = render.write_renders(tmp_path, rendered)
    assert len(report.added) == 2 and not report.changed
    assert not render.check_renders(tmp_path, rendered).stale
    target = tmp_path / "tiny" / "tiny-cpu-py3.11-debian12.Dockerfile"
    target.write_text(target.read_text().replace("USER 10001:10001", "USER root"))
    with pytest.raises(RenderStaleError) as err:
        render.check_renders(tmp_path, rendered)
    assert err.value.exit_code == 12
    assert "-USER root" in err.value.details["diff"] and "+USER 10001:10001" in err.value.details["diff"]
    assert err.value.details["stale"] == ["tiny/tiny-cpu-py3.11-debian12.Dockerfile"]
    assert render.write_renders(tmp_path, rendered).changed == ("tiny/tiny-cpu-py3.11-debian12.Dockerfile",)
    assert not render.check_renders(tmp_path, rendered).stale


def test_render_files_are_written_and_compared_as_bytes(tmp_path: Path) -> None:
    """The os.open/os.write path: the file holds the UTF-8 text, gets 0666 less the umask (as
    open() gives), a longer old file is truncated, and a file whose bytes are not the render's
    (invalid UTF-8 that decodes to the same replacement text) is rewritten, not called unchanged."""
    r = _render("tiny-cpu-py3.11-debian12")
    target = tmp_path / "tiny" / "tiny-cpu-py3.11-debian12.Dockerfile"
    old_umask = os.umask(0o027)
    try:
        assert render.write_renders(tmp_path, [r]).added == ("tiny/tiny-cpu-py3.11-debian12.Dockerfile",)
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == r.dockerfile.encode() and stat.S_IMODE(target.stat().st_mode) == 0o640
    target.write_bytes(r.dockerfile.encode() + b"# a longer file than the render\n" * 100)
    assert render.write_renders(tmp_path, [r]).changed and target.read_bytes() == r.dockerfile.encode()
    target.write_bytes(r.dockerfile.encode() + b"\xff")
    with_replacement = dataclasses.replace(r, dockerfile=r.dockerfile + "\ufffd")
    report = render.write_renders(tmp_path, [with_replacement])
    assert report.changed and target.read_bytes() == with_replacement.dockerfile.encode()
    assert render.write_renders(tmp_path, [with_replacement]).unchanged == 1


def test_a_rerender_leaves_unchanged_files_untouched(tmp_path: Path) -> None:
    """A re-render writes only the files whose bytes differ: the others keep their inode and
    modification time (docker's build context and git see no change), even when the clock has
    moved on; a changed file is rewritten in place (same inode: no temporary file renamed over it)."""
    rendered = [_render("tiny-cpu-py3.11-debian12"), _render("tiny-cu128-py3.11-debian12")]
    render.write_renders(tmp_path, rendered)
    files = sorted((tmp_path / "tiny").iterdir())
    past = 1_000_000_000 * 1_000_000_000  # 2001-09-09, in ns: a rewrite now would move it
    for f in files:
        os.utime(f, ns=(past, past))
    before = {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}
    edited = tmp_path / "tiny" / "tiny-cpu-py3.11-debian12.Dockerfile"
    edited.write_bytes(edited.read_bytes().replace(b"USER 10001:10001", b"USER root"))
    os.utime(edited, ns=(past, past))
    report = render.write_renders(tmp_path, rendered)
    assert report.changed == ("tiny/tiny-cpu-py3.11-debian12.Dockerfile",) and report.unchanged == 1
    after = {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}
    assert after["tiny-cu128-py3.11-debian12.Dockerfile"] == before["tiny-cu128-py3.11-debian12.Dockerfile"]
    assert after[edited.name][0] == before[edited.name][0] and after[edited.name][1] > past
    assert edited.read_bytes() == rendered[0].dockerfile.encode()
    assert render.write_renders(tmp_path, rendered).unchanged == 2
    assert {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files} == after


def test_demo_cuda_image_declares_no_gpu_kernels_and_checks_do_not_claim_coverage() -> None:
    """matrices/demo.yaml's CUDA variant installs CPU jaxlib (no jax-cuda12-plugin): `gpu_archs: {cuda: []}`
    renders the gpu-archs label "none", no arch build arguments, and the static check (labels read by
    builder.checks.image, verdict by builder.compat) says the framework has no GPU kernels."""
    from builder.checks.image import facts_from_config

    r = _render("jax0.7-cu128-py3.11-debian12")
    labels = dict(r.labels)
    assert labels[OWN + "gpu-archs"] == "none"
    assert r.variant.gpu_archs == (compat.NO_GPU_KERNELS,)
    assert not any(name in ("CUDA_ARCHITECTURES", "TORCH_CUDA_ARCH_LIST") for name, _ in r.variant.build_args)
    assert "jax-cuda12-plugin" not in " ".join(r.variant.packages)  # the reason for the declaration
    env = ["NVIDIA_REQUIRE_CUDA=" + compat.require_cuda("12.8")]
    facts = facts_from_config(
        {"config": {"Labels": labels, "Env": env}},
        repository="demo/jax",
        digest="sha256:" + "c" * 64,
        platform_digest="sha256:" + "c" * 64,
        platform="linux/amd64",
    )
    assert facts.gpu_archs == ("none",)
    v = compat.check_compat(
        driver="580.65.06",
        gpu="NVIDIA A100-SXM4-80GB",
        brand="NVIDIA",
        cuda=facts.cuda_version,
        require=facts.require_cuda,
        image_archs=facts.gpu_archs,
    )
    text = "\n".join(v.reasons)
    assert "the framework build in this image has no GPU kernels" in text
    assert "is in the image's list" not in text and v.arch_covered is None
    assert v.verdict == "ok"  # the image starts and its CUDA runtime/NVML work; jax computes on the CPU
    # the jax matrix's CUDA variants (jax[cuda12]) keep the wheels' list
    assert VARIANTS["jax0.7-cu128-py3.12-ubuntu24.04"].gpu_archs[-1] == "compute_90"


def test_gpu_archs_declarations_are_validated(tmp_path: Path) -> None:
    from builder.errors import MatrixError

    text = (ROOT / "matrices" / "demo.yaml").read_text().replace("  cuda: []", "  cuda: [sm_80, none]\n  cpu: [sm_90]")
    p = tmp_path / "demo.yaml"
    p.write_text(text)
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(p)
    fields = {x["path"]: x["message"] for x in err.value.details["problems"]}
    assert "'none' is not a GPU architecture" in fields["gpu_archs.cuda[1]"]
    assert "a cpu image has no GPU architectures" in fields["gpu_archs.cpu"]
    ok = p.read_text().replace("  cuda: [sm_80, none]\n  cpu: [sm_90]", "  cuda: [sm_80, compute_80]")
    p.write_text(ok)
    cuda = next(v for v in matrix.load_matrix(p).variants if v.accelerator.kind == "cuda")
    assert cuda.gpu_archs == ("sm_80", "compute_80")
    assert dict(cuda.build_args)["CUDA_ARCHITECTURES"] == "80-real;80-virtual"
