"""The caches under ``<state_dir>/cache`` trust only private files (``builder.cachefile``): their
directories are created 0700 whatever the umask, and a cached answer that another local user
could have written (a group/other-writable file or directory, or one owned by another user) is
read as a miss by every cache: the policy cache, the matrix index and the layer summaries (the
verdict cache: tests/integration/test_status_verdicts.py)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from typing import TYPE_CHECKING

import pytest

from builder import cachefile
from builder.cachefile import write_json
from builder.image.layers import LayerCache, LayerSummary
from builder.matrix import matrix_paths
from builder.matrix.index import matrix_index
from builder.policy import load_policy
from builder.policy.cache import cached_policy
from tests.conftest import ROOT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


@pytest.fixture
def group_umask() -> Iterator[None]:
    old = os.umask(0o002)  # a shared machine's usual umask: new directories 0775
    try:
        yield
    finally:
        os.umask(old)


def test_cache_directories_are_created_private_whatever_the_umask(tmp_path: Path, group_umask: None) -> None:
    assert write_json(tmp_path / "state" / "cache" / "verdicts" / "ab" / "x.json", {"a": 1})
    for d in ("state", "state/cache", "state/cache/verdicts", "state/cache/verdicts/ab"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d
    assert stat.S_IMODE((tmp_path / "state/cache/verdicts/ab/x.json").stat().st_mode) == 0o600


def _forge_policy(tmp_path: Path) -> tuple[Path, Callable[[], object], object]:
    """A policy cached once, then its cache file edited to trust no ``build`` key."""
    policy = ROOT / "policies" / "default.yaml"
    variables = {"root": str(ROOT), "state_dir": str(tmp_path / "state")}
    cache = tmp_path / "cache"
    cached_policy(policy, variables, cache)
    [file] = cache.glob("policy-*.json")
    file.write_text(file.read_text().replace('"name":"build"', '"name":"forged"'))
    assert "forged" in file.read_text()
    return file, lambda: cached_policy(policy, variables, cache), load_policy(policy, variables)


def _forge_matrix(tmp_path: Path) -> tuple[Path, Callable[[], object], object]:
    """The matrices' index cached once, then its file edited to name another policy."""
    shutil.copytree(ROOT / "matrices", tmp_path / "matrices")
    paths = matrix_paths(tmp_path / "matrices")
    cache = tmp_path / "cache"
    real = matrix_index(paths, cache)
    [file] = cache.glob("variants-*.json")
    doc = json.loads(file.read_text())
    for m in doc["matrices"]:
        m["policy"] = "forged"
    file.write_text(json.dumps(doc))
    from builder.matrix import index

    def again() -> object:
        index._READ.clear()  # a new process: nothing decoded yet
        return index.matrix_index(paths, cache)

    return file, again, real


def _forge_layer(tmp_path: Path) -> tuple[Path, Callable[[], object], object]:
    """A layer summary cached once, then its file edited to list another file."""
    cache = LayerCache(tmp_path / "cache" / "layers")
    digest = "sha256:" + "a" * 64
    cache.put(LayerSummary(digest, 10, ("/usr/lib/real.so",)))
    [file] = (tmp_path / "cache" / "layers").glob("*.json")
    file.write_text(file.read_text().replace("/usr/lib/real.so", "/usr/lib/forged.so"))
    return file, lambda: cache.get(digest), None  # not trusted: read from the registry again


FORGERIES = {"policy": _forge_policy, "matrix": _forge_matrix, "layer": _forge_layer}


@pytest.mark.parametrize("cache", sorted(FORGERIES))
def test_a_cache_file_in_a_directory_others_can_write_is_a_miss(
    cache: str, tmp_path: Path, group_umask: None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    file, read, real = FORGERIES[cache](tmp_path)
    assert read() != real  # private: the (edited) file is what the cache answers
    os.chmod(file.parent, 0o775)  # as created under umask 002 before: anyone in the group may plant
    monkeypatch.setattr(cachefile, "_TOLD", [])
    with caplog.at_level(logging.DEBUG, logger="builder.cachefile"):
        assert read() == real
        assert read() == real
    said = [r for r in caplog.records if r.name == "builder.cachefile"]
    assert len(said) == 1 and "not private" in said[0].getMessage()  # once, at debug level
    assert said[0].levelno == logging.DEBUG


@pytest.mark.parametrize("cache", sorted(FORGERIES))
def test_a_cache_file_others_can_write_is_a_miss(cache: str, tmp_path: Path) -> None:
    file, read, real = FORGERIES[cache](tmp_path)
    os.chmod(file, 0o666)
    assert read() == real


@AS_ROOT
@pytest.mark.parametrize("cache", sorted(FORGERIES))
def test_a_cache_file_of_another_user_is_a_miss(cache: str, tmp_path: Path) -> None:
    file, read, real = FORGERIES[cache](tmp_path)
    os.chown(file, 4242, 4242)
    assert read() == real
