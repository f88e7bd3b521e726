"""Machine-local cache files of what builder validated once per content (``<state_dir>/cache``):
the matrices' variants (``builder.matrix.index``) and loaded policies (``builder.policy.cache``).

Two things every such cache needs, defined once:

- :func:`code_stamp`: a line per source file of builder that shapes the cached answer (its path,
  inode, size and modification time: a file replaced with the same size and time is another
  inode) and the installed versions of the libraries that parse, validate and verify
  (:data:`LIBRARIES`), hashed into the cache key, so an edited builder or an upgraded library never
  reads an answer an older one computed. Cheap enough for every start: one ``os.stat`` per judged
  file and one ``os.scandir`` of each ``site-packages`` directory on ``sys.path`` holding a
  library (no ``importlib.metadata``, no hashing of sources);
- :func:`write_json`: the file written atomically (a temporary file in the same directory, then
  ``os.replace``, atomic on POSIX: https://docs.python.org/3/library/os.html#os.replace), so a
  reader never sees half a file; a directory that cannot be written only costs the speed-up.
  Missing directories are created ``0700`` (like the key directory), whatever the umask;
- :func:`read_private`: a cache file is trusted only while it and every directory from the cache's
  root down to it are owned by the current user and writable by no one else (``st_uid``,
  ``st_mode & 0o022``: https://docs.python.org/3/library/os.html#os.stat_result); otherwise another
  local user could plant an answer (a verdict, a policy), so it is read as a miss, said once per
  process at debug level on the ``builder.cachefile`` logger.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
import sys
from pathlib import Path

import builder

LOG = logging.getLogger("builder.cachefile")
_TOLD: list[str] = []  # the first distrusted path this process met (said once)

PACKAGE = Path(builder.__file__).parent
"""builder's package directory (where :func:`code_stamp` names are looked up)."""
_SOURCE_SUFFIXES = (".py", ".csv", ".json")
LIBRARIES = {
    "cryptography": "cryptography",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic-core",
    "ruamel": "ruamel-yaml",
}
"""The libraries whose version may change a cached answer (import directory -> normalized project
name of its ``*.dist-info``,
https://packaging.python.org/en/latest/specifications/recording-installed-packages/): keys
(cryptography), YAML (ruamel.yaml) and schemas (pydantic)."""


@functools.cache
def code_stamp(names: tuple[str, ...]) -> str:
    """``"<path> <inode> <size> <mtime_ns>\\n"`` for every source (``.py``, ``.csv``, ``.json``) of
    builder under ``names`` (paths relative to the package: ``"policy"``, ``"signing/keys.py"``),
    sorted, with builder's version first and :func:`library_stamp` last; computed once per process
    (a command asks for each cache's stamp once or twice). Missing names are skipped. Raises
    OSError when a file vanishes while it is read."""
    root = str(PACKAGE)
    files: list[str] = []
    for name in names:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            found = [
                os.path.join(top, f)
                for top, _dirs, names_in in os.walk(path)
                for f in names_in
                if f.endswith(_SOURCE_SUFFIXES)
            ]
            files.extend(sorted(found))
        elif os.path.isfile(path):
            files.append(path)
    lines = [f"builder={builder.__version__}\n"]
    for src in files:
        st = os.stat(src)
        lines.append(f"{os.path.relpath(src, root)} {st.st_ino} {st.st_size} {st.st_mtime_ns}\n")
    lines.append(library_stamp())
    return "".join(lines)


@functools.cache
def code_digest(names: tuple[str, ...]) -> str:
    """The sha256 hex of :func:`code_stamp` (for a cache that stores its stamp in each file).
    Raises OSError as ``code_stamp``."""
    return hashlib.sha256(code_stamp(names).encode()).hexdigest()


@functools.cache
def library_stamp() -> str:
    """Python's version, then ``"<dir>/<name>.dist-info <inode>\\n"`` for each installed
    :data:`LIBRARIES` project (its name carries the version; a reinstall is a new directory), from
    one ``os.scandir`` of each ``site-packages``/``dist-packages`` directory on ``sys.path`` that
    holds one of them; once per process."""
    lines = [f"python={sys.version}\n"]
    for entry in sys.path:
        if os.path.basename(entry) not in ("site-packages", "dist-packages"):
            continue
        try:
            found = {e.name: e.inode() for e in os.scandir(entry)}
        except OSError:
            continue
        if not found.keys() & LIBRARIES.keys():
            continue
        wanted = set(LIBRARIES.values())
        for name in sorted(found):
            if name.endswith(".dist-info") and _project(name) in wanted:
                lines.append(f"{entry}/{name} {found[name]}\n")
    return "".join(lines)


def _project(dist_info: str) -> str:
    """The normalized project name of a ``<name>-<version>.dist-info`` directory name (``-`` in a
    name is written ``_`` there, so the first ``-`` ends it)."""
    return dist_info.removesuffix(".dist-info").split("-", 1)[0].lower().replace("_", "-").replace(".", "-")


def write_json(file: Path, doc: object) -> bool:
    """Write ``doc`` as compact JSON to ``file`` atomically (parents created); False when the
    directory cannot be written (nothing is left behind), True when written."""
    try:
        make_private_dirs(file.parent)
        import tempfile  # only to write (tempfile pulls shutil, bz2, lzma, random: start-up, #19)

        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.stem}-", suffix=".tmp")
    except OSError:
        return False
    written = False
    try:
        with os.fdopen(fd, "w") as f:
            # dumps, not dump: dump streams through the pure-Python encoder (about 10x slower)
            f.write(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, file)
        written = True
    except OSError:
        return False
    finally:
        if not written:
            Path(tmp).unlink(missing_ok=True)
    return True


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, each ``0700`` (``os.mkdir`` mode; a umask only
    removes bits). Existing directories are left as they are. Raises OSError."""
    missing: list[Path] = []
    d = Path(directory)
    while not d.is_dir():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            if not m.is_dir():
                raise


def read_private(file: Path, root: Path) -> bytes | None:
    """The bytes of the cache file ``file`` (under the cache directory ``root``), or None when it
    cannot be read, is not a regular file or is not private: the file (opened without following a
    symbolic link nor waiting on a FIFO, checked by ``fstat`` on what was opened), ``root`` or a
    directory between them is owned by another user or writable by group or others
    (:func:`private`)."""
    try:
        # O_NONBLOCK: a FIFO planted under the name is opened without waiting for a writer
        nonblock = getattr(os, "O_NONBLOCK", 0)
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | nonblock)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not private(st, file):
                return None
            d, top = Path(file).parent, Path(root)
            dirs = [d]
            while top in d.parents:  # up to root, when the file is under it
                d = d.parent
                dirs.append(d)
            if not all(private(os.stat(x), x) for x in dirs):
                return None
            return f.read()
        except OSError:
            return None


def private(st: os.stat_result, path: Path) -> bool:
    """Whether ``st`` (of ``path``) is owned by this process's user and not writable by group or
    others; the first path found otherwise is said once per process (debug level)."""
    if st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return True
    if not _TOLD:
        _TOLD.append(str(path))
        LOG.debug(
            "cache %s is not private (owner uid %d, mode %o): its cached answers are not used;"
            " remove it or `chmod go-w` it",
            path,
            st.st_uid,
            stat.S_IMODE(st.st_mode),
        )
    return False
