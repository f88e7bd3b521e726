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


@pytest.mark.parametrize("cache", sorted(FORGERIES))
def test_a_cache_file_of_another_user_is_a_miss(cache: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file, read, real = FORGERIES[cache](tmp_path)
    if os.geteuid() == 0:
        os.chown(file, 4242, 4242)
    else:  # only root gives a file away (CI runs as a user): this process is another user instead
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    assert read() == real


def test_a_fifo_planted_as_a_cache_file_is_a_miss_at_once(tmp_path: Path) -> None:
    """Whoever could write a cache directory could put a FIFO under a cache file's name: it is read
    as a miss, without waiting for a writer (which would hang the command)."""
    import threading

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    fifo = cache / "policy-0.json"
    os.mkfifo(fifo, 0o600)
    got: list[bytes | None] = []
    reader = threading.Thread(target=lambda: got.append(cachefile.read_private(fifo, cache)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # blocked opening the FIFO: give it a writer (then EOF) so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
    assert got == [None]


# ------------------------------------------------------------------------------- code stamps


@pytest.fixture
def package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of builder's sources that ``code_stamp`` judges instead of the installed package
    (its memos cleared before and after: they are per process)."""
    copy = tmp_path / "builder"
    shutil.copytree(cachefile.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cachefile, "PACKAGE", copy)
    cachefile.code_stamp.cache_clear()
    cachefile.code_digest.cache_clear()
    yield copy
    cachefile.code_stamp.cache_clear()
    cachefile.code_digest.cache_clear()


def test_a_source_replaced_with_the_same_size_and_time_is_another_stamp(package_copy: Path) -> None:
    """``cp -p``, an unpacked wheel or a checkout keep size and modification time; the inode tells."""
    source = package_copy / "signing" / "verify.py"
    before = cachefile.code_stamp(("signing",))
    st = source.stat()
    edited = source.read_bytes().replace(b"def ", b"def_", 1)
    assert len(edited) == st.st_size
    replacement = source.with_suffix(".new")
    replacement.write_bytes(edited)
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    replacement.replace(source)
    cachefile.code_stamp.cache_clear()
    assert cachefile.code_stamp(("signing",)) != before


def test_the_stamp_names_the_installed_library_versions() -> None:
    """Another cryptography, pydantic or ruamel.yaml may parse, validate or verify differently."""
    import cryptography
    import pydantic
    import pydantic_core
    import ruamel.yaml

    stamp = cachefile.code_stamp(("errors.py",))
    for project, version in (
        ("cryptography", cryptography.__version__),
        ("pydantic", pydantic.VERSION),
        ("pydantic_core", pydantic_core.__version__),
        ("ruamel_yaml", ruamel.yaml.__version__),
    ):
        assert f"/{project}-{version}.dist-info " in stamp, (project, version, stamp)


def test_a_layer_summary_written_by_other_code_is_a_miss(package_copy: Path, tmp_path: Path) -> None:
    cache = LayerCache(tmp_path / "layers")
    summary = LayerSummary("sha256:" + "c" * 64, 10, ("/usr/lib/libk.so",))
    cache.put(summary)
    assert cache.get(summary.digest) == summary
    elf = package_copy / "image" / "elf.py"
    elf.write_text(elf.read_text() + "\n# a new ELF reader\n")
    cachefile.code_stamp.cache_clear()
    cachefile.code_digest.cache_clear()
    assert cache.get(summary.digest) is None
    cache.put(summary)
    assert cache.get(summary.digest) == summary


def _builder_imports(source: Path) -> set[str]:
    """The builder modules ``source`` imports (at module level or inside a function)."""
    import ast

    out: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder."):
            out.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "builder":
            out.update(f"builder.{a.name}" for a in node.names)
    return out


def _judged(module: str, names: tuple[str, ...]) -> bool:
    rel = module.removeprefix("builder.").replace(".", "/")
    return any(rel == n.removesuffix(".py") or rel.startswith(f"{n}/") for n in names)


#: What a verdict's sources import that does not shape a kept (verified) verdict, and why.
NOT_VERDICT_JUDGES = {
    "builder.errors": "exception classes: a kept verdict raised none",
    "builder.__version__": "builder's version is in every stamp",
    "builder.cachefile": "the stamp itself; the file's shape is verdict_cache.FORMAT",
    "builder.promote.pool": "reads each repository's file once per run",
    "builder.models": "provenance writer types (signing/provenance.py writes, never verifies)",
    "builder.outputs": "key-folder write errors (signing/keys.py)",
    "builder.process": "runs registry credential helpers (registry/auth.py): no byte judged",
    "builder.config": "the project's registry settings (registry/reference.py): where to read",
    "builder.lockfile": "lock files writers take (promote/context.py, signing/layer.py): no byte judged",
    "builder.lazy": "loads a package's modules on first use (registry/__init__.py): judges nothing",
    "builder.hosts": "whether a host is loopback (registry/environment.py: which proxy applies): judges nothing",
    # promote/context.py opens a promotion; only its KeylessOnFirstUse shapes a verdict
    **dict.fromkeys(
        ("builder.ledger", "builder.policy", "builder.policy.cache", "builder.policy.validation"),
        "promote/context.py opens a promotion: not a verdict",
    ),
    **dict.fromkeys(
        ("builder.promote.gitref", "builder.promote.location", "builder.promote.model", "builder.promote.newest_seen"),
        "promote/context.py: not a verdict",
    ),
}
#: The same for a layer summary.
NOT_LAYER_JUDGES = {
    "builder.errors": "exception classes: a kept summary raised none",
    "builder.cachefile": "the stamp itself; the file's shape is layers.CACHE_FORMAT",
    "builder.process": "runs external commands; no part of a summary",
    "builder.image": "the package (its __init__ re-exports)",
    "builder.registry.client": "type only (the blob is read through registry/stream.py)",
    "builder.registry.manifest": "type only (Descriptor)",
    "builder.registry.response": "type only",
}


@pytest.mark.parametrize("cache", ["verdicts", "layers"])
def test_every_builder_module_a_judged_source_imports_is_judged_or_named(cache: str) -> None:
    """A module that a judged source calls can change the cached answer: it is judged too, or named
    here with the reason it cannot."""
    from builder.image.layers import LAYER_CODE
    from builder.promote.verdict_cache import JUDGES

    names, excused = (JUDGES, NOT_VERDICT_JUDGES) if cache == "verdicts" else (LAYER_CODE, NOT_LAYER_JUDGES)
    paths = [cachefile.PACKAGE / n for n in names]
    sources = [f for p in paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p]) if f.suffix == ".py"]
    unjudged = {
        m: str(f.relative_to(cachefile.PACKAGE))
        for f in sources
        for m in _builder_imports(f)
        if not _judged(m, names) and m not in excused
    }
    assert not unjudged, unjudged
