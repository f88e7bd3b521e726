"""The checks a matrix declares with its images (``tests``, ``benchmark``, ``overrides``): each
variant's :class:`builder.models.CheckCommand` values, with every problem located.

A ``script`` is a path relative to the project root (the directory of ``builder.toml``, like
``images/``), e.g. ``evidence/jax/benchmark.py``; it is read when ``builder check`` sends it on stdin
to the image's python (a missing file fails that check, naming the path), so a matrix copied
elsewhere still names the project's programs. An override whose ``match`` selects no
variant is reported (a typo would otherwise silently keep the matrix-wide checks). Reference:
docs/matrices.md "Checks declared with the image".
"""

from __future__ import annotations

import dataclasses
import fnmatch
import shlex
from typing import TYPE_CHECKING, Literal

from builder.models import CheckCommand

if TYPE_CHECKING:
    from builder.matrix.schema import CheckSpec, MatrixSpec
    from builder.matrix.validate import Report
    from builder.models import Variant


def check_command(
    spec: CheckSpec, kind: Literal["tests", "benchmark", "collective"], where: tuple[str | int, ...], add: Report
) -> CheckCommand | None:
    """``spec`` as a CheckCommand: a string command is split like a shell would (``shlex``), a script
    path stays relative to the project root (read when the check runs). None (and a problem
    at ``where``) for a command that cannot be split or is empty."""
    command: tuple[str, ...] = ()
    script: str | None = None
    if spec.script is not None:
        if spec.script.startswith("/") or ".." in spec.script.split("/"):
            add((*where, "script"), f"{kind} script {spec.script!r}: a path inside the project, e.g. evidence/jax/x.py")
            return None
        script = spec.script  # relative to the project root, read at check time
    elif isinstance(spec.command, str):
        try:
            command = tuple(shlex.split(spec.command))
        except ValueError as exc:
            add((*where, "command"), f"{kind} command cannot be split into words: {exc}")
            return None
    elif spec.command is not None:
        command = tuple(spec.command)
    if spec.script is None and not command:
        add((*where, "command"), f"{kind} command is empty")
        return None
    if kind != "collective" and "min_devices" in spec.model_fields_set:
        add((*where, "min_devices"), f"min_devices applies to the collective check only, not to {kind}")
        return None
    gpus = spec.gpus if isinstance(spec.gpus, str) else str(spec.gpus)
    return CheckCommand(
        kind=kind,
        command=command,
        script=script,
        args=tuple(spec.args),
        timeout=spec.timeout,
        gpus=gpus,
        shm_size=spec.shm_size,
        env=tuple(sorted(spec.env.items())),
        junit=spec.junit,
        dataset=spec.dataset,
        model=spec.model,
        min_devices=spec.min_devices,
    )


KINDS: tuple[Literal["tests", "benchmark", "collective"], ...] = ("tests", "benchmark", "collective")


def with_checks(spec: MatrixSpec, variants: tuple[Variant, ...], add: Report) -> tuple[Variant, ...]:
    """``variants`` with their ``tests``, ``benchmark`` and ``collective`` (each from the first matching
    override that gives it, else the matrix-wide one). Reports overrides that match no variant."""
    base = {k: check_command(getattr(spec, k), k, (k,), add) if getattr(spec, k) else None for k in KINDS}
    overrides = []
    for i, o in enumerate(spec.overrides):
        where = ("overrides", i)
        given = {k: check_command(getattr(o, k), k, (*where, k), add) if getattr(o, k) else None for k in KINDS}
        overrides.append((o.match, given))
        if not any(fnmatch.fnmatchcase(v.id, o.match) for v in variants):
            add((*where, "match"), f"override {o.match!r} matches no variant of this matrix")
    out = []
    for v in variants:
        chosen = dict(base)
        for match, given in overrides:
            if fnmatch.fnmatchcase(v.id, match):
                chosen = {k: given[k] or chosen[k] for k in KINDS}
                break
        tests, bench, coll = chosen["tests"], chosen["benchmark"], chosen["collective"]
        out.append(dataclasses.replace(v, tests=tests, benchmark=bench, collective=coll) if any(chosen.values()) else v)
    return tuple(out)


__all__ = ["check_command", "with_checks"]
