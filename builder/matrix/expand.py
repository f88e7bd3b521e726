"""Expansion: a validated matrix spec -> its variants (cells).

The cross product of the axes, minus the cells an ``exclude`` rule matches, plus the ``include``
cells; each cell gets its id (:func:`variant_id`), packages, base, index and build arguments from
the matrix's per-accelerator-kind sections (placeholders filled by :func:`format_values`) and is
checked against the compatibility rules (:mod:`builder.matrix.compatibility`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from builder.compat.distros import OS_RE, split_os
from builder.matrix.compatibility import arch_build_args, cell_problems, gpu_archs, os_python_problem
from builder.matrix.schema import PLATFORMS, AcceleratorSpec, ExcludeRule, IncludeSpec, MatrixSpec, RuleValue
from builder.matrix.validate import Report, Skipped, check_axes
from builder.models import Accelerator, BaseImage, Framework, Variant
from builder.yamldoc import FieldPath

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from builder.bases import BaseResolution

T = TypeVar("T")


def format_values(
    *, framework: str, framework_version: str, accel: AcceleratorSpec, python: str, os: str, platform: str
) -> dict[str, str]:
    """The values of the placeholders (:data:`builder.matrix.validate.PLACEHOLDERS`) for one cell."""
    os_name, os_version = split_os(os)
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
        "os_name": os_name,
        "os_version": os_version,
        "platform": platform,
        "arch": platform.rsplit("/", maxsplit=1)[-1],
    }


def variant_id(
    framework: str, framework_version: str, accel: Accelerator, python: str, os: str, platform: str, *, family: str = ""
) -> str:
    """Stable variant id, e.g. ``torch2.9-cu128-py3.12-ubuntu24.04`` (``-arm64`` suffix off amd64).

    A framework named ``none`` (plain Python images) uses the family name: ``tiny-cpu-py3.11-debian12``.
    """
    head = family if framework == "none" else f"{framework}{framework_version}"
    vid = f"{head}-{accel.tag}-py{python}-{os}"
    if platform != "linux/amd64":
        vid += "-" + platform.rsplit("/", maxsplit=1)[-1]
    return vid


def _values(v: RuleValue | None) -> list[str] | None:
    """A rule's field as a list of accepted values; None: the field is not set (any value)."""
    return None if v is None else ([v] if isinstance(v, str) else v)


def _accelerator_matches(rule: ExcludeRule, accel: AcceleratorSpec) -> bool:
    """The rule's ``accelerator`` accepts the accelerator (by kind, tag or ``<kind><version>``)."""
    acc = _values(rule.accelerator)
    if acc is None:
        return True
    names = {accel.kind, Accelerator(accel.kind, accel.version).tag, f"{accel.kind}{accel.version or ''}"}
    return bool(names.intersection(acc))


def _framework_matches(rule: ExcludeRule, framework_version: str) -> bool:
    """The rule's ``framework`` accepts the framework version (equal, or a specifier such as ``<2.5``)."""
    fw = _values(rule.framework)
    return fw is None or any(_version_matches(framework_version, want) for want in fw)


def _value_matches(want: RuleValue | None, have: str) -> bool:
    """A rule's ``python``/``os``/``platform`` field accepts the value."""
    wanted = _values(want)
    return wanted is None or have in wanted


def _version_matches(have: str, want: str) -> bool:
    if want and want[0] in "<>=!~":
        try:
            return Version(have) in SpecifierSet(want)
        except (InvalidSpecifier, InvalidVersion):
            return False
    return have == want


def _pick(mapping: Mapping[str, T], kind: str) -> T | None:
    if kind in mapping:
        return mapping[kind]
    return mapping.get("default")


#: One cell to expand: (where it comes from, accelerator, framework version, python, os, platform,
#: the include entry or None for a cell of the axes).
Cell = tuple[FieldPath, AcceleratorSpec, str, str, str, str, IncludeSpec | None]


def _axes_cells(spec: MatrixSpec, add: Report, bad: set[str], skipped: Skipped) -> list[Cell]:
    """The cross product of the axes minus excluded cells and cells built from an invalid axis value;
    reports exclude rules that match no cell."""
    ax = spec.axes
    cells: list[Cell] = []
    rule_used = [False] * len(spec.exclude)
    # a rule excludes a cell when every one of its fields accepts the cell's value: the rules
    # still matching are narrowed axis by axis, so each field is tested once per axis value
    rules = [(ri, rule) for ri, rule in enumerate(spec.exclude) if ri not in skipped.rules]  # others: reported
    for ai, acc in enumerate(ax.accelerator):
        if f"accelerator:{ai}" in bad:
            continue
        by_acc = [(ri, r) for ri, r in rules if _accelerator_matches(r, acc)]
        for fv in ax.framework.versions:
            if f"framework:{fv}" in bad:
                continue
            by_fw = [(ri, r) for ri, r in by_acc if _framework_matches(r, fv)]
            for py in ax.python:
                if f"python:{py}" in bad:
                    continue
                by_py = [(ri, r) for ri, r in by_fw if _value_matches(r.python, py)]
                for os_ in ax.os:
                    if f"os:{os_}" in bad:
                        continue
                    by_os = [(ri, r) for ri, r in by_py if _value_matches(r.os, os_)]
                    for plat in ax.platform:
                        if f"platform:{plat}" in bad:
                            continue
                        excluding = [ri for ri, r in by_os if _value_matches(r.platform, plat)]
                        for ri in excluding:
                            rule_used[ri] = True
                        if not excluding:
                            cells.append((("axes", "accelerator", ai), acc, fv, py, os_, plat, None))
    for ri, used in enumerate(rule_used):
        if not used and ri not in skipped.rules:
            add(("exclude", ri), "this exclude rule matches no cell of the axes (a typo?)")
    return cells


def _include_is_valid(cell: Cell, add: Report) -> bool:
    """Check an include cell's own values (the axes' are checked by ``check_axes``)."""
    where, acc, _fv, py, os_, plat, _inc = cell
    valid = True
    if not OS_RE.match(os_):
        add((*where, "os"), f"os {os_!r} must be a name and version like ubuntu24.04")
        valid = False
    if plat not in PLATFORMS:
        add((*where, "platform"), f"platform {plat!r} is not one of {', '.join(PLATFORMS)}")
        valid = False
    if not re.match(r"^3\.\d+$", py):
        add((*where, "python"), f"python {py!r} must be 3.X")
        valid = False
    if acc.kind != "cpu" and (acc.version is None or not re.match(r"^\d+\.\d+$", acc.version)):
        add((*where, "accelerator", "version"), f"{acc.kind} needs a version like 12.8 / 6.4")
        valid = False
    return valid


def _variant(
    spec: MatrixSpec,
    name: str,
    cell: Cell,
    vid: str,
    accel: Accelerator,
    bases: BaseResolution | None,
    resolved: dict[str, BaseImage],
) -> Variant | None:
    """The variant of one cell; None when a template cannot be filled or there is no base (both
    reported by ``check_axes``). ``resolved``: the bases resolved so far in this matrix, by reference."""
    _where, acc, fv, py, os_, plat, inc = cell
    fw_name = spec.axes.framework.name
    values = format_values(framework=fw_name, framework_version=fv, accel=acc, python=py, os=os_, platform=plat)
    pkg_templates = inc.packages if inc is not None and inc.packages is not None else _pick(spec.packages, acc.kind)
    base_template = inc.base if inc is not None and inc.base is not None else _pick(spec.base, acc.kind)
    index_template = inc.index_url if inc is not None and inc.index_url is not None else _pick(spec.index_url, acc.kind)
    try:
        packages = tuple(p.format(**values) for p in (pkg_templates or ()))
        base_ref = base_template.format(**values) if base_template else ""
        index_url = index_template.format(**values) if index_template else None
    except (KeyError, ValueError, IndexError):
        return None  # reported by check_axes (unknown placeholder)
    if not base_ref:
        return None  # reported by check_axes (no base)
    archs = gpu_archs(fw_name, fv, accel, plat, _pick(spec.gpu_archs, acc.kind))
    build_args = dict(spec.build_args)
    build_args.update(arch_build_args(fw_name, accel, archs))
    base = resolved.get(base_ref)
    if base is None:
        base = BaseImage(base_ref, None, base_ref) if bases is None else bases.resolve(base_ref)
        resolved[base_ref] = base
    return Variant(
        id=vid,
        matrix=name,
        family=spec.family,
        repository=spec.repository,
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


def expand(
    spec: MatrixSpec, path: Path, add: Report, bases: BaseResolution | None, skipped: Skipped | None = None
) -> tuple[Variant, ...]:
    """The variants of ``spec`` (from file ``path``), sorted by id. Reports every problem through
    ``add`` (invalid axis values, unused exclude rules, invalid or duplicate cells, cells the
    compatibility rules refuse) and leaves the offending cells out. ``bases``: resolve each base
    (None: ``digest`` None, ``pull`` as written); ``skipped``: what the number check reported."""
    skipped = skipped or Skipped()
    bad = check_axes(spec, add) | skipped.bad
    cells = _axes_cells(spec, add, bad, skipped)
    for ii, extra in enumerate(spec.include):
        if ii in skipped.includes:
            continue  # reported: a YAML number where a version belongs
        cells.append(
            (("include", ii), extra.accelerator, extra.framework, extra.python, extra.os, extra.platform, extra)
        )
    fw_name = spec.axes.framework.name
    out: dict[str, Variant] = {}
    resolved: dict[str, BaseImage] = {}
    for cell in cells:
        where, acc, fv, py, os_, plat, inc = cell
        if inc is not None and not _include_is_valid(cell, add):
            continue
        accel = Accelerator(acc.kind, acc.version if acc.kind != "cpu" else None)
        vid = variant_id(fw_name, fv, accel, py, os_, plat, family=spec.family)
        if vid in out:
            add(where, f"cell {vid} is listed twice (include repeats an axes cell?)")
            continue
        os_problem = os_python_problem(os_, py)
        if os_problem:
            add(where, f"cell {vid}: {os_problem}")
        for msg in cell_problems(fw_name, fv, acc.kind, accel.version, py, os_, plat):
            hint = " (add an `exclude` rule for it)" if inc is None else ""
            add(where, f"cell {vid}: {msg}{hint}")
        variant = _variant(spec, path.stem, cell, vid, accel, bases, resolved)
        if variant is not None:
            out[vid] = variant
    variants = tuple(out[k] for k in sorted(out))
    if spec.tests or spec.benchmark or spec.collective or spec.overrides:
        from builder.matrix.checks import with_checks

        variants = with_checks(spec, variants, add)
    return variants
