"""Machine-local cache files of what builder validated once per content (``<state_dir>/cache``):
the matrices' variants (``builder.matrix.index``) and loaded policies (``builder.policy.cache``).

Two things every such cache needs, defined once:

- :func:`code_stamp`: a line per source file of builder that shapes the cached answer (its path,
  size and modification time), hashed into the cache key, so an edited builder never reads an
  answer an older one computed;
- :func:`write_json`: the file written atomically (a temporary file in the same directory, then
  ``os.replace``, atomic on POSIX: https://docs.python.org/3/library/os.html#os.replace), so a
  reader never sees half a file; a directory that cannot be written only costs the speed-up.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

import builder

PACKAGE = Path(builder.__file__).parent
"""builder's package directory (where :func:`code_stamp` names are looked up)."""
_SOURCE_SUFFIXES = (".py", ".csv", ".json")


@functools.cache
def code_stamp(names: tuple[str, ...]) -> str:
    """``"<path> <size> <mtime_ns>\\n"`` for every source (``.py``, ``.csv``, ``.json``) of builder
    under ``names`` (paths relative to the package: ``"policy"``, ``"signing/keys.py"``), sorted,
    with builder's version first; computed once per process (a command asks for each cache's
    stamp once or twice). Missing names are skipped. Raises OSError when a file vanishes while it
    is read."""
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
        lines.append(f"{os.path.relpath(src, root)} {st.st_size} {st.st_mtime_ns}\n")
    return "".join(lines)


def write_json(file: Path, doc: object) -> bool:
    """Write ``doc`` as compact JSON to ``file`` atomically (parents created); False when the
    directory cannot be written (nothing is left behind), True when written."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
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
