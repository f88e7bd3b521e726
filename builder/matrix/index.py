"""The variants of a set of matrix files (and the policy and fleet each names), validated once
per content: commands that only look a variant up or need the policy the matrices name
(``resolve``, ``status``, ``history``, ``promote``) read them back from a machine-local cache
instead of parsing and validating every matrix on each call.

``cached_variants(paths, cache_dir)`` returns exactly what ``load_matrices(paths)`` gives (every
variant, in order). Each matrix file is read once (``files.read_matrix_text``: at most
``yamldoc.MAX_BYTES``, the loader's errors) and that text is both hashed and, on a miss, parsed: an
edit landing while it loads is never stored under the old text's key. The cache file
``<cache_dir>/variants-<key>.json`` is keyed by a sha256 over the files' paths and bytes and the
code stamp (``builder.cachefile.code_stamp``: builder's version, the inode, size and modification
time of builder's own matrix, compatibility and model sources (``builder/matrix``,
``builder/compat`` with its data tables, ``builder/models``, ``builder/bases.py``), Python's and
the parsing libraries' versions): any edit to a matrix or to the code that expands it gives a new
key, so a stale answer is never read. A miss loads and validates as before (MatrixError for an invalid
matrix, nothing cached) and writes the file atomically (a state directory that cannot be written
only costs the speed-up).

Shapes: variants are stored as JSON objects of :class:`builder.models.Variant` fields (nested
dataclasses as objects, tuples as arrays) and rebuilt with the field types.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from builder.cachefile import code_stamp, read_private, write_json
from builder.errors import BuilderError, ConfigError, MatrixError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.config import Config
    from builder.models import Variant  # decoded from the cache only where variants are asked for

_T = TypeVar("_T")

#: Bumped when the stored shape changes.
CACHE_SCHEMA = 2
#: Sources whose change may change the variants of the same matrix bytes.
#: (yamldoc and textfiles: the loader reads and parses with them)
_CODE = ("matrix", "compat", "models", "bases.py", "yamldoc.py", "textfiles.py")
#: Cache files this process read or wrote, by file (whose name is the content's key).
_READ: dict[Path, _Entry] = {}
#: Matrix files a lookup left out (they do not load), with the first problem, until taken.
_SKIPPED: dict[Path, str] = {}


def cache_key(paths: Sequence[Path], texts: Sequence[str]) -> str:
    """The key of ``paths``' variants: their paths and ``texts`` (the files' texts, read once by
    ``files.read_matrix_text``: the very texts then parsed) and ``cachefile.code_stamp(_CODE)``
    (builder's version, each source's inode, size and mtime, the library versions). Raises OSError
    when a source vanishes while read."""
    h = hashlib.sha256(f"schema={CACHE_SCHEMA}\n{code_stamp(_CODE)}".encode())
    for p, text in zip(paths, texts, strict=True):
        data = text.encode()
        h.update(f"{Path(p).resolve()} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()[:40]


@dataclasses.dataclass(frozen=True)
class MatrixNames:
    """What one matrix file names besides its variants: ``policy`` and ``fleet`` as written
    (None: nothing), for the promotion commands' default policy and fleet."""

    path: Path
    policy: str | None = None
    fleet: str | None = None


@dataclasses.dataclass(frozen=True)
class MatrixIndex:
    """The validated matrices in short: every variant (``load_matrices`` order) and what each
    file names (``MatrixNames``, file order)."""

    variants: tuple[Variant, ...]
    matrices: tuple[MatrixNames, ...]


class IndexedVariant(NamedTuple):
    """A variant as the index names it, read without decoding it (:func:`variant_names`): its
    ``id`` and ``repository`` (relative to the registry, not under the repository prefix)."""

    id: str
    repository: str


def matrix_index(paths: Sequence[Path], cache_dir: Path | None) -> MatrixIndex:
    """The :class:`MatrixIndex` of ``paths``, from the cache when its key matches (``cache_dir``
    None: no cache). Raises MatrixError / ConfigError as ``load_matrices`` does."""
    if cache_dir is None:
        return _load(paths)
    file, texts = _cache_file(paths, cache_dir)
    if file is None:  # builder's sources changing under it (a reinstall): loaded, not cached
        return _load(paths, texts)
    entry = _entry(file)
    found = entry.decoded() if entry is not None else None  # a command asking twice decodes it once
    if found is None:
        found = _load(paths, texts)
        _write(file, found)
        _READ[file] = _Entry(None, found.matrices, found)
    return found


def matrix_names(paths: Sequence[Path], cache_dir: Path | None, *, skip_broken: bool = True) -> tuple[MatrixNames, ...]:
    """What each matrix file of ``paths`` names (file order), as :func:`matrix_index` has it, from
    the cache without decoding a variant (the promotion commands' default policy, issue 19);
    :func:`matrix_index`'s on a miss (which fills the cache). ``skip_broken``: a file that does
    not load is left out (:func:`_readable`, :func:`take_skipped_matrices`) instead of failing
    every command that only looks names up. Raises what :func:`matrix_index` raises otherwise."""
    return _each_readable(paths, skip_broken, lambda ps: _matrix_names(ps, cache_dir), cache_dir)


def _matrix_names(paths: Sequence[Path], cache_dir: Path | None) -> tuple[MatrixNames, ...]:
    entry = _entry_for(paths, cache_dir)
    return entry.matrices if entry is not None else matrix_index(paths, cache_dir).matrices


def variant_names(
    paths: Sequence[Path], cache_dir: Path | None, *, skip_broken: bool = True
) -> tuple[IndexedVariant, ...]:
    """Every variant's id and repository (:func:`matrix_index` order), from the cache without
    decoding a variant: what ``builder resolve VARIANT`` needs of the matrices, with no work per
    variant besides reading two strings (start-up, issue 19). :func:`matrix_index`'s variants on a
    miss or a stored variant without string ``id`` / ``repository``. ``skip_broken``: as
    :func:`matrix_names` (a broken ``pytorch.yaml`` never stops ``resolve jax...``). Raises what
    :func:`matrix_index` raises otherwise."""
    return _each_readable(paths, skip_broken, lambda ps: _variant_names(ps, cache_dir), cache_dir)


def _each_readable(
    paths: Sequence[Path], skip_broken: bool, read: Callable[[Sequence[Path]], tuple[_T, ...]], cache_dir: Path | None
) -> tuple[_T, ...]:
    """``read(paths)``; when that raises MatrixError / ConfigError and ``skip_broken``, ``read`` of
    the files that load on their own, together and in order (:func:`_readable`), the others left
    out and recorded for :func:`take_skipped_matrices`. Raises the first error when no file is to
    blame alone, and what ``read`` of the readable files raises (a variant id two of them produce)."""
    try:
        return read(paths)
    except (MatrixError, ConfigError):
        readable = _readable(paths, cache_dir) if skip_broken else None
        if readable is None:
            raise
        return read(readable)  # together: a problem between them (one id in two files) still stands


def take_skipped_matrices() -> tuple[tuple[Path, str], ...]:
    """The matrix files left out of a lookup since the last call because they do not load
    (:func:`matrix_names`, :func:`variant_names`, :func:`cached_variants` with ``skip_broken``),
    each once with its first problem (``LINE:COL: message``), and forgotten: what a command says
    on stderr as a warning when it ends (``builder.cli._common.AppContext.close``)."""
    taken = tuple(_SKIPPED.items())
    _SKIPPED.clear()
    return taken


def _readable(paths: Sequence[Path], cache_dir: Path | None) -> list[Path] | None:
    """The files of ``paths`` that load on their own (each then validated and cached alone), after
    loading them together failed; the others recorded in :data:`_SKIPPED`. None when no file is
    to blame on its own (one file given, or a problem between files such as one variant id in
    two matrices): then that failure stands."""
    if len(paths) < 2:
        return None
    readable: list[Path] = []
    for p in paths:
        try:
            matrix_index([p], cache_dir)
        except (MatrixError, ConfigError) as exc:
            _SKIPPED[Path(p)] = _first_problem(exc)
        else:
            readable.append(Path(p))
    return readable if len(readable) < len(paths) else None


def _first_problem(exc: BuilderError) -> str:
    """``LINE:COL: message`` of the first of ``exc``'s problems (``details['problems']``, as
    ``yamldoc.Problem.to_json`` gives them), and how many more; else the message's first line."""
    problems = exc.details.get("problems")
    if isinstance(problems, list) and problems and isinstance(problems[0], dict):
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{first.get('line')}:{first.get('col')}: {first.get('message')}{more}"
    return exc.message.splitlines()[0]


def _variant_names(paths: Sequence[Path], cache_dir: Path | None) -> tuple[IndexedVariant, ...]:
    entry = _entry_for(paths, cache_dir)
    if entry is not None and entry.index is None and entry.items is not None:
        names: list[IndexedVariant] = []
        for item in entry.items:
            vid, repository = item.get("id"), item.get("repository")
            if not (isinstance(vid, str) and isinstance(repository, str)):
                break
            names.append(IndexedVariant(vid, repository))
        else:
            return tuple(names)
    return tuple(IndexedVariant(v.id, v.repository) for v in matrix_index(paths, cache_dir).variants)


def _cache_file(paths: Sequence[Path], cache_dir: Path) -> tuple[Path | None, list[str]]:
    """The cache file of ``paths`` (None when the key cannot be computed: a source vanished) and the
    files' texts (read once, with the loader's limit and errors: parsed as hashed)."""
    from builder.matrix.files import read_matrix_text

    texts = [read_matrix_text(Path(p)) for p in paths]
    try:
        return cache_dir / f"variants-{cache_key(paths, texts)}.json", texts
    except OSError:
        return None, texts


def _entry_for(paths: Sequence[Path], cache_dir: Path | None) -> _Entry | None:
    """The cache file of ``paths`` as read (:func:`_entry`); None without a usable one."""
    if cache_dir is None:
        return None
    file, _ = _cache_file(paths, cache_dir)
    return None if file is None else _entry(file)


def project_index(cfg: Config) -> MatrixIndex:
    """Every variant of ``cfg``'s matrices (``matrices_dir``) and what each matrix names, from
    :func:`matrix_index` (parsed and validated once per content, read back from ``<state_dir>/cache``):
    enough for variant ids, repositories and declared checks (a variant id's image reference,
    :func:`builder.selection.variant_reference`). Each variant's ``repository`` is its registry
    repository, under ``cfg.repository_prefix`` (:meth:`Config.repository`). Raises MatrixError,
    NotFoundError (no matrices)."""
    from builder.matrix.files import matrix_paths

    index = matrix_index(matrix_paths(cfg.matrices_dir), cfg.state_dir / "cache")
    if not cfg.repository_prefix:
        return index
    return dataclasses.replace(
        index, variants=tuple(dataclasses.replace(v, repository=cfg.repository(v.repository)) for v in index.variants)
    )


def cached_variants(paths: Sequence[Path], cache_dir: Path | None, *, skip_broken: bool = True) -> tuple[Variant, ...]:
    """Every variant of ``paths`` (``load_matrices`` order): :func:`matrix_index`'s. ``skip_broken``:
    as :func:`matrix_names` (the promotion commands look variants up; a broken unrelated matrix
    is a warning, :func:`take_skipped_matrices`). Raises what :func:`matrix_index` raises otherwise."""
    return _each_readable(paths, skip_broken, lambda ps: matrix_index(ps, cache_dir).variants, cache_dir)


def _load(paths: Sequence[Path], texts: Sequence[str] | None = None) -> MatrixIndex:
    from builder.matrix.load import load_matrices  # parsing and validation: only on a miss

    matrices = load_matrices(paths, texts=texts)
    return MatrixIndex(
        tuple(v for m in matrices for v in m.variants),
        tuple(MatrixNames(m.path, m.policy, m.fleet) for m in matrices),
    )


class _Entry:
    """A cache file this process read or wrote: its variants as stored (``items``: JSON objects, not
    decoded; None when this process built the index) and each matrix's names, and the index decoded
    from them when first asked for (:meth:`decoded`)."""

    __slots__ = ("index", "items", "matrices")

    def __init__(
        self, items: list[dict[str, object]] | None, matrices: tuple[MatrixNames, ...], index: MatrixIndex | None
    ) -> None:
        self.items, self.matrices, self.index = items, matrices, index

    def decoded(self) -> MatrixIndex | None:
        """The index, every variant decoded once; None when a stored variant does not decode (the
        index is then rebuilt)."""
        if self.index is None and self.items == []:  # no variant stored: nothing to decode, no class made
            self.index = MatrixIndex((), self.matrices)
        if self.index is None and self.items is not None:
            from builder.models import Variant  # decoding only: names are read without it

            try:
                variants = tuple(cast("Variant", _decode(Variant, item)) for item in self.items)
            except (ValueError, KeyError, TypeError, AttributeError):
                return None
            self.index = MatrixIndex(variants, self.matrices)
        return self.index


def _entry(file: Path) -> _Entry | None:
    """The cache file as read once per process (:class:`_Entry`), or None when there is no usable
    file (missing, another schema, or not the expected shape: then it is rebuilt)."""
    if file in _READ:
        return _READ[file]
    data = read_private(file, file.parent)  # a file others could have written: a miss
    if data is None:
        return None
    try:
        doc = json.loads(data)
        items = doc["variants"]
        if doc.get("schema") != CACHE_SCHEMA or not isinstance(items, list):
            return None
        if not all(isinstance(item, dict) for item in items):
            return None
        names = tuple(MatrixNames(Path(m["path"]), m["policy"], m["fleet"]) for m in doc["matrices"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    _READ[file] = _Entry(items, names, None)
    return _READ[file]


def _write(file: Path, index: MatrixIndex) -> None:
    """Write ``file`` atomically (temporary file + rename); an unwritable directory is left as it is."""
    doc = {
        "schema": CACHE_SCHEMA,
        "variants": [dataclasses.asdict(v) for v in index.variants],
        "matrices": [{"path": str(m.path), "policy": m.policy, "fleet": m.fleet} for m in index.matrices],
    }
    write_json(file, doc)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, object], ...]:
    """(name, resolved type) of each init field of the dataclass ``cls`` (string annotations
    evaluated once per class)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init)


def _decode(hint: object, value: object) -> object:
    """``value`` (parsed JSON) as the type ``hint``: dataclasses from objects, tuples from arrays,
    ``X | None`` from null or X; other values as they are. TypeError/KeyError for another shape,
    ValueError for a fixed-length tuple of another length."""
    return _decoder(hint)(value)


def _as_is(value: object) -> object:
    return value


@functools.cache
def _decoder(hint: object) -> Callable[[object], object]:
    """The function that decodes a value of type ``hint`` (:func:`_decode`'s rules), built once per
    type: a variant's ~70 values are decoded without asking ``typing`` about each field's type
    again (4.2 -> about 1 ms for the demo's 35 variants; start-up of resolve, issue 19)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        cls = hint
        fields = tuple((name, _decoder(t)) for name, t in _fields(cls))

        def decode_dataclass(value: object) -> object:
            if not isinstance(value, dict):
                raise TypeError(f"{cls.__name__}: expected an object, got {type(value).__name__}")
            return cls(**{name: decode(value[name]) for name, decode in fields})

        return decode_dataclass
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(arms) != 1:
            return _as_is
        arm = _decoder(arms[0])
        return lambda value: None if value is None else arm(value)
    if origin is tuple:
        args = typing.get_args(hint)

        def array(value: object) -> list[object]:
            if not isinstance(value, list):
                raise TypeError(f"expected an array, got {type(value).__name__}")
            return value

        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda value: tuple(item(v) for v in array(value))
        items = tuple(_decoder(a) for a in args)
        return lambda value: tuple(decode(v) for decode, v in zip(items, array(value), strict=True))
    return _as_is
