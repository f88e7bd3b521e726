"""Loading matrix files: read the YAML with positions, validate, expand, report every problem.

Validation collects *every* problem of a file (schema, YAML numbers where versions belong,
placeholders, unused rules, impossible cells) as :class:`builder.yamldoc.Problem` values (file,
1-based line and column, field path such as ``axes.accelerator[0]``, message), then raises one
``MatrixError`` whose ``details["problems"]`` is ``[Problem.to_json(), ...]``. Reference:
``docs/matrices.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from builder.errors import MatrixError
from builder.matrix.expand import expand
from builder.matrix.files import read_matrix_text
from builder.matrix.strings import check_strings
from builder.matrix.validate import check_yaml_numbers, validate_schema
from builder.yamldoc import Document, FieldPath, InvalidYaml, Problem, parse

if TYPE_CHECKING:
    from builder.bases import BaseResolution
    from builder.models import Variant


@dataclasses.dataclass(frozen=True)
class Matrix:
    """A loaded, validated matrix. ``name`` is the file stem; ``variants`` sorted by id;
    ``policy`` / ``fleet``: what the matrix names (as written; None: nothing)."""

    name: str
    path: Path
    family: str
    repository: str
    variants: tuple[Variant, ...]
    policy: str | None = None
    fleet: str | None = None


def read_yaml(path: Path, text: str | None = None) -> tuple[Document, str]:
    """(the document with line/column marks, the file's text). ``text``: the file's text when the
    caller read it already (parsed as given). Raises ConfigError when the file does not exist or
    cannot be read (``files.read_matrix_text``), MatrixError (one problem at the error's line) when
    it is not valid YAML."""
    if text is None:
        text = read_matrix_text(path)
    try:
        return parse(text, str(path)), text
    except InvalidYaml as exc:
        raise MatrixError(
            f"{path}:{exc.problem.line}: not valid YAML",
            problems=[exc.problem.to_json()],
            hint="fix the YAML syntax at that line",
        ) from exc


def _problems_of(
    path: Path, bases: BaseResolution | None, text: str | None = None
) -> tuple[Matrix | None, list[Problem]]:
    """Load one file (``text``: its text, read already): (the matrix, []) or (None, every
    problem). ConfigError / MatrixError (not YAML)."""
    doc, text = read_yaml(path, text)
    raw = doc.root
    problems: list[Problem] = []
    index_map: dict[FieldPath, list[int]] = {}

    def original(field_path: Sequence[str | int]) -> FieldPath:
        """A path into the pruned document -> the same node's path in the file."""
        out: list[str | int] = []
        for part in field_path:
            kept = index_map.get(tuple(out))
            out.append(kept[part] if isinstance(part, int) and kept is not None and 0 <= part < len(kept) else part)
        return tuple(out)

    def add(field_path: Sequence[str | int], message: str) -> None:
        problems.append(doc.problem(original(field_path), message))

    if not isinstance(raw, Mapping):
        add((), "a matrix must be a YAML mapping (family, repository, axes, base, ...)")
        return None, problems
    skipped = check_yaml_numbers(raw, add, text)
    check_strings(raw, add)  # strings that reach the Dockerfile: no injection, no secret build args
    spec = validate_schema(raw, add, index_map)
    if spec is None:
        return None, problems
    for section, indices in (("include", skipped.includes), ("exclude", skipped.rules)):
        kept = index_map.get((section,))
        if kept is not None:  # schema errors pruned items: raw indices -> indices in spec
            remapped = {kept.index(i) for i in indices if i in kept}
            indices.clear()
            indices.update(remapped)
    variants = expand(spec, path, add, bases, skipped)
    if problems:
        return None, problems
    matrix = Matrix(path.stem, path, spec.family, spec.repository, variants, spec.policy, spec.fleet)
    return matrix, []


def _raise(prefix: str, problems: Iterable[Problem], *, noun: str = "problem") -> NoReturn:
    """One MatrixError listing the problems (sorted, each once): ``<prefix>N <noun>s:``, one line each."""
    unique = sorted(set(problems), key=lambda p: (p.file, p.line, p.col, p.path, p.message))
    listing = "\n".join(f"  {p}" for p in unique)
    raise MatrixError(
        f"{prefix}{len(unique)} {noun}{'s' if len(unique) != 1 else ''}:\n{listing}",
        problems=[p.to_json() for p in unique],
    )


def load_matrix(path: Path, *, bases: BaseResolution | None = None) -> Matrix:
    """Load, validate and expand one matrix file.

    ``bases``: when given, each variant's ``base`` is resolved (digest from the committed bases
    lock or the machine-local mirror record); otherwise ``base.digest`` is None and ``base.pull``
    is the reference as written. Raises ``MatrixError`` listing every problem with its location,
    ``ConfigError`` when the file does not exist.
    """
    path = Path(path)
    matrix, problems = _problems_of(path, bases)
    if matrix is None:
        _raise(f"{path}: ", problems)
    return matrix


def load_matrices(
    paths: Iterable[Path], *, bases: BaseResolution | None = None, texts: Sequence[str] | None = None
) -> tuple[Matrix, ...]:
    """Load several matrices; problems of all files are collected into one ``MatrixError``.
    ``texts``: the files' texts in ``paths`` order when the caller read them already (what it
    hashed is what is parsed; None: each file read here).

    Also rejects a variant id that two matrices both produce. ConfigError for a missing file.
    """
    matrices: list[Matrix] = []
    problems: list[Problem] = []
    paths = list(paths)
    if texts is not None and len(texts) != len(paths):
        raise ValueError(f"{len(texts)} texts for {len(paths)} matrix files")
    for i, p in enumerate(paths):
        try:
            matrix, found = _problems_of(Path(p), bases, None if texts is None else texts[i])
        except MatrixError as exc:  # not YAML: its one problem, as JSON
            problems.extend(Problem(**item) for item in exc.details.get("problems", []))
            continue
        problems.extend(found)
        if matrix is not None:
            matrices.append(matrix)
    seen: dict[str, str] = {}
    for m in matrices:
        for v in m.variants:
            if v.id in seen:
                problems.append(Problem(str(m.path), 1, 0, "", f"variant id {v.id} is also produced by {seen[v.id]}"))
            seen[v.id] = str(m.path)
    if problems:
        _raise("", problems, noun="matrix problem")
    return tuple(matrices)
