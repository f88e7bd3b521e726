"""Dependency locks: committed locks are complete and current; uv resolution (offline, from a local
index) writes hashed locks; unreachable indexes are reported, not fatal; stale locks are detected."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from builder import locks, matrix
from tests.conftest import ROOT, Cli

UV = str(Path(sys.executable).with_name("uv"))
VARIANTS = {
    v.id: v
    for m in matrix.load_matrices(
        [*sorted((ROOT / "matrices").glob("*.yaml")), ROOT / "tests" / "data" / "matrices" / "tiny.yaml"]
    )
    for v in m.variants
}
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^ \\]+) \\$")


def _parse(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a uv --generate-hashes lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        m = PIN.match(line)
        if m:
            current = m.group(1).lower()
            out[current] = (m.group(2), [])
        elif line.strip().startswith("--hash=sha256:") and current:
            out[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
        elif line and not line.startswith("#"):
            raise AssertionError(f"unexpected lock line {line!r}")
    return out


def test_every_variant_outside_the_pytorch_indexes_has_a_current_lock() -> None:
    for v in VARIANTS.values():
        state = locks.read_lock(v, ROOT / "locks")
        if v.framework.name == "torch":
            # download.pytorch.org is not reachable where these were made: documented as unlocked
            assert state.status in ("missing", "locked"), v.id
            continue
        assert state.status in ("locked", "not-needed"), (v.id, state.reason)


@pytest.mark.parametrize("vid", ["jax0.7-cpu-py3.11-debian12", "jax0.7-cu128-py3.11-debian12"])
def test_demo_locks_pin_everything_with_hashes(vid: str) -> None:
    v = VARIANTS[vid]
    text = locks.read_lock(v, ROOT / "locks").text
    assert text is not None
    pins = _parse(text)
    assert pins["jax"][0].startswith("0.7.") and pins["jaxlib"][0] == pins["jax"][0]
    assert all(hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes) for _, hashes in pins.values())
    if v.accelerator.kind == "cuda":
        assert pins["nvidia-cuda-runtime-cu12"][0].startswith("12.8.")
        assert "nvidia-ml-py" in pins
    else:
        assert not any(name.startswith("nvidia") for name in pins)


def test_lock_header_records_inputs_and_detects_staleness(tmp_path: Path) -> None:
    v = VARIANTS["tiny-cpu-py3.11-debian12"]
    text = (ROOT / "locks" / f"{v.id}.txt").read_text()
    assert text.startswith(locks.header(v))
    assert "x86_64-manylinux_2_36" in text.splitlines()[1]
    (tmp_path / f"{v.id}.txt").write_text(text)
    assert locks.read_lock(v, tmp_path).status == "locked"
    changed = dataclasses.replace(v, packages=("six==1.16.0",))
    state = locks.read_lock(changed, tmp_path)
    assert state.status == "stale" and "other requirements" in state.reason
    assert locks.read_lock(dataclasses.replace(v, python="3.12"), tmp_path).status == "stale"
    assert locks.read_lock(dataclasses.replace(v, packages=()), tmp_path).status == "not-needed"
    (tmp_path / f"{v.id}.txt").unlink()
    assert locks.read_lock(v, tmp_path).status == "missing"


def test_python_platform_follows_os_and_architecture() -> None:
    v = VARIANTS["torch2.11-cu128-py3.12-ubuntu24.04-arm64"]
    assert locks.python_platform(v) == "aarch64-manylinux_2_39"
    assert locks.python_platform(VARIANTS["jax0.7-cpu-py3.11-debian12"]) == "x86_64-manylinux_2_36"
    cmd = locks.uv_command(v, "uv")
    assert cmd[:4] == ["uv", "pip", "compile", "-"]
    assert "--generate-hashes" in cmd
    assert cmd[cmd.index("--index-url") + 1] == "https://download.pytorch.org/whl/cu128"
    assert cmd[cmd.index("--python-version") + 1] == "3.12"


def _local_index(root: Path) -> str:
    """A PEP 503 simple index on disk with one pure-Python wheel (a real index, no network)."""
    name, ver = "tinypkg", "1.0.0"
    whl = root / "files" / f"{name}-{ver}-py3-none-any.whl"
    whl.parent.mkdir(parents=True)
    files = {
        f"{name}/__init__.py": b"VALUE = 1\n",
        f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
        f"{name}-{ver}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = ""
    for p, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{p},sha256={digest},{len(data)}\n"
    files[f"{name}-{ver}.dist-info/RECORD"] = (record + f"{name}-{ver}.dist-info/RECORD,,\n").encode()
    with zipfile.ZipFile(whl, "w") as z:
        for p, data in files.items():
            z.writestr(zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0)), data)
    (root / "simple" / name).mkdir(parents=True)
    (root / "simple" / "index.html").write_text(f'<a href="{name}/">{name}</a>')
    (root / "simple" / name / "index.html").write_text(f'<a href="../../files/{whl.name}">{whl.name}</a>')
    return (root / "simple").as_uri()


def test_lock_variants_resolves_for_real_and_skips_current_locks(tmp_path: Path) -> None:
    index = _local_index(tmp_path / "index")
    v = dataclasses.replace(VARIANTS["tiny-cpu-py3.11-debian12"], packages=("tinypkg==1.*",), index_url=index)
    out = tmp_path / "locks"
    env = {**os.environ, "UV_NO_CACHE": "1"}
    (first,) = locks.lock_variants([v], out, uv=UV, env=env)
    assert first.status == "written", first.error
    text = (out / f"{v.id}.txt").read_text()
    pins = _parse(text)
    assert pins["tinypkg"][0] == "1.0.0"
    whl = next((tmp_path / "index" / "files").glob("*.whl"))
    assert pins["tinypkg"][1] == [hashlib.sha256(whl.read_bytes()).hexdigest()]
    assert locks.read_lock(v, out).status == "locked"
    (second,) = locks.lock_variants([v], out, uv=UV, env=env)
    assert second.status == "up-to-date"
    (third,) = locks.lock_variants([v], out, uv=UV, env=env, upgrade=True)
    assert third.status == "written" and (out / f"{v.id}.txt").read_text() == text  # deterministic


def test_unreachable_index_is_reported_once_and_keeps_going(tmp_path: Path) -> None:
    base = VARIANTS["tiny-cpu-py3.11-debian12"]
    dead = "http://127.0.0.1:9/simple"
    a = dataclasses.replace(base, id="a-cpu-py3.11-debian12", index_url=dead)
    b = dataclasses.replace(base, id="b-cpu-py3.11-debian12", index_url=dead)
    c = dataclasses.replace(base, id="c-cpu-py3.11-debian12", packages=())
    env = {**os.environ, "UV_HTTP_RETRIES": "0", "UV_HTTP_TIMEOUT": "5", "UV_NO_CACHE": "1"}
    results = locks.lock_variants([a, b, c], tmp_path, uv=UV, env=env, timeout=60)
    assert [r.status for r in results] == ["unresolved", "unresolved", "not-needed"]
    assert results[0].error and "onnect" in results[0].error
    assert results[1].error and results[1].error.startswith(dead) and results[1].seconds == 0.0
    assert not list(tmp_path.glob("*.txt"))


def test_cli_lock_reports_current_locks_without_resolving(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    (proj / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "matrices" / "tiny.yaml", proj / "matrices" / "tiny.yaml")
    shutil.copytree(ROOT / "locks", proj / "locks")
    for name in [k for k in os.environ if k.startswith("BUILDER_")]:
        monkeypatch.delenv(name)
    # nothing may be fetched: both locks are current or not needed
    out = cli("-C", str(proj), "lock", "--json", env={"UV_OFFLINE": "1"}).json()
    assert {r["id"]: r["status"] for r in out} == {
        "tiny-cpu-py3.11-debian12": "up-to-date",
        "tiny-cu128-py3.11-debian12": "not-needed",
    }
