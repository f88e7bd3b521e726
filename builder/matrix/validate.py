"""Validation of a matrix document: the schema (every error, then the rest still checked), version
fields YAML parsed as numbers, and the semantic checks of a schema-valid matrix (axis values,
duplicates, sections, placeholders).

Each problem is reported through a :data:`Report` callback with the field path it concerns
(``("axes", "python", 1)``); :mod:`builder.matrix.load` turns paths into file positions.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from builder.bases import MIRROR_PREFIX
from builder.compat.distros import OS_RE
from builder.matrix.schema import PLATFORMS, Axes, MatrixSpec
from builder.yamldoc import FieldPath, plain

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

#: Records one problem: (field path, message).
Report = Callable[[Sequence[str | int], str], None]

VERSION_RE = re.compile(r"^\d+(\.\d+){0,2}$")
#: A GPU architecture: CUDA ``sm_80``/``compute_90`` (optionally ``a``/``f`` suffixed), ROCm ``gfx942``.
ARCH_RE = re.compile(r"^(sm_\d{2,3}[af]?|compute_\d{2,3}[af]?|gfx[0-9a-f]{3,5})$")


@dataclasses.dataclass
class Skipped:
    """What :func:`check_yaml_numbers` reported, so no cell is built from it: axis values
    (``python:3.1``, ``framework:2.1``, ``accelerator:0``), include cells and exclude rules (indices)."""

    bad: set[str] = dataclasses.field(default_factory=set)
    includes: set[int] = dataclasses.field(default_factory=set)
    rules: set[int] = dataclasses.field(default_factory=set)


#: Placeholders allowed in ``packages``, ``index_url`` and ``base`` strings.
PLACEHOLDERS = (
    "framework",
    "framework_version",
    "accel_kind",
    "accel_version",
    "accel_tag",
    "accel_major",
    "image_version",
    "python",
    "os",
    "os_name",
    "os_version",
    "platform",
    "arch",
)


def check_axes(spec: MatrixSpec, add: Report) -> set[str]:
    """Check the axes and sections; return the invalid axis values (``accelerator:<i>``,
    ``python:<v>``, ``os:<v>``, ``platform:<v>``, ``framework:<v>``) so no cell is built from them."""
    ax = spec.axes
    bad = _check_axis_values(ax, add)
    _check_dupes(add, ("axes", "python"), ax.python)
    _check_dupes(add, ("axes", "os"), ax.os)
    _check_dupes(add, ("axes", "platform"), ax.platform)
    _check_dupes(add, ("axes", "framework", "versions"), ax.framework.versions)
    _check_dupes(add, ("axes", "accelerator"), [f"{a.kind}{a.version or ''}" for a in ax.accelerator])
    kinds = {a.kind for a in ax.accelerator} | {inc.accelerator.kind for inc in spec.include}
    for kind in sorted(kinds):
        if kind not in spec.base and "default" not in spec.base:
            add(("base",), f"no base image for accelerator kind {kind!r} (add `{kind}:` or `default:`)")
    _check_gpu_archs(spec, add)
    for section in ("packages", "index_url", "base", "gpu_archs"):
        for key in getattr(spec, section):
            if key not in ("cuda", "rocm", "cpu", "default"):
                add((section, key), f"unknown key {key!r}: use an accelerator kind (cuda, rocm, cpu) or default")
    _check_placeholders(spec, add)
    for key, value in spec.base.items():
        if value.startswith(MIRROR_PREFIX) and not value[len(MIRROR_PREFIX) :]:
            add(("base", key), "mirror: needs a name, e.g. mirror:debian:bookworm")
    for name in spec.build_args:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            add(("build_args", name), f"build argument name {name!r} is not a valid identifier")
    return bad


def _check_axis_values(ax: Axes, add: Report) -> set[str]:
    """Each axis value on its own (accelerator versions, releases, ``3.X`` pythons, OS names, platforms);
    returns the invalid ones as :func:`check_axes` names them."""
    bad: set[str] = set()
    for i, acc in enumerate(ax.accelerator):
        where: tuple[str | int, ...] = ("axes", "accelerator", i)
        if acc.kind == "cpu":
            if acc.version is not None:
                add((*where, "version"), "a cpu accelerator has no version")
                bad.add(f"accelerator:{i}")
        elif acc.version is None or not re.match(r"^\d+\.\d+$", acc.version):
            add((*where, "version"), f"{acc.kind} needs a version like 12.8 / 6.4 (major.minor), got {acc.version!r}")
            bad.add(f"accelerator:{i}")
        if acc.image_version is not None and (
            not VERSION_RE.match(acc.image_version) or not acc.image_version.startswith(acc.version or "~")
        ):
            add((*where, "image_version"), f"image_version {acc.image_version!r} must extend version {acc.version!r}")
    for i, v in enumerate(ax.framework.versions):
        if not VERSION_RE.match(v):
            add(("axes", "framework", "versions", i), f"framework version {v!r} is not a release like 2.9")
            bad.add(f"framework:{v}")
    for i, py in enumerate(ax.python):
        if not re.match(r"^3\.\d+$", py):
            add(("axes", "python", i), f"python {py!r} must be 3.X")
            bad.add(f"python:{py}")
    for i, os_ in enumerate(ax.os):
        if not OS_RE.match(os_):
            add(("axes", "os", i), f"os {os_!r} must be a name and version like ubuntu24.04 or debian12")
            bad.add(f"os:{os_}")
    for i, plat in enumerate(ax.platform):
        if plat not in PLATFORMS:
            add(("axes", "platform", i), f"platform {plat!r} is not one of {', '.join(PLATFORMS)}")
            bad.add(f"platform:{plat}")
    return bad


def _check_gpu_archs(spec: MatrixSpec, add: Report) -> None:
    """``gpu_archs``: architecture names (``sm_80``, ``compute_90``, ``gfx942``), none for ``cpu``."""
    for key, archs in spec.gpu_archs.items():
        for j, a in enumerate(archs):
            if not ARCH_RE.match(a):
                add(
                    ("gpu_archs", key, j),
                    f"{a!r} is not a GPU architecture like sm_80, compute_90 or gfx942 (no GPU kernels: write [])",
                )
        if key == "cpu" and archs:
            add(("gpu_archs", key), "a cpu image has no GPU architectures (remove the key or write [])")


def _check_placeholders(spec: MatrixSpec, add: Report) -> None:
    """Every ``{placeholder}`` in ``packages``, ``index_url`` and ``base`` is one of :data:`PLACEHOLDERS`."""
    for section in ("packages", "index_url", "base"):
        mapping: dict[str, str | list[str]] = getattr(spec, section)
        for key, value in mapping.items():
            texts = value if isinstance(value, list) else [value]
            for j, text in enumerate(texts):
                loc: tuple[str | int, ...] = (section, key, j) if isinstance(value, list) else (section, key)
                for name in _placeholders(text):
                    if name not in PLACEHOLDERS:
                        add(loc, f"unknown placeholder {{{name}}} (known: {', '.join(PLACEHOLDERS)})")


def _check_dupes(add: Report, where: tuple[str | int, ...], values: Sequence[str]) -> None:
    seen: set[str] = set()
    for i, v in enumerate(values):
        if v in seen:
            add((*where, i), f"duplicate value {v!r}")
        seen.add(v)


def _placeholders(text: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return ["<malformed>"]


_FRIENDLY = {
    "repository": "must be lower-case path components (a-z, 0-9, '.', '_', '-') separated by '/', e.g. ml/pytorch",
    "family": "must be a lower-case name (a-z, 0-9, '_', '-') of a directory in images/",
    "name": "must be a lower-case name such as torch, jax, tensorflow or none",
}


@dataclasses.dataclass
class _Pruning:
    """What to cut from a document so that the rest validates: list items per list path (``removals``), keys
    (``deletions``; ``("__dummy__", key)`` replaces a top-level string by a placeholder); ``fatal`` when a
    required top-level field is missing (nothing else can be checked)."""

    removals: dict[FieldPath, set[int]] = dataclasses.field(default_factory=dict)
    deletions: list[FieldPath] = dataclasses.field(default_factory=list)
    fatal: bool = False


def validate_schema(raw: Mapping[str, Any], add: Report, index_map: dict[FieldPath, list[int]]) -> MatrixSpec | None:
    """Schema-validate; report every schema error, then drop the offending list items / keys and
    validate again so the semantic checks still run on the rest (all problems in one pass).
    ``index_map`` records, per pruned list, which original indices remain (for locations)."""
    data = {str(k): plain(v) for k, v in raw.items()}
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
    pruning = _report_schema_errors(errors, add)
    if pruning.fatal:
        return None
    _prune(data, pruning, index_map)
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError:
        return None  # what is left still does not validate: the problems above say why


def _fields_at(loc: tuple[str | int, ...]) -> tuple[str, ...]:
    """The field names of the model at ``loc`` in a matrix (list indices and dict keys skipped); ``()``
    when ``loc`` does not lead to a model."""
    from pydantic import BaseModel

    model: type[BaseModel] = MatrixSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return ()
        todo, nested = [field.annotation], None
        while todo and nested is None:  # the first model inside X | None, list[X], dict[str, X]
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                nested = t
            else:
                todo.extend(get_args(t))
        if nested is None:
            return ()
        model = nested
    return tuple(model.model_fields)


def _report_schema_errors(errors: list[ErrorDetails], add: Report) -> _Pruning:
    """Report each pydantic error at its field (friendlier messages for names, the value given); returns
    what to cut so the rest validates."""
    pruning = _Pruning()
    for err in errors:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in ("str", "list[str]")))
        last = loc[-1] if loc else ""
        msg = err["msg"]
        if err["type"] == "string_pattern_mismatch" and isinstance(last, str) and last in _FRIENDLY:
            msg = _FRIENDLY[last]
        if (
            err["type"] not in ("missing", "extra_forbidden")
            and "input" in err
            and not isinstance(err["input"], (dict, list))
        ):
            msg += f" (got {err['input']!r})"
        if err["type"] == "extra_forbidden" and isinstance(last, str):
            from builder.suggest import did_you_mean  # difflib: only for a misspelled field

            msg += did_you_mean(last, _fields_at(loc[:-1]))
        add(loc, msg)
        ints = [i for i, part in enumerate(loc) if isinstance(part, int)]
        if ints:
            k = ints[-1]
            pruning.removals.setdefault(loc[:k], set()).add(int(loc[k]))
        elif err["type"] == "missing" and len(loc) <= 2:
            pruning.fatal = True
        elif loc and loc[0] in ("family", "repository") and len(loc) == 1:
            pruning.deletions.append(("__dummy__", loc[0]))
        elif loc:
            pruning.deletions.append(loc)
    return pruning


def _prune(data: dict[str, object], pruning: _Pruning, index_map: dict[FieldPath, list[int]]) -> None:
    """Cut ``pruning``'s keys and list items from ``data`` (in place), deepest lists first; ``index_map``
    records which original indices each pruned list keeps."""
    for where in pruning.deletions:
        if where[0] == "__dummy__":
            data[str(where[1])] = "invalid"
            continue
        parent: Any = data  # plain dicts and lists (``yamldoc.plain``) along a path pydantic reported
        for part in where[:-1]:
            parent = parent[part] if isinstance(parent, dict) else parent[int(part)]
        if isinstance(parent, dict):
            parent.pop(where[-1], None)
    for list_path in sorted(pruning.removals, key=len, reverse=True):
        node: Any = data
        try:
            for part in list_path:
                node = node[part]
        except (KeyError, IndexError, TypeError):
            continue
        if not isinstance(node, list):
            continue
        keep = [i for i in range(len(node)) if i not in pruning.removals[list_path]]
        node[:] = [node[i] for i in keep]
        index_map[list_path] = keep


def _number_message(value: float | int, written: str | None) -> str:
    text = written or str(value)
    if isinstance(value, float) and written and written != str(value):
        return f'{value} is a YAML number ({written} lost its trailing zero); quote it: "{written}"'
    return f'{text} is a YAML number; quote it: "{text}"'


def check_yaml_numbers(raw: object, add: Report, text: str) -> Skipped:
    """Report version fields (python, accelerator version/image_version, framework versions, the
    framework/python of include cells and exclude rules) that YAML parsed as numbers: ``3.10`` is the
    float 3.1, so the value cannot be trusted. Each problem is reported at its own line."""
    out = Skipped()
    if not isinstance(raw, Mapping):
        return out
    numbers = _Numbers(add, text.splitlines())
    axes = raw.get("axes")
    if isinstance(axes, Mapping):
        out.bad |= numbers.in_axes(axes)
    for section in ("include", "exclude"):
        items = raw.get(section)
        if isinstance(items, list):
            (out.includes if section == "include" else out.rules).update(numbers.in_cells(section, items))
    return out


def _scalar(node: object, key: str | int) -> object:
    """``node[key]`` of a mapping or (index) a list; None when it is not there."""
    if isinstance(node, Mapping):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None


@dataclasses.dataclass(frozen=True)
class _Numbers:
    """Finds version fields YAML read as numbers and reports each (``add``) with its text in the file."""

    add: Report
    lines: list[str]

    def at(self, node: object, key: str | int, where: FieldPath) -> bool:
        """Report ``node[key]`` at ``where`` when it is a number; True when it was reported."""
        value = _scalar(node, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        self.add(where, _number_message(value, _written(node, key, self.lines)))
        return True

    def in_axes(self, axes: Mapping[str, object]) -> set[str]:
        """The python, accelerator and framework axes; returns the axis values to skip (``python:3.1``,
        ``accelerator:<i>``, ``framework:2.1``)."""
        bad: set[str] = set()
        pys = axes.get("python")
        if isinstance(pys, list):
            for i, v in enumerate(pys):
                if self.at(pys, i, ("axes", "python", i)):
                    bad.add(f"python:{v}")
        accs = axes.get("accelerator")
        if isinstance(accs, list):
            for i, acc in enumerate(accs):
                if isinstance(acc, Mapping):
                    for f in ("version", "image_version"):
                        if self.at(acc, f, ("axes", "accelerator", i, f)):
                            bad.add(f"accelerator:{i}")
        fw = axes.get("framework")
        versions = fw.get("versions") if isinstance(fw, Mapping) else None
        if isinstance(versions, list):
            for i, v in enumerate(versions):
                if self.at(versions, i, ("axes", "framework", "versions", i)):
                    bad.add(f"framework:{v}")
        return bad

    def in_cells(self, section: str, items: list[object]) -> set[int]:
        """The framework / python (and, for ``include``, accelerator versions) of each cell or rule of
        ``section``; returns the indices of those with a number."""
        hits: set[int] = set()
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            hit = False
            for f in ("framework", "python"):
                value = item.get(f)
                if isinstance(value, list):
                    for j in range(len(value)):
                        hit = self.at(value, j, (section, i, f, j)) or hit
                else:
                    hit = self.at(item, f, (section, i, f)) or hit
            acc = item.get("accelerator")
            if section == "include" and isinstance(acc, Mapping):
                for f in ("version", "image_version"):
                    hit = self.at(acc, f, (section, i, "accelerator", f)) or hit
            if hit:
                hits.add(i)
        return hits


def _written(node: object, key: str | int, lines: list[str]) -> str | None:
    """The scalar's text at its position in the file (``3.10``), None when unknown."""
    lc = getattr(node, "lc", None)
    if lc is None or not lines:
        return None
    try:
        line, col = lc.item(key) if isinstance(node, list) else lc.value(key)
    except (AttributeError, KeyError, IndexError, TypeError):
        return None
    if not 0 <= line < len(lines):
        return None
    m = re.match(r"[-+]?[0-9][0-9_.eE+-]*", lines[line][col:])
    return m.group(0) if m else None
