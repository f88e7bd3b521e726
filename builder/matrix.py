"""Load and validate build matrices (``matrices/*.yaml``) and expand them into variants.

A matrix names a template family, a repository (relative to the configured registry), axes and
include/exclude rules; the cross product of the axes, minus ``exclude``, plus ``include``, is the
list of variants (cells). Every cell is checked against the compatibility knowledge base
(``builder.compat.variant_problems``: framework wheels for that CUDA/ROCm line, Python and
platform; CUDA images for that OS; ROCm support for that OS) when the matrix is loaded, so an
impossible cell fails in milliseconds instead of twenty minutes into a build.

Validation collects *every* problem (schema, placeholders, unused rules, impossible cells) with
its file, 1-based line and field, then raises one ``MatrixError`` whose
``details["problems"]`` is ``[{"file", "line", "field", "message"}, ...]``.

Schema reference and examples: ``docs/matrices.md``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from builder.compat.frameworks import NO_GPU_KERNELS
from builder.errors import ConfigError, MatrixError
from builder.models import Accelerator, AcceleratorKind, BaseImage, Framework, Variant

if TYPE_CHECKING:
    from builder.render import BaseResolution

PLATFORMS = ("linux/amd64", "linux/arm64")
MIRROR_PREFIX = "mirror:"
_OS_RE = re.compile(r"^(?P<name>[a-z]+)(?P<version>\d+(?:\.\d+)?)$")
_VERSION_RE = re.compile(r"^\d+(\.\d+){0,2}$")
_ARCH_RE = re.compile(r"^(sm_\d{2,3}[af]?|compute_\d{2,3}[af]?|gfx[0-9a-f]{3,5})$")
#: The Python each OS release ships as ``python3`` (sources: packages.ubuntu.com noble/jammy
#: ``python3``, packages.debian.org bookworm ``python3``). Other Pythons on Ubuntu come from the
#: deadsnakes PPA; Debian images support only their system Python.
SYSTEM_PYTHON: dict[str, str] = {
    "ubuntu22.04": "3.10",
    "ubuntu24.04": "3.12",
    "debian12": "3.11",
    "debian13": "3.13",
}
#: glibc of each OS release -> the manylinux tag wheels for it may carry (lock resolution target).
#: Sources: packages.ubuntu.com / packages.debian.org ``libc6`` (jammy 2.35, noble 2.39,
#: bookworm 2.36, trixie 2.41; uv knows manylinux tags up to 2_40).
OS_GLIBC: dict[str, str] = {
    "ubuntu22.04": "2_35",
    "ubuntu24.04": "2_39",
    "debian12": "2_36",
    "debian13": "2_40",
}
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


# --------------------------------------------------------------------------------------------
# Schema (outside data -> pydantic)
# --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AcceleratorSpec(_Strict):
    """One accelerator axis value. ``image_version``: the full release in base-image tags
    (``nvidia/cuda:12.8.1-...``); defaults to ``version``."""

    kind: Literal["cuda", "rocm", "cpu"]
    version: str | None = None
    image_version: str | None = None

    @field_validator("version", "image_version", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v


class FrameworkSpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    versions: list[str] = Field(min_length=1)

    @field_validator("versions", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        return [str(x) if isinstance(x, (int, float)) else x for x in v] if isinstance(v, list) else v


class Axes(_Strict):
    accelerator: list[AcceleratorSpec] = Field(min_length=1)
    framework: FrameworkSpec
    python: list[str] = Field(min_length=1)
    os: list[str] = Field(min_length=1)
    platform: list[str] = Field(default_factory=lambda: ["linux/amd64"], min_length=1)

    @field_validator("python", mode="before")
    @classmethod
    def _py_text(cls, v: Any) -> Any:
        return [str(x) if isinstance(x, (int, float)) else x for x in v] if isinstance(v, list) else v


RuleValue = str | list[str]


class Rule(_Strict):
    """An exclude rule: every key given must match (values: one or a list; ``accelerator`` matches
    the kind ``cuda``, the tag ``cu128``/``rocm6.4``/``cpu``; ``framework`` a version or a
    specifier such as ``>=2.9``)."""

    accelerator: RuleValue | None = None
    framework: RuleValue | None = None
    python: RuleValue | None = None
    os: RuleValue | None = None
    platform: RuleValue | None = None
    reason: str | None = None

    @field_validator("accelerator", "framework", "python", "os", "platform", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, list):
            return [str(x) if isinstance(x, (int, float)) else x for x in v]
        return v


class IncludeSpec(_Strict):
    """A cell added outside the cross product (may override packages/base/index_url)."""

    accelerator: AcceleratorSpec
    framework: str
    python: str
    os: str
    platform: str = "linux/amd64"
    packages: list[str] | None = None
    base: str | None = None
    index_url: str | None = None

    @field_validator("framework", "python", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v


class MatrixSpec(_Strict):
    family: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    repository: str = Field(pattern=r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
    description: str | None = None
    axes: Axes
    exclude: list[Rule] = Field(default_factory=list)
    include: list[IncludeSpec] = Field(default_factory=list)
    packages: dict[str, list[str]] = Field(default_factory=dict)
    index_url: dict[str, str] = Field(default_factory=dict)
    base: dict[str, str] = Field(min_length=1)
    build_args: dict[str, str] = Field(default_factory=dict)
    #: the GPU architectures the framework build in the image carries, per accelerator kind or ``default``,
    #: when they differ from the framework wheels' list in builder.compat (``[]``: no GPU kernels at all)
    gpu_archs: dict[str, list[str]] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Matrix:
    """A loaded, validated matrix. ``name`` is the file stem; ``variants`` sorted by id."""

    name: str
    path: Path
    family: str
    repository: str
    variants: tuple[Variant, ...]


@dataclasses.dataclass(frozen=True)
class Problem:
    """One validation problem: ``line`` is 1-based (0 when unknown)."""

    file: str
    line: int
    field: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


# --------------------------------------------------------------------------------------------
# Compatibility (helper module builder.compat), memoised per distinct question
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _cell_problems(
    framework: str, framework_version: str, kind: str, accel_version: str | None, python: str, os: str, platform: str
) -> tuple[str, ...]:
    from builder import compat

    return tuple(
        compat.variant_problems(
            framework=framework,
            framework_version=framework_version,
            kind=kind,
            accel_version=accel_version,
            python=python,
            os=os,
            platform=platform,
        )
    )


@functools.lru_cache(maxsize=1024)
def _compiled_archs(
    framework: str, framework_version: str, kind: str, accel_version: str | None, platform: str
) -> tuple[str, ...]:
    from builder import compat

    return tuple(compat.compiled_archs(framework, framework_version, kind, accel_version, platform))


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


class _Lines:
    """Maps a pydantic/field path to the 1-based line of the YAML node it came from."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def line(self, path: Sequence[str | int]) -> int:
        node = self.root
        best = 1
        for part in path:
            lc = getattr(node, "lc", None)
            try:
                if isinstance(node, Mapping) and part in node:
                    if lc is not None:
                        best = lc.key(part)[0] + 1
                    node = node[part]
                elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                    if lc is not None:
                        best = lc.item(part)[0] + 1
                    node = node[part]
                else:
                    break
            except (KeyError, IndexError, TypeError, AttributeError):
                break
        return best


def _field_name(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


def _parse_yaml(path: Path) -> Any:
    return _read_yaml(path)[0]


def _read_yaml(path: Path) -> tuple[Any, str]:
    """(round-trip document with line/column marks, the file's text)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise ConfigError(f"matrix file {path} does not exist", hint="pass an existing file with --matrix") from exc
    yaml = YAML(typ="rt", pure=True)
    try:
        return yaml.load(text), text
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problem = Problem(str(path), line, "(document)", f"not valid YAML: {getattr(exc, 'problem', exc)}")
        raise MatrixError(
            f"{path}:{line}: not valid YAML", problems=[problem.as_dict()], hint="fix the YAML syntax at that line"
        ) from exc


def _fmt_vars(
    *, framework: str, framework_version: str, accel: AcceleratorSpec, python: str, os: str, platform: str
) -> dict[str, str]:
    m = _OS_RE.match(os)
    version = accel.version or ""
    return {
        "framework": framework,
        "framework_version": framework_version,
        "accel_kind": accel.kind,
        "accel_version": version,
        "accel_tag": Accelerator(accel.kind, accel.version).tag,
        "accel_major": version.split(".")[0] if version else "",
        "image_version": accel.image_version or version,
        "python": python,
        "os": os,
        "os_name": m.group("name") if m else os,
        "os_version": m.group("version") if m else "",
        "platform": platform,
        "arch": platform.split("/")[-1],
    }


def split_os(os: str) -> tuple[str, str]:
    """``ubuntu24.04`` -> ``("ubuntu", "24.04")``."""
    m = _OS_RE.match(os)
    return (m.group("name"), m.group("version")) if m else (os, "")


def _placeholders(text: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return ["<malformed>"]


def variant_id(
    framework: str, framework_version: str, accel: Accelerator, python: str, os: str, platform: str, *, family: str = ""
) -> str:
    """Stable variant id, e.g. ``torch2.9-cu128-py3.12-ubuntu24.04`` (``-arm64`` suffix off amd64).

    A framework named ``none`` (plain Python images) uses the family name: ``tiny-cpu-py3.11-debian12``.
    """
    head = family if framework == "none" else f"{framework}{framework_version}"
    vid = f"{head}-{accel.tag}-py{python}-{os}"
    if platform != "linux/amd64":
        vid += "-" + platform.split("/")[-1]
    return vid


def _rule_matches(
    rule: Rule, *, accel: AcceleratorSpec, framework_version: str, python: str, os: str, platform: str
) -> bool:
    def values(v: RuleValue | None) -> list[str] | None:
        return None if v is None else ([v] if isinstance(v, str) else v)

    acc = values(rule.accelerator)
    if acc is not None:
        tag = Accelerator(accel.kind, accel.version).tag
        names = {accel.kind, tag, f"{accel.kind}{accel.version or ''}"}
        if not names.intersection(acc):
            return False
    fw = values(rule.framework)
    if fw is not None and not any(_version_matches(framework_version, want) for want in fw):
        return False
    for want_list, have in ((values(rule.python), python), (values(rule.os), os), (values(rule.platform), platform)):
        if want_list is not None and have not in want_list:
            return False
    return True


def _version_matches(have: str, want: str) -> bool:
    if want and want[0] in "<>=!~":
        try:
            return Version(have) in SpecifierSet(want)
        except (InvalidSpecifier, InvalidVersion):
            return False
    return have == want


def load_matrix(path: Path, *, bases: BaseResolution | None = None) -> Matrix:
    """Load, validate and expand one matrix file.

    ``bases``: when given, each variant's ``base`` is resolved (digest from the committed bases
    lock or the machine-local mirror record); otherwise ``base.digest`` is None and ``base.pull``
    is the reference as written. Raises ``MatrixError`` listing every problem with its location,
    ``ConfigError`` when the file does not exist.
    """
    path = Path(path)
    raw, text = _read_yaml(path)
    lines = _Lines(raw)
    file = str(path)
    problems: list[Problem] = []
    index_map: dict[tuple[str | int, ...], list[int]] = {}

    def original(field_path: Sequence[str | int]) -> tuple[str | int, ...]:
        """A path into the pruned document -> the same node's path in the file."""
        out: list[str | int] = []
        for part in field_path:
            prefix = tuple(out)
            if isinstance(part, int) and prefix in index_map and 0 <= part < len(index_map[prefix]):
                part = index_map[prefix][part]
            out.append(part)
        return tuple(out)

    def add(field_path: Sequence[str | int], message: str) -> None:
        orig = original(field_path)
        problems.append(Problem(file, lines.line(orig), _field_name(orig), message))

    if not isinstance(raw, Mapping):
        add((), "a matrix must be a YAML mapping (family, repository, axes, base, ...)")
        _raise(path, problems)
    numeric = _yaml_numbers(raw, add, text)
    spec = _validate(raw, add, index_map)
    if spec is None:
        _raise(path, problems)
        raise AssertionError("unreachable")

    for section, indices in (("include", numeric.includes), ("exclude", numeric.rules)):
        kept = index_map.get((section,))
        if kept is not None:  # schema errors pruned items: raw indices -> indices in spec
            remapped = {kept.index(i) for i in indices if i in kept}
            indices.clear()
            indices.update(remapped)
    variants = _expand(spec, path, add, bases, numeric)
    if problems:
        _raise(path, problems)
    return Matrix(name=path.stem, path=path, family=spec.family, repository=spec.repository, variants=variants)


@dataclasses.dataclass
class _Numeric:
    """Version fields YAML parsed as numbers (reported by :func:`_yaml_numbers`): axis values no cell is
    built from (``python:3.1``, ``framework:2.1``, ``accelerator:0``), include cells and exclude rules skipped."""

    bad: set[str] = dataclasses.field(default_factory=set)
    includes: set[int] = dataclasses.field(default_factory=set)
    rules: set[int] = dataclasses.field(default_factory=set)


def _number_message(value: float | int, written: str | None) -> str:
    text = written or str(value)
    if isinstance(value, float) and written and written != str(value):
        return f'{value} is a YAML number ({written} lost its trailing zero); quote it: "{written}"'
    return f'{text} is a YAML number; quote it: "{text}"'


def _yaml_numbers(raw: Any, add: Any, text: str) -> _Numeric:
    """Report version fields (python, accelerator version/image_version, framework versions, the
    framework/python of include cells and exclude rules) that YAML parsed as numbers: ``3.10`` is the
    float 3.1, so the value cannot be trusted. Each problem is reported at its own line."""
    out = _Numeric()
    if not isinstance(raw, Mapping):
        return out
    lines = text.splitlines()

    def check(node: Any, key: str | int, where: tuple[str | int, ...]) -> bool:
        try:
            value = node[key]
        except (KeyError, IndexError, TypeError):
            return False
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        add(where, _number_message(value, _written(node, key, lines)))
        return True

    axes = raw.get("axes")
    if isinstance(axes, Mapping):
        pys = axes.get("python")
        if isinstance(pys, list):
            for i, v in enumerate(pys):
                if check(pys, i, ("axes", "python", i)):
                    out.bad.add(f"python:{v}")
        accs = axes.get("accelerator")
        if isinstance(accs, list):
            for i, acc in enumerate(accs):
                if isinstance(acc, Mapping):
                    for f in ("version", "image_version"):
                        if check(acc, f, ("axes", "accelerator", i, f)):
                            out.bad.add(f"accelerator:{i}")
        fw = axes.get("framework")
        versions = fw.get("versions") if isinstance(fw, Mapping) else None
        if isinstance(versions, list):
            for i, v in enumerate(versions):
                if check(versions, i, ("axes", "framework", "versions", i)):
                    out.bad.add(f"framework:{v}")
    for section, fields in (("include", ("framework", "python")), ("exclude", ("framework", "python"))):
        items = raw.get(section)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            hit = False
            for f in fields:
                value = item.get(f)
                if isinstance(value, list):
                    for j in range(len(value)):
                        hit = check(value, j, (section, i, f, j)) or hit
                else:
                    hit = check(item, f, (section, i, f)) or hit
            acc = item.get("accelerator")
            if section == "include" and isinstance(acc, Mapping):
                for f in ("version", "image_version"):
                    hit = check(acc, f, (section, i, "accelerator", f)) or hit
            if hit:
                (out.includes if section == "include" else out.rules).add(i)
    return out


def _written(node: Any, key: str | int, lines: list[str]) -> str | None:
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


_FRIENDLY = {
    "repository": "must be lower-case path components (a-z, 0-9, '.', '_', '-') separated by '/', e.g. ml/pytorch",
    "family": "must be a lower-case name (a-z, 0-9, '_', '-') of a directory in images/",
    "name": "must be a lower-case name such as torch, jax, tensorflow or none",
}


def _plain(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _validate(raw: Mapping[str, Any], add: Any, index_map: dict[tuple[str | int, ...], list[int]]) -> MatrixSpec | None:
    """Schema-validate; report every schema error, then drop the offending list items / keys and
    validate again so the semantic checks still run on the rest (all problems in one pass).
    ``index_map`` records, per pruned list, which original indices remain (for locations)."""
    data = _plain(raw)
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
    removals: dict[tuple[str | int, ...], set[int]] = {}
    deletions: list[tuple[str | int, ...]] = []
    fatal = False
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
        add(loc, msg)
        ints = [i for i, part in enumerate(loc) if isinstance(part, int)]
        if ints:
            k = ints[-1]
            removals.setdefault(loc[:k], set()).add(int(loc[k]))
        elif err["type"] == "missing" and len(loc) <= 2:
            fatal = True
        elif loc and loc[0] in ("family", "repository") and len(loc) == 1:
            deletions.append(("__dummy__", loc[0]))
        elif loc:
            deletions.append(loc)
    if fatal:
        return None
    for where in deletions:
        if where[0] == "__dummy__":
            data[str(where[1])] = "invalid"
            continue
        parent: Any = data
        for part in where[:-1]:
            parent = parent[part] if isinstance(parent, dict) else parent[int(part)]
        if isinstance(parent, dict):
            parent.pop(where[-1], None)
    for list_path in sorted(removals, key=len, reverse=True):
        node: Any = data
        try:
            for part in list_path:
                node = node[part]
        except (KeyError, IndexError, TypeError):
            continue
        if not isinstance(node, list):
            continue
        keep = [i for i in range(len(node)) if i not in removals[list_path]]
        node[:] = [node[i] for i in keep]
        index_map[list_path] = keep
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError:
        return None  # what is left still does not validate: the problems above say why


def _raise(path: Path, problems: list[Problem]) -> Any:
    problems = sorted(set(problems), key=lambda p: (p.file, p.line, p.field, p.message))
    listing = "\n".join(f"  {p}" for p in problems)
    raise MatrixError(
        f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''}:\n{listing}",
        problems=[p.as_dict() for p in problems],
    )


def _check_axes(spec: MatrixSpec, add: Any) -> set[str]:
    """Check the axes and sections; return the invalid axis values (``accelerator:<i>``,
    ``python:<v>``, ``os:<v>``, ``platform:<v>``, ``framework:<v>``) so no cell is built from them."""
    bad: set[str] = set()
    ax = spec.axes
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
            not _VERSION_RE.match(acc.image_version) or not acc.image_version.startswith(acc.version or "~")
        ):
            add((*where, "image_version"), f"image_version {acc.image_version!r} must extend version {acc.version!r}")
    for i, v in enumerate(ax.framework.versions):
        if not _VERSION_RE.match(v):
            add(("axes", "framework", "versions", i), f"framework version {v!r} is not a release like 2.9")
            bad.add(f"framework:{v}")
    for i, py in enumerate(ax.python):
        if not re.match(r"^3\.\d+$", py):
            add(("axes", "python", i), f"python {py!r} must be 3.X")
            bad.add(f"python:{py}")
    for i, os_ in enumerate(ax.os):
        if not _OS_RE.match(os_):
            add(("axes", "os", i), f"os {os_!r} must be a name and version like ubuntu24.04 or debian12")
            bad.add(f"os:{os_}")
    for i, plat in enumerate(ax.platform):
        if plat not in PLATFORMS:
            add(("axes", "platform", i), f"platform {plat!r} is not one of {', '.join(PLATFORMS)}")
            bad.add(f"platform:{plat}")
    _check_dupes(add, ("axes", "python"), ax.python)
    _check_dupes(add, ("axes", "os"), ax.os)
    _check_dupes(add, ("axes", "platform"), ax.platform)
    _check_dupes(add, ("axes", "framework", "versions"), ax.framework.versions)
    _check_dupes(add, ("axes", "accelerator"), [f"{a.kind}{a.version or ''}" for a in ax.accelerator])
    kinds = {a.kind for a in ax.accelerator} | {inc.accelerator.kind for inc in spec.include}
    for kind in sorted(kinds):
        if kind not in spec.base and "default" not in spec.base:
            add(("base",), f"no base image for accelerator kind {kind!r} (add `{kind}:` or `default:`)")
    for key, archs in spec.gpu_archs.items():
        for j, a in enumerate(archs):
            if not _ARCH_RE.match(a):
                add(
                    ("gpu_archs", key, j),
                    f"{a!r} is not a GPU architecture like sm_80, compute_90 or gfx942 (no GPU kernels: write [])",
                )
        if key == "cpu" and archs:
            add(("gpu_archs", key), "a cpu image has no GPU architectures (remove the key or write [])")
    for section in ("packages", "index_url", "base", "gpu_archs"):
        for key in getattr(spec, section):
            if key not in ("cuda", "rocm", "cpu", "default"):
                add((section, key), f"unknown key {key!r}: use an accelerator kind (cuda, rocm, cpu) or default")
    for section in ("packages", "index_url", "base"):
        mapping: dict[str, Any] = getattr(spec, section)
        for key, value in mapping.items():
            texts = value if isinstance(value, list) else [value]
            for j, text in enumerate(texts):
                loc: tuple[str | int, ...] = (section, key, j) if isinstance(value, list) else (section, key)
                for name in _placeholders(text):
                    if name not in PLACEHOLDERS:
                        add(loc, f"unknown placeholder {{{name}}} (known: {', '.join(PLACEHOLDERS)})")
    for key, value in spec.base.items():
        if value.startswith(MIRROR_PREFIX) and not value[len(MIRROR_PREFIX) :]:
            add(("base", key), "mirror: needs a name, e.g. mirror:debian:bookworm")
    for name in spec.build_args:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            add(("build_args", name), f"build argument name {name!r} is not a valid identifier")
    return bad


def _check_dupes(add: Any, where: tuple[str | int, ...], values: Sequence[str]) -> None:
    seen: set[str] = set()
    for i, v in enumerate(values):
        if v in seen:
            add((*where, i), f"duplicate value {v!r}")
        seen.add(v)


def _pick(mapping: Mapping[str, Any], kind: str) -> Any:
    if kind in mapping:
        return mapping[kind]
    return mapping.get("default")


def _expand(
    spec: MatrixSpec, path: Path, add: Any, bases: BaseResolution | None, numeric: _Numeric | None = None
) -> tuple[Variant, ...]:
    numeric = numeric or _Numeric()
    bad = _check_axes(spec, add) | numeric.bad
    ax = spec.axes
    fw_name = ax.framework.name
    cells: list[tuple[tuple[str | int, ...], AcceleratorSpec, str, str, str, str, IncludeSpec | None]] = []
    rule_used = [False] * len(spec.exclude)
    for ai, acc in enumerate(ax.accelerator):
        for fv in ax.framework.versions:
            for py in ax.python:
                for os_ in ax.os:
                    for plat in ax.platform:
                        if {
                            f"accelerator:{ai}",
                            f"framework:{fv}",
                            f"python:{py}",
                            f"os:{os_}",
                            f"platform:{plat}",
                        } & bad:
                            continue
                        excluded = False
                        for ri, rule in enumerate(spec.exclude):
                            if ri in numeric.rules:
                                continue  # reported: a YAML number where a version belongs
                            if _rule_matches(rule, accel=acc, framework_version=fv, python=py, os=os_, platform=plat):
                                rule_used[ri] = True
                                excluded = True
                        if not excluded:
                            cells.append((("axes", "accelerator", ai), acc, fv, py, os_, plat, None))
    for ri, used in enumerate(rule_used):
        if not used and ri not in numeric.rules:
            add(("exclude", ri), "this exclude rule matches no cell of the axes (a typo?)")
    for ii, extra in enumerate(spec.include):
        if ii in numeric.includes:
            continue  # reported: a YAML number where a version belongs
        cells.append(
            (("include", ii), extra.accelerator, extra.framework, extra.python, extra.os, extra.platform, extra)
        )

    repo = spec.repository
    name = path.stem
    out: dict[str, Variant] = {}
    for where, acc, fv, py, os_, plat, inc in cells:
        if inc is not None:
            invalid = False
            if not _OS_RE.match(os_):
                add((*where, "os"), f"os {os_!r} must be a name and version like ubuntu24.04")
                invalid = True
            if plat not in PLATFORMS:
                add((*where, "platform"), f"platform {plat!r} is not one of {', '.join(PLATFORMS)}")
                invalid = True
            if not re.match(r"^3\.\d+$", py):
                add((*where, "python"), f"python {py!r} must be 3.X")
                invalid = True
            if acc.kind != "cpu" and (acc.version is None or not re.match(r"^\d+\.\d+$", acc.version)):
                add((*where, "accelerator", "version"), f"{acc.kind} needs a version like 12.8 / 6.4")
                invalid = True
            if invalid:
                continue
        accel = Accelerator(acc.kind, acc.version if acc.kind != "cpu" else None)
        vid = variant_id(fw_name, fv, accel, py, os_, plat, family=spec.family)
        if vid in out:
            add(where, f"cell {vid} is listed twice (include repeats an axes cell?)")
            continue
        if os_.startswith("debian") and os_ in SYSTEM_PYTHON and SYSTEM_PYTHON[os_] != py:
            add(where, f"cell {vid}: {os_} ships only Python {SYSTEM_PYTHON[os_]} (use an ubuntu base for others)")
        for msg in _cell_problems(fw_name, fv, acc.kind, accel.version, py, os_, plat):
            hint = " (add an `exclude` rule for it)" if inc is None else ""
            add(where, f"cell {vid}: {msg}{hint}")
        values = _fmt_vars(framework=fw_name, framework_version=fv, accel=acc, python=py, os=os_, platform=plat)
        pkg_templates = inc.packages if inc is not None and inc.packages is not None else _pick(spec.packages, acc.kind)
        base_template = inc.base if inc is not None and inc.base is not None else _pick(spec.base, acc.kind)
        index_template = (
            inc.index_url if inc is not None and inc.index_url is not None else _pick(spec.index_url, acc.kind)
        )
        try:
            packages = tuple(p.format(**values) for p in (pkg_templates or ()))
            base_ref = base_template.format(**values) if base_template else ""
            index_url = index_template.format(**values) if index_template else None
        except (KeyError, ValueError, IndexError):
            continue  # reported by _check_axes (unknown placeholder)
        if not base_ref:
            continue  # reported by _check_axes (no base)
        archs = _compiled_archs(fw_name, fv, acc.kind, accel.version, plat) if fw_name != "none" else ()
        declared = _pick(spec.gpu_archs, acc.kind)
        if declared is not None and acc.kind != "cpu":
            # the matrix says what the framework build carries ([] = no GPU kernels: label value "none")
            archs = tuple(a for a in declared if _ARCH_RE.match(a)) or (NO_GPU_KERNELS,)
        build_args = dict(spec.build_args)
        build_args.update(_arch_build_args(fw_name, accel, archs))
        base = bases.resolve(base_ref) if bases is not None else BaseImage(base_ref, None, base_ref)
        out[vid] = Variant(
            id=vid,
            matrix=name,
            family=spec.family,
            repository=repo,
            accelerator=accel,
            framework=Framework(fw_name, fv),
            python=py,
            os=os_,
            platform=plat,
            base=base,
            build_args=tuple(sorted(build_args.items())),
            packages=packages,
            gpu_archs=archs,
            index_url=index_url,
        )
    return tuple(out[k] for k in sorted(out))


def _arch_build_args(framework: str, accel: Accelerator, archs: tuple[str, ...]) -> dict[str, str]:
    """Architecture lists as build arguments (a build never probes a GPU).

    CUDA: ``CUDA_ARCHITECTURES`` in CMake's syntax (``sm_80`` -> ``80-real``, ``compute_90`` ->
    ``90-virtual``), and for torch ``TORCH_CUDA_ARCH_LIST`` in torch.utils.cpp_extension's syntax
    (``8.0;9.0+PTX``: ``+PTX`` when the wheel carries PTX of that architecture). ROCm:
    ``PYTORCH_ROCM_ARCH`` and ``GPU_TARGETS`` (``gfx90a;gfx942``). Extensions compiled in derived
    images then target the same architectures as the framework build.
    """
    if not archs or accel.kind == "cpu" or archs == (NO_GPU_KERNELS,):
        return {}
    if accel.kind == "rocm":
        value = ";".join(archs)
        return {"PYTORCH_ROCM_ARCH": value, "GPU_TARGETS": value} if framework == "torch" else {"GPU_TARGETS": value}
    cmake: list[str] = []
    real: list[str] = []
    ptx: set[str] = set()
    for a in archs:
        kind, _, num = a.partition("_")
        if not num.isdigit() or len(num) < 2:
            continue
        if kind == "sm":
            cmake.append(f"{num}-real")
            real.append(num)
        elif kind == "compute":
            cmake.append(f"{num}-virtual")
            ptx.add(num)
    args = {"CUDA_ARCHITECTURES": ";".join(cmake)}
    if framework == "torch":
        nums = real + [n for n in sorted(ptx, key=int) if n not in real]
        args["TORCH_CUDA_ARCH_LIST"] = ";".join(f"{n[:-1]}.{n[-1]}" + ("+PTX" if n in ptx else "") for n in nums)
    return args


def load_matrices(paths: Iterable[Path], *, bases: BaseResolution | None = None) -> tuple[Matrix, ...]:
    """Load several matrices; problems of all files are collected into one ``MatrixError``.

    Also rejects a variant id that two matrices both produce.
    """
    matrices: list[Matrix] = []
    problems: list[dict[str, Any]] = []
    for p in paths:
        try:
            matrices.append(load_matrix(Path(p), bases=bases))
        except MatrixError as exc:
            problems.extend(exc.details.get("problems", []))
    seen: dict[str, str] = {}
    for m in matrices:
        for v in m.variants:
            if v.id in seen:
                problems.append(
                    {
                        "file": str(m.path),
                        "line": 1,
                        "field": "(variants)",
                        "message": f"variant id {v.id} is also produced by {seen[v.id]}",
                    }
                )
            seen[v.id] = str(m.path)
    if problems:
        listing = "\n".join(f"  {p['file']}:{p['line']}: {p['field']}: {p['message']}" for p in problems)
        raise MatrixError(
            f"{len(problems)} matrix problem{'s' if len(problems) != 1 else ''}:\n{listing}", problems=problems
        )
    return tuple(matrices)


def matrix_paths(matrices_dir: Path, given: Sequence[Path] = ()) -> tuple[Path, ...]:
    """The files given, else every ``*.yaml``/``*.yml`` in ``matrices_dir`` (sorted)."""
    if given:
        return tuple(Path(p) for p in given)
    if not matrices_dir.is_dir():
        raise ConfigError(
            f"matrices directory {matrices_dir} does not exist",
            hint="run builder inside your checkout (the directory with builder.toml) or pass `builder -C DIR`; "
            "or set matrices_dir in builder.toml",
        )
    return tuple(sorted([*matrices_dir.glob("*.yaml"), *matrices_dir.glob("*.yml")]))


def select(variants: Sequence[Variant], globs: Sequence[str]) -> tuple[Variant, ...]:
    """Variants whose id matches any of the shell globs (``fnmatch``); all when ``globs`` is empty.

    Raises ``NotFoundError`` when a glob matches nothing (a typo should not build nothing).
    """
    if not globs:
        return tuple(variants)
    from builder.errors import NotFoundError

    chosen: list[Variant] = []
    for g in globs:
        if not any(fnmatch.fnmatchcase(v.id, g) for v in variants):
            raise NotFoundError(
                f"--select {g!r} matches no variant", hint="`builder matrix list` shows the variant ids"
            )
    for v in variants:
        if any(fnmatch.fnmatchcase(v.id, g) for g in globs):
            chosen.append(v)
    return tuple(chosen)


def looks_like_variant_id(text: str) -> bool:
    """True for a bare variant id (``jax0.7-cpu-py3.11-debian12``): no ``/``, ``:`` or ``@``, which every
    image reference the CLIs take has (``registry/repo:tag``, ``repo@sha256:...``)."""
    return bool(text) and not any(c in text for c in "/:@")


def variant_reference(matrices: Iterable[Matrix], variant_id: str, registry: str) -> str:
    """``<registry>/<repository>:<variant-id>``: the moving variant tag ``builder build`` points at the
    variant's latest image (docs/build.md). Raises NotFoundError naming up to five close ids (difflib)
    when no matrix has ``variant_id``."""
    import difflib

    from builder.errors import NotFoundError

    ids: dict[str, Variant] = {v.id: v for m in matrices for v in m.variants}
    v = ids.get(variant_id)
    if v is None:
        close = difflib.get_close_matches(variant_id, list(ids), n=5, cutoff=0.6)
        raise NotFoundError(
            f"no variant {variant_id!r} in the matrices"
            + (f"; close matches: {', '.join(close)}" if close else f" ({len(ids)} variants known)"),
            hint="give a variant id from `builder matrix list`, or an image reference (registry/repo:tag)",
            variant=variant_id,
            close_matches=close,
        )
    return f"{registry}/{v.repository}:{v.id}"


def shard(variants: Sequence[Variant], i: int, n: int) -> tuple[Variant, ...]:
    """Shard ``i`` of ``n`` (1-based ``i``), round-robin over the given order: shards are disjoint,
    their union is ``variants``, sizes differ by at most one. Raises ``ConfigError`` on bad i/n."""
    if n < 1 or not 1 <= i <= n:
        raise ConfigError(f"--shard {i}/{n}: need 1 <= i <= n", hint="e.g. --shard 1/4 ... --shard 4/4")
    return tuple(variants[i - 1 :: n])


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; raises ``ConfigError``."""
    m = re.match(r"^(\d+)/(\d+)$", text.strip())
    if not m:
        raise ConfigError(f"--shard {text!r}: expected I/N such as 1/4")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise ConfigError(f"--shard {text}: need 1 <= I <= N")
    return i, n


def variant_json(v: Variant) -> dict[str, Any]:
    """The ``builder matrix list --json`` object of one variant."""
    return {
        "id": v.id,
        "matrix": v.matrix,
        "family": v.family,
        "repository": v.repository,
        "accelerator": {"kind": v.accelerator.kind, "version": v.accelerator.version},
        "framework": {"name": v.framework.name, "version": v.framework.version},
        "python": v.python,
        "os": v.os,
        "platform": v.platform,
        "base": {"reference": v.base.reference, "digest": v.base.digest, "pull": v.base.pull},
        "packages": list(v.packages),
        "index_url": v.index_url,
        "gpu_archs": list(v.gpu_archs),
        "build_args": dict(v.build_args),
    }


def github_matrix(variants: Sequence[Variant]) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` value: ``{"include": [{...}, ...]}``; each entry has
    ``id``, ``matrix``, ``repository``, ``accelerator`` {``kind``, ``version``}, ``framework``
    {``name``, ``version``}, ``python``, ``os``, ``platform`` and ``runner_arch`` (``x64`` |
    ``arm64``), so a workflow can write ``${{ matrix.id }}`` or ``matrix.accelerator.kind == 'cuda'``."""
    return {
        "include": [
            {
                "id": v.id,
                "matrix": v.matrix,
                "repository": v.repository,
                "accelerator": {"kind": v.accelerator.kind, "version": v.accelerator.version or ""},
                "framework": {"name": v.framework.name, "version": v.framework.version},
                "python": v.python,
                "os": v.os,
                "platform": v.platform,
                "runner_arch": "arm64" if v.platform == "linux/arm64" else "x64",
            }
            for v in variants
        ]
    }


AcceleratorKindT = AcceleratorKind  # re-export for type users
