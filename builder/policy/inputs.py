"""The files a loaded policy depends on besides its own text: the public key files it names, what
each key ``file`` glob matched, and the fleet files of its ``fleet`` rules.

A policy's trust changes with them (a replaced key file is another fingerprint; a key added to
``keys/check-runners/*.pub`` joins a key set), so ``builder.policy.cache`` may reuse a loaded policy
only while every one of them is as the loader read it. The loader reads them through
:class:`PolicyInputs`, which reads each file once per load and hands the same bytes to every later
read of that path (a policy naming ``keys/builder.pub`` for two key sets binds one key to both even
when the file is replaced while it loads), keeps the sha256 of those very bytes (a file replaced
during the load is never recorded with the other content) and the sorted matches of each glob.

:func:`read_policy_text` reads the policy file itself, the one way (the loader and the cache).

Shapes: ``files`` maps an absolute path to the hex sha256 of its bytes, or None when it could not
be read (missing, a directory, no permission: a later readable file is a change); ``globs`` maps
an absolute glob pattern to the sorted regular files it matched.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import hashlib
import os
from pathlib import Path

from builder.errors import NotFoundError, PolicyError
from builder.textfiles import MAX_BYTES, TooLarge, read_text


@dataclasses.dataclass
class PolicyInputs:
    """What the loader read, recorded as it read it (mutable while one policy loads)."""

    files: dict[str, str | None] = dataclasses.field(default_factory=dict)
    globs: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    _read: dict[str, bytes | OSError] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def read(self, path: Path) -> bytes:
        """The bytes of ``path``, recorded with their sha256; read from disk (:func:`read_input`)
        on the first read of ``path`` (by absolute name) only, every later read gets the same
        bytes (or error). Raises OSError (recorded as None)."""
        name = str(Path(path).absolute())
        if name not in self._read:
            try:
                self._read[name] = read_input(Path(path))
            except OSError as exc:
                self._read[name] = exc
        got = self._read[name]
        if isinstance(got, OSError):
            self.files[name] = None
            raise got
        self.files[name] = hashlib.sha256(got).hexdigest()
        return got

    def expand(self, pattern: str) -> tuple[str, ...]:
        """The regular files ``pattern`` (a ``glob.glob`` pattern) matches, sorted, as ``glob.glob``
        names them (relative to the working directory for a relative pattern); recorded with
        absolute paths, the working directory escaped (``glob.escape``)."""
        found = _matches(pattern)
        absolute = pattern if os.path.isabs(pattern) else os.path.join(glob.escape(os.getcwd()), pattern)
        self.globs[absolute] = tuple(sorted(str(Path(m).absolute()) for m in found))
        return found

    def to_json(self) -> dict[str, object]:
        """``{"files": {path: sha256|null}, "globs": {pattern: [path, ...]}}``."""
        return {"files": dict(self.files), "globs": {k: list(v) for k, v in self.globs.items()}}


def unchanged(doc: object) -> bool:
    """Whether the inputs recorded in ``doc`` (:meth:`PolicyInputs.to_json`) are all still as they
    were read: every file's bytes hash the same (or it is still unreadable) and every glob matches
    the same files. False for a document of another shape."""
    if not isinstance(doc, dict):
        return False
    files, globs = doc.get("files"), doc.get("globs")
    if not isinstance(files, dict) or not isinstance(globs, dict):
        return False
    for pattern, found in globs.items():
        if not isinstance(found, list) or list(_matches(pattern)) != found:
            return False
    for name, digest in files.items():
        try:
            now: str | None = hashlib.sha256(read_input(Path(name))).hexdigest()
        except OSError:
            now = None
        if now != digest:
            return False
    return True


def read_input(path: Path) -> bytes:
    """The bytes of a key or fleet file, at most ``yamldoc.MAX_BYTES`` read (as the loader reads a
    YAML document): a larger file, or an endless one (``/dev/zero``, a FIFO), raises
    ``yamldoc.TooLarge`` (an OSError) instead of being read into memory. Raises OSError."""
    with path.open("rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        limit = f"larger than the {MAX_BYTES // (1024 * 1024)} MiB limit for a policy's key or fleet file"
        raise TooLarge(errno.EFBIG, limit, str(path))
    return data


def read_policy_text(path: Path) -> str:
    """The text of the policy file ``path`` (UTF-8, at most ``yamldoc.MAX_BYTES``). Raises
    NotFoundError (8) when it does not exist, PolicyError (30) when it cannot be read or is not
    UTF-8."""
    try:
        return read_text(path)
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"policy file {path} does not exist",
            hint="run builder inside your checkout or pass `builder -C DIR`; or create it (docs/policies.md) "
            "or pass --policy FILE",
        ) from exc
    except OSError as exc:
        raise PolicyError(f"policy file {path} cannot be read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy file {path} is not UTF-8 text: {exc}", hint="a policy is a UTF-8 YAML file") from exc


def _matches(pattern: str) -> tuple[str, ...]:
    return tuple(sorted(m for m in glob.glob(pattern) if Path(m).is_file()))
