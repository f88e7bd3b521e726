"""Matrix loading, validation with locations (builder.yamldoc.Problem), expansion, the list command."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from builder import matrix
from builder.errors import ConfigError, MatrixError
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path

DATA = ROOT / "tests" / "data" / "matrices"
SHIPPED = sorted((ROOT / "matrices").glob("*.yaml"))


def _upstream_torch_wheels() -> dict[str, set[str]]:
    """torch release -> wheel tags (stable + experimental) from pytorch/pytorch RELEASE.md
    (copied in tests/data/matrices/upstream-torch-matrix.csv, independent of builder/compat)."""
    lines = (DATA / "upstream-torch-matrix.csv").read_text().splitlines()
    rows = csv.DictReader(line for line in lines if not line.startswith("#"))
    out: dict[str, set[str]] = {}
    for row in rows:
        tags = set((row["cuda_wheel_tags_stable"] + " " + row["cuda_wheel_tags_experimental"]).split())
        rocm = re.search(r"ROCm (\d+\.\d+)", row["stable_rocm"])
        if rocm:
            tags.add(f"rocm{rocm.group(1)}")
        out[row["torch_version"]] = tags | {"cpu"}
    return out


def test_shipped_matrices_load_and_ids_are_unique() -> None:
    matrices = matrix.load_matrices(SHIPPED)
    ids = [v.id for m in matrices for v in m.variants]
    assert len(ids) == len(set(ids))
    assert {m.name for m in matrices} >= {"pytorch", "jax", "tensorflow", "demo"}
    for m in matrices:
        assert m.variants, m.name
        for v in m.variants:
            assert v.matrix == m.name and v.repository == m.repository
            assert re.match(r"^[a-z0-9.]+-(cpu|cu\d+|rocm\d+\.\d+)-py3\.\d+-[a-z]+[\d.]+(-arm64)?$", v.id), v.id
            assert len(v.id) < 100


def test_shipped_pytorch_matrix_pairs_torch_only_with_lines_it_publishes_wheels_for() -> None:
    wheels = _upstream_torch_wheels()
    m = matrix.load_matrix(ROOT / "matrices" / "pytorch.yaml")
    releases = {v.framework.version for v in m.variants}
    cuda_lines = {v.accelerator.version for v in m.variants if v.accelerator.kind == "cuda"}
    assert len(releases) >= 2 and len(cuda_lines) >= 2
    assert any(v.accelerator.kind == "rocm" for v in m.variants)
    assert any(v.accelerator.kind == "cpu" for v in m.variants)
    assert len({v.python for v in m.variants}) >= 2
    for v in m.variants:
        assert v.accelerator.tag in wheels[v.framework.version], (v.id, sorted(wheels[v.framework.version]))
        assert v.packages == (f"torch=={v.framework.version}.*",)
        assert v.index_url == f"https://download.pytorch.org/whl/{v.accelerator.tag}"
        if v.accelerator.kind == "cuda":
            assert v.base.reference.startswith(f"nvidia/cuda:{v.accelerator.version}.")
            assert dict(v.build_args)["TORCH_CUDA_ARCH_LIST"]
        elif v.accelerator.kind == "rocm":
            assert v.base.reference == f"rocm/dev-ubuntu-24.04:{v.accelerator.version}"
            assert "gfx942" in dict(v.build_args)["PYTORCH_ROCM_ARCH"]
        else:
            assert v.base.reference == "ubuntu:24.04"


def test_matrix_pairing_torch_with_a_line_without_wheels_is_rejected(tmp_path: Path) -> None:
    text = (ROOT / "matrices" / "pytorch.yaml").read_text()
    bad = text.replace(
        '{kind: cuda, version: "12.6", image_version: "12.6.3"}',
        '{kind: cuda, version: "12.9", image_version: "12.9.1"}',
    )
    assert bad != text
    path = tmp_path / "pytorch.yaml"
    path.write_text(bad)
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(path)
    problems = err.value.details["problems"]
    assert problems and all("no wheels for CUDA 12.9" in p["message"] for p in problems)
    line = next(i for i, t in enumerate(bad.splitlines(), 1) if '"12.9"' in t)
    assert {p["line"] for p in problems} == {line}
    assert {p["path"] for p in problems} == {"axes.accelerator[0]"}


def test_bad_matrix_lists_every_problem_with_file_line_col_and_path() -> None:
    path = DATA / "bad.yaml"
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(path)
    problems = err.value.details["problems"]
    assert all(p["file"] == str(path) for p in problems)
    marked = {i for i, t in enumerate(path.read_text().splitlines(), 1) if "# BAD" in t}
    assert {p["line"] for p in problems} == marked
    by_line = {p["line"]: p for p in problems}
    fields = {p["path"] for p in problems}
    assert {
        "repository",
        "colour",
        "axes.accelerator[0]",
        "axes.accelerator[2].version",
        "axes.accelerator[3].kind",
        "axes.python[1]",
        "axes.platform[1]",
        "exclude[0]",
        "packages.default[1]",
        "base",
    } <= fields
    cu118 = [p["message"] for p in problems if p["path"] == "axes.accelerator[0]"]
    assert any("torch 2.11 publishes no wheels for CUDA 11.8" in m for m in cu118)
    assert any("no official nvidia/cuda images for ubuntu24.04" in m for m in cu118)
    assert "tpu" in by_line[min(i for i in marked if "tpu" in path.read_text().splitlines()[i - 1])]["message"]
    assert "matrices/bad.yaml:" in err.value.message
    assert err.value.exit_code == 10
    # the one validation-problem shape (builder.yamldoc.Problem.to_json), with 1-based columns
    assert all(set(p) == {"file", "line", "col", "path", "message", "severity"} for p in problems)
    assert all(p["severity"] == "error" and p["col"] >= 1 for p in problems)
    assert (by_line[5]["col"], by_line[15]["col"], by_line[17]["col"]) == (1, 20, 27)
    assert f"{path}:15:20: axes.python[1]: python 'three' must be 3.X" in err.value.message


def test_unquoted_yaml_versions_are_reported_at_their_own_lines(tmp_path: Path) -> None:
    """`python: [3.10]` is the float 3.1 in YAML: the error names the field and line and asks for quotes,
    and no cell is built from the mangled value (no misleading 'no wheels for Python 3.1' at the accelerator)."""
    p = tmp_path / "numbers.yaml"
    p.write_text(
        "family: pytorch\nrepository: ml/pytorch\n"  # lines 1-2
        "axes:\n"  # 3
        "  accelerator:\n"  # 4
        '    - {kind: cuda, version: "12.8", image_version: "12.8.1"}\n'  # 5
        "    - {kind: cuda, version: 12.6}\n"  # 6
        '  framework: {name: torch, versions: [2.10, "2.11"]}\n'  # 7
        '  python: [3.10, "3.12", 3]\n'  # 8
        "  os: [ubuntu24.04]\n"  # 9
        "exclude:\n  - {python: 3.10, reason: old}\n"  # 10-11
        'include:\n  - {accelerator: {kind: cpu}, framework: 2.11, python: "3.12", os: ubuntu24.04}\n'  # 12-13
        'packages:\n  default: ["torch=={framework_version}.*"]\n'
        'base:\n  cuda: "nvidia/cuda:{image_version}-cudnn-runtime-{os}"\n  cpu: "ubuntu:24.04"\n'
        '  default: "ubuntu:24.04"\n'
    )
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(p)
    got = {(x["line"], x["path"], x["message"]) for x in err.value.details["problems"]}
    assert {
        (8, "axes.python[0]", '3.1 is a YAML number (3.10 lost its trailing zero); quote it: "3.10"'),
        (8, "axes.python[2]", '3 is a YAML number; quote it: "3"'),
        (7, "axes.framework.versions[0]", '2.1 is a YAML number (2.10 lost its trailing zero); quote it: "2.10"'),
        (6, "axes.accelerator[1].version", '12.6 is a YAML number; quote it: "12.6"'),
        (11, "exclude[0].python", '3.1 is a YAML number (3.10 lost its trailing zero); quote it: "3.10"'),
        (13, "include[0].framework", '2.11 is a YAML number; quote it: "2.11"'),
    } <= got
    messages = " ".join(m for _, _, m in got)
    assert "3.1 " not in messages.replace("3.1 is a YAML number", "")  # nothing else mentions Python "3.1"
    assert not any(line in (4, 5) for line, _, _ in got)  # the accelerator lines are not blamed
    assert "matches no cell" not in messages


def test_invalid_yaml_reports_the_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("family: x\naxes:\n  python: [3.11\n  os: [debian12]\n")
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(p)
    (problem,) = err.value.details["problems"]
    assert problem["file"] == str(p) and problem["line"] >= 3


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        matrix.load_matrix(tmp_path / "nope.yaml")


def test_include_exclude_and_arm64_suffix(tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(
        "family: jax\nrepository: ml/jax\n"
        "axes:\n  accelerator: [{kind: cpu}, {kind: cuda, version: '12.8', image_version: 12.8.1}]\n"
        "  framework: {name: jax, versions: ['0.7']}\n  python: ['3.11', '3.12']\n  os: [ubuntu24.04]\n"
        "exclude:\n  - {accelerator: cuda, python: '3.11'}\n"
        "include:\n  - {accelerator: {kind: cpu}, framework: '0.7', python: '3.12', os: ubuntu24.04,"
        " platform: linux/arm64, packages: ['jax==0.7.2']}\n"
        "packages:\n  default: ['jax=={framework_version}.*']\n"
        "base:\n  cuda: 'nvidia/cuda:{image_version}-cudnn-runtime-{os}'\n  cpu: '{os_name}:{os_version}'\n"
    )
    m = matrix.load_matrix(p)
    ids = [v.id for v in m.variants]
    assert ids == sorted(ids)
    assert set(ids) == {
        "jax0.7-cpu-py3.11-ubuntu24.04",
        "jax0.7-cpu-py3.12-ubuntu24.04",
        "jax0.7-cu128-py3.12-ubuntu24.04",
        "jax0.7-cpu-py3.12-ubuntu24.04-arm64",
    }
    arm = next(v for v in m.variants if v.platform == "linux/arm64")
    assert arm.packages == ("jax==0.7.2",)
    cuda = next(v for v in m.variants if v.accelerator.kind == "cuda")
    assert cuda.base.reference == "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
    assert cuda.base.digest is None and cuda.base.pull == cuda.base.reference
    assert "TORCH_CUDA_ARCH_LIST" not in dict(cuda.build_args)
    assert dict(cuda.build_args)["CUDA_ARCHITECTURES"].endswith("-virtual")


def test_duplicate_cell_from_include_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "dup.yaml"
    p.write_text(
        "family: tiny\nrepository: test/tiny\n"
        "axes:\n  accelerator: [{kind: cpu}]\n  framework: {name: none, versions: ['0']}\n"
        "  python: ['3.11']\n  os: [debian12]\n"
        "include:\n  - {accelerator: {kind: cpu}, framework: '0', python: '3.11', os: debian12}\n"
        "base:\n  default: 'mirror:debian:bookworm'\n"
    )
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(p)
    (problem,) = err.value.details["problems"]
    assert problem["line"] == 9 and problem["path"] == "include[0]" and "listed twice" in problem["message"]


def test_debian_cell_needs_the_system_python(tmp_path: Path) -> None:
    text = (ROOT / "matrices" / "demo.yaml").read_text().replace('python: ["3.11"]', 'python: ["3.11", "3.12"]')
    p = tmp_path / "demo.yaml"
    p.write_text(text)
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(p)
    assert all("ships only Python 3.11" in x["message"] for x in err.value.details["problems"])


def test_same_variant_in_two_matrices_is_rejected(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    shutil.copy(ROOT / "matrices" / "demo.yaml", a)
    b = tmp_path / "b.yaml"
    shutil.copy(ROOT / "matrices" / "demo.yaml", b)
    with pytest.raises(MatrixError, match="also produced by"):
        matrix.load_matrices([a, b])


def test_cli_matrix_list_json_and_github_format(cli: Cli) -> None:
    items = cli("-C", str(ROOT), "matrix", "list", "--json", "--select", "jax0.7-*-debian12").json()
    assert [i["id"] for i in items] == ["jax0.7-cpu-py3.11-debian12", "jax0.7-cu128-py3.11-debian12"]
    for i in items:
        assert {"id", "accelerator", "framework", "python", "os", "platform", "base"} <= set(i)
        assert i["framework"] == {"name": "jax", "version": "0.7"}
        assert i["base"]["reference"] == "mirror:debian:bookworm"
    assert items[1]["accelerator"] == {"kind": "cuda", "version": "12.8"}
    doc = cli("-C", str(ROOT), "matrix", "list", "--format", "github", "--shard", "1/2").json()
    doc2 = cli("-C", str(ROOT), "matrix", "list", "--format", "github", "--shard", "2/2").json()
    total = len(cli("-C", str(ROOT), "matrix", "list", "--json").json())
    assert (
        cli("-C", str(ROOT), "matrix", "list", "--format", "json").json()
        == cli("-C", str(ROOT), "matrix", "list", "--json").json()
    )
    assert len(doc["include"]) + len(doc2["include"]) == total
    for row in doc["include"]:
        assert {"id", "matrix", "accelerator", "framework", "python", "os", "platform", "runner_arch"} <= set(row)
        assert row["accelerator"]["kind"] in ("cuda", "rocm", "cpu")
        assert row["runner_arch"] == ("arm64" if row["platform"] == "linux/arm64" else "x64")


def test_cli_matrix_list_changed_since_a_git_ref(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--changed-since REF` (what the images workflow uses): only variants whose content hash moved."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("images", "matrices", "locks"):
        shutil.copytree(ROOT / name, proj / name)
    for name in ("builder.toml", "bases.lock.json"):
        shutil.copy(ROOT / name, proj / name)

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(proj), *args],
            check=True,
            capture_output=True,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@example.invalid",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@example.invalid",
            },
        )

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    for name in [k for k in os.environ if k.startswith("BUILDER_")]:
        monkeypatch.delenv(name)

    def changed() -> list[str]:
        res = cli("-C", str(proj), "matrix", "list", "--format", "github", "--changed-since", "HEAD")
        return sorted(row["id"] for row in res.json()["include"])

    assert changed() == []
    tpl = proj / "images" / "tensorflow" / "Dockerfile.j2"
    tpl.write_text(tpl.read_text().replace('print("tensorflow", v)', 'print("tf", v)'))
    ids = changed()
    assert ids and all(i.startswith("tensorflow") for i in ids)
    assert len(ids) == len(matrix.load_matrix(proj / "matrices" / "tensorflow.yaml").variants)


def test_cli_reports_matrix_errors_with_exit_code_10(cli: Cli) -> None:
    res = cli("-C", str(ROOT), "--json", "matrix", "list", "--matrix", str(DATA / "bad.yaml"), code=10)
    doc = res.json()
    assert doc["error"]["kind"] == "matrix-invalid" and len(doc["error"]["details"]["problems"]) >= 10


def test_tiny_matrix_for_integration_tests() -> None:
    m = matrix.load_matrix(DATA / "tiny.yaml")
    assert [v.id for v in m.variants] == ["tiny-cpu-py3.11-debian12", "tiny-cu128-py3.11-debian12"]
    assert m.variants[0].packages == ("six==1.17.0",) and m.variants[1].packages == ()


def test_arch_build_args_match_a_real_wheels_arch_list(tmp_path: Path) -> None:
    """torch.cuda.get_arch_list() of torch 2.11.0+cu130, recorded on a real H200 host, is what a
    torch 2.11 / CUDA 13.0 cell labels and passes as TORCH_CUDA_ARCH_LIST (never probed in a build)."""
    recorded = (DATA / "recorded-h200-torch.txt").read_text().splitlines()
    facts = json.loads(next(line for line in recorded if line.startswith("{")))
    assert facts["torch"].startswith("2.11.") and facts["cuda"] == "13.0"
    p = tmp_path / "t.yaml"
    p.write_text(
        "family: pytorch\nrepository: ml/pytorch\n"
        "axes:\n  accelerator: [{kind: cuda, version: '13.0', image_version: 13.0.2}]\n"
        "  framework: {name: torch, versions: ['2.11']}\n  python: ['3.12']\n  os: [ubuntu24.04]\n"
        "packages:\n  default: ['torch=={framework_version}.*']\n"
        "base:\n  cuda: 'nvidia/cuda:{image_version}-cudnn-runtime-{os}'\n"
    )
    (v,) = matrix.load_matrix(p).variants
    assert list(v.gpu_archs) == facts["archs"]
    args = dict(v.build_args)
    expected = ";".join(f"{a[3:-1]}.{a[-1]}" for a in facts["archs"])
    assert args["TORCH_CUDA_ARCH_LIST"] == expected == "7.5;8.0;8.6;9.0;10.0;12.0"
    assert args["CUDA_ARCHITECTURES"] == ";".join(f"{a[3:]}-real" for a in facts["archs"])
    cap = "sm_{}{}".format(*facts["cap"])
    assert cap in v.gpu_archs  # the H200 (9.0) runs this image's kernels


EXCLUDE_MATRIX = """\
family: tiny
repository: test/excl
axes:
  accelerator:
    - {kind: cpu}
    - {kind: cuda, version: "12.8"}
  framework: {name: none, versions: ["0"]}
  python: ["3.10", "3.11", "3.12"]
  os: [ubuntu22.04, ubuntu24.04]
  platform: [linux/amd64, linux/arm64]
exclude:
  - {python: "3.10", platform: linux/arm64}
  - {accelerator: cu128, os: ubuntu22.04}
  - {accelerator: [cpu], python: ["3.11", "3.12"], os: ubuntu24.04, platform: linux/amd64}
  - {accelerator: cuda12.8, python: "3.12", platform: [linux/arm64]}
base:
  default: "{os_name}:{os_version}"
"""


def test_exclude_rules_remove_exactly_the_cells_all_their_fields_match(tmp_path: Path) -> None:
    """Every field of a rule must accept the cell (accelerator by kind, tag or kind+version); checked
    against the cross product filtered here, independently of the expansion's axis-by-axis narrowing."""
    path = tmp_path / "excl.yaml"
    path.write_text(EXCLUDE_MATRIX)
    got = {(v.accelerator.tag, v.python, v.os, v.platform) for v in matrix.load_matrix(path).variants}
    rules = [
        {"python": {"3.10"}, "platform": {"linux/arm64"}},
        {"acc": {"cu128"}, "os": {"ubuntu22.04"}},
        {"acc": {"cpu"}, "python": {"3.11", "3.12"}, "os": {"ubuntu24.04"}, "platform": {"linux/amd64"}},
        {"acc": {"cu128"}, "python": {"3.12"}, "platform": {"linux/arm64"}},
    ]
    want = set()
    for acc, py, os_, plat in itertools.product(
        ["cpu", "cu128"], ["3.10", "3.11", "3.12"], ["ubuntu22.04", "ubuntu24.04"], ["linux/amd64", "linux/arm64"]
    ):
        cell = {"acc": acc, "python": py, "os": os_, "platform": plat}
        if not any(all(cell[k] in vals for k, vals in r.items()) for r in rules):
            want.add((acc, py, os_, plat))
    assert got == want and 0 < len(got) < 24
    # a rule that matches no cell is reported at its own index
    path.write_text(EXCLUDE_MATRIX.replace("exclude:\n", 'exclude:\n  - {python: "3.9"}\n'))
    with pytest.raises(MatrixError) as err:
        matrix.load_matrix(path)
    assert [p["path"] for p in err.value.details["problems"]] == ["exclude[0]"]
    assert "matches no cell" in err.value.details["problems"][0]["message"]
