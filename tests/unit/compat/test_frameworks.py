"""builder.compat framework data: wheels per CUDA/ROCm line, Python and platform; compiled architectures;
the matrix-cell check ``variant_problems``. The shipped tables are cross-checked against the source
tables copied into tests/data/compat (torch-matrix.csv, tensorflow-matrix.csv, rocm-matrix.csv)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from packaging.version import Version

from builder import compat
from builder.compat._data import cuda_image_rows, read_table, rocm_rows, wheel_rows

DATA = Path(__file__).resolve().parents[2] / "data" / "compat"


def cell_problems(
    framework: str, version: str, kind: str, accel: str | None, python: str, os: str, platform: str = "linux/amd64"
) -> list[str]:
    """``compat.variant_problems`` of one matrix cell."""
    return list(
        compat.variant_problems(
            framework=framework,
            framework_version=version,
            kind=kind,
            accel_version=accel,
            python=python,
            os=os,
            platform=platform,
        )
    )


def _source(name: str) -> list[dict[str, str]]:
    lines = (DATA / name).read_text().splitlines()
    assert lines[0].startswith("# Source:")
    return list(csv.DictReader(lines[1:]))


def _torch_tags() -> dict[str, set[str]]:
    """torch release -> wheel tags it publishes (stable + experimental CUDA tags, ROCm, cpu), per RELEASE.md."""
    out: dict[str, set[str]] = {}
    for r in _source("torch-matrix.csv"):
        tags = set(r["cuda_wheel_tags_stable"].split()) | set(r["cuda_wheel_tags_experimental"].split())
        m = re.match(r"ROCm (\S+)", r["stable_rocm"])
        if m:
            tags.add(f"rocm{m.group(1)}")
        tags.add("cpu")
        out[r["torch_version"]] = tags
    return out


def test_every_data_file_records_its_source() -> None:
    for name in (
        "cuda-driver.csv",
        "cuda-images.csv",
        "gpus.csv",
        "rocm.csv",
        "framework-wheels.csv",
        "framework-archs.csv",
    ):
        comments, rows = read_table(name)
        assert rows, name
        assert any("Source" in c or "Sources" in c for c in comments), name


def test_shipped_torch_data_pairs_no_release_with_a_cuda_line_it_lacks_wheels_for() -> None:
    upstream = _torch_tags()
    torch_rows = [r for r in wheel_rows() if r.framework == "torch"]
    assert len(torch_rows) >= 3 * len(upstream)
    for row in torch_rows:
        releases = [v for v in upstream if row.versions.contains(Version(v))]
        assert len(releases) == 1, (str(row.versions), releases)
        assert row.wheel in upstream[releases[0]], (releases[0], row.wheel)
        if row.kind == "cuda":
            digits = row.wheel.removeprefix("cu")
            assert row.accel == f"{digits[:-1]}.{digits[-1]}"
            # a torch CUDA wheel serves exactly its own line
            assert row.accel_versions.contains(Version(row.accel))
            assert not any(
                row.accel_versions.contains(Version(f"{digits[:-1]}.{m}")) for m in range(10) if m != int(digits[-1])
            )
    # and every upstream tag is in the shipped data
    for release, tags in upstream.items():
        shipped = {r.wheel for r in torch_rows if r.versions.contains(Version(release))}
        assert shipped == tags, release


@pytest.mark.parametrize(
    ("release", "line"),
    [("2.9", "12.4"), ("2.9", "11.8"), ("2.8", "13.0"), ("2.7", "12.4"), ("2.5", "12.6"), ("2.11", "12.9")],
)
def test_torch_release_without_wheels_for_a_line_is_a_problem(release: str, line: str) -> None:
    problems = cell_problems("torch", release, "cuda", line, "3.11", "ubuntu22.04")
    assert any(f"publishes no wheels for CUDA {line}" in p for p in problems), problems


@pytest.mark.parametrize(
    ("release", "line"), [("2.9", "12.6"), ("2.9.1", "12.8"), ("2.9", "13.0"), ("2.8.0", "12.9"), ("2.6", "12.4")]
)
def test_torch_release_with_wheels_is_fine(release: str, line: str) -> None:
    assert cell_problems("torch", release, "cuda", line, "3.11", "ubuntu22.04") == []


def test_find_wheel_prefers_stable_and_names_the_index_tag() -> None:
    row = compat.find_wheel("torch", "2.9.1", "cuda", "12.8")
    assert row is not None and row.wheel == "cu128" and row.status == "stable"
    exp = compat.find_wheel("torch", "2.9", "cuda", "13.0")
    assert exp is not None and exp.status == "experimental"
    assert compat.find_wheel("torch", "2.9", "cuda", "12.4") is None
    rocm = compat.find_wheel("torch", "2.6", "rocm", "6.2.4")
    assert rocm is not None and rocm.wheel == "rocm6.2.4"
    jax = compat.find_wheel("jax", "0.7.2", "cuda", "12.8")
    assert jax is not None and jax.wheel == "jax[cuda12]"
    jax13 = compat.find_wheel("jax", "0.7.2", "cuda", "13.0")
    assert jax13 is not None and jax13.wheel == "jax[cuda13]"


def test_python_and_platform_problems() -> None:
    p = cell_problems("torch", "2.9", "cuda", "12.8", "3.9", "ubuntu24.04")
    assert len(p) == 1 and "torch 2.9 (cu128) has no wheels for Python 3.9" in p[0]
    p = cell_problems("torch", "2.9", "rocm", "6.4", "3.12", "ubuntu24.04", "linux/arm64")
    assert any("linux/arm64" in x for x in p)
    p = cell_problems("jax", "0.11.0", "cpu", None, "3.11", "debian12")
    assert any("Python 3.11" in x for x in p)  # jax 0.11 dropped Python 3.11


def test_tensorflow_cells() -> None:
    tf_rows = _source("tensorflow-matrix.csv")
    for r in tf_rows:
        if r["package"] != "tensorflow" or Version(r["tf_version"]) < Version("2.12"):
            continue
        mm = ".".join(r["tf_version"].split(".")[:2])
        lo, hi = r["python"].split("-")
        for py in (lo, hi):
            ok = cell_problems("tensorflow", mm, "cuda", r["cuda"], py, "ubuntu22.04")
            assert ok == [], (mm, py, ok)
        too_new = f"3.{int(hi.split('.')[1]) + 1}"
        assert cell_problems("tensorflow", mm, "cpu", None, too_new, "ubuntu22.04"), mm
    # TF 2.18 was built for 12.5: a CUDA 11.8 cell is rejected
    assert cell_problems("tensorflow", "2.18", "cuda", "11.8", "3.11", "ubuntu22.04")


def test_os_rules_for_cuda_and_rocm() -> None:
    def cell(kind: str, accel: str | None, os: str, framework: str = "none") -> list[str]:
        return cell_problems(framework, "0", kind, accel, "3.12", os)

    assert cell("cuda", "12.8", "ubuntu24.04") == []
    assert cell("cuda", "12.8", "ubuntu22.04") == []
    assert any("no official nvidia/cuda images for ubuntu24.04" in p for p in cell("cuda", "12.4", "ubuntu24.04"))
    assert any("ubuntu20.04" in p for p in cell("cuda", "13.0", "ubuntu20.04"))
    # the demo's mirrored Debian base: CUDA comes from PyPI wheels, any line is fine
    assert cell("cuda", "12.4", "debian12") == []
    assert cell("cuda", "13.0", "debian12") == []
    assert any("not in builder/compat/data/cuda-driver.csv" in p for p in cell("cuda", "14.9", "debian12"))
    # ROCm OS support (rocm-matrix.csv): 6.1 has no Ubuntu 24.04; 6.3.1+ supports Debian 12, 6.3.0 does not
    assert cell("rocm", "6.3", "ubuntu24.04") == []
    assert any("does not support ubuntu24.04" in p for p in cell("rocm", "6.1", "ubuntu24.04"))
    assert cell("rocm", "6.3.1", "debian12") == []
    assert any("does not support debian12" in p for p in cell("rocm", "6.3.0", "debian12"))
    assert any("not in builder/compat/data/rocm.csv" in p for p in cell("rocm", "5.1", "ubuntu22.04"))
    assert cell("cpu", None, "ubuntu24.04") == []
    assert any("kind" in p for p in cell("tpu", None, "ubuntu24.04"))


def test_rocm_os_support_matches_the_source_table() -> None:
    for r in _source("rocm-matrix.csv"):
        row = compat.rocm_row(r["rocm_version"])
        assert row is not None and row.rocm == r["rocm_version"]
        assert row.provenance == "upstream"
        for group in r["os_support"].split(";"):
            if group.strip().startswith("Ubuntu"):
                major_minor = ".".join(group.split()[1].split(".")[:2])
                assert f"ubuntu{major_minor}" in row.os
        assert set(row.gfx_targets) == {g.strip() for g in r["gfx_targets"].split(";")}


def test_unknown_framework_release_and_name() -> None:
    p = cell_problems("torch", "9.0", "cpu", None, "3.12", "ubuntu24.04")
    assert any("no wheel data for torch 9.0" in x for x in p)
    p = cell_problems("mxnet", "1.9", "cpu", None, "3.12", "ubuntu24.04")
    assert any("mxnet" in x for x in p)


def test_compiled_archs() -> None:
    cu128 = compat.compiled_archs("torch", "2.9", "cuda", "12.8")
    assert "sm_120" in cu128 and "sm_100" in cu128
    cu126 = compat.compiled_archs("torch", "2.9", "cuda", "12.6")
    assert "sm_120" not in cu126 and "sm_50" in cu126  # Blackwell needs cu128+
    cu130 = compat.compiled_archs("torch", "2.9", "cuda", "13.0")
    assert not {"sm_50", "sm_60", "sm_70"} & set(cu130)  # cu13x drops sm_50..sm_70
    # observed lists differ per platform: the aarch64 (sbsa) cu130 wheels carry sm_110 (Thor), not sm_75/sm_86
    arm = compat.compiled_archs("torch", "2.13", "cuda", "13.0", "linux/arm64")
    assert "sm_110" in arm and "sm_75" not in arm and "sm_110" not in cu130
    assert "gfx942" in compat.compiled_archs("torch", "2.9", "rocm", "6.4")
    assert compat.compiled_archs("torch", "2.9", "cpu", None) == ()
    assert compat.compiled_archs("none", "0", "cuda", "12.8") == ()
    assert "compute_90" in compat.compiled_archs("tensorflow", "2.20", "cuda", "12.8")
    assert "sm_75" in compat.compiled_archs("jax", "0.7.2", "cuda", "13.0")


def test_cuda_image_os_data() -> None:
    rows = cuda_image_rows()
    assert [r.image_release for r in rows] == sorted((r.image_release for r in rows), key=Version)
    assert compat.cuda_image_os("12.8") == ("ubuntu20.04", "ubuntu22.04", "ubuntu24.04")
    assert "ubuntu22.04" in compat.cuda_image_os("11.8")
    assert compat.cuda_image_os("10.0") == ()


def test_rocm_rows_sorted_newest_first() -> None:
    versions = [Version(r.rocm) for r in rocm_rows()]
    assert versions == sorted(versions, reverse=True)

