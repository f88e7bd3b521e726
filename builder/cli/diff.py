"""``builder diff A B``: what an approver must see between two images. Thin Click layer over
:func:`builder.checks.image_diff.diff_references` (docs/inspect.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    app_context,
    console,
    docker_config_option,
    emit,
    fleet_option,
    json_option,
    platform_option,
)

if TYPE_CHECKING:
    from pathlib import Path

    from builder.image.diff import ImageDiff


@click.command()
@click.argument("ref_a")
@click.argument("ref_b")
@fleet_option("Also show the fleet clusters whose static verdict changes (a name or a file).", param="fleet_file")
@platform_option("Platform manifest of an index to compare.")
@docker_config_option
@json_option
def diff(ref_a: str, ref_b: str, fleet_file: Path | None, platform: str | None) -> None:
    """Compare image REF_B against REF_A: GPU stack, minimum driver, GPU targets, packages.

    Both images are read from the registry (layers cached by digest, as `builder inspect`).
    Human output: what changed, package counts; --json has every list.

    \b
    builder diff team/train:cu126 team/train:cu128
    builder diff A B --fleet demo      + clusters whose verdict changes
    """
    from builder.checks.image_diff import diff_references
    from builder.image.layers import LayerCache

    app = app_context().app
    cfg = app.config
    result = diff_references(
        app.image_reference(ref_a),
        app.image_reference(ref_b),
        registries=app.client,
        default_registry=cfg.registry,
        platform=platform,
        cache=LayerCache(cfg.state_dir / "cache" / "layers"),
        fleet_file=fleet_file,
    )
    emit(result.to_json(), lambda: _print(result))


def _print(d: ImageDiff) -> None:
    c = console()
    for text in (f"a: {d.a}", f"b: {d.b}", *diff_lines(d)):
        c.print(text, markup=False, highlight=False, soft_wrap=True)


def diff_lines(d: ImageDiff, indent: str = "") -> list[str]:
    """What changed in ``d`` for people, one line each (``indent`` before each): the stack, minimum
    drivers, GPU targets gained and lost, GPU library and package counts, the clusters whose verdict
    changes. Shared by ``builder diff`` and the ``builder promote`` dry run."""
    out: list[str] = []

    def line(text: str) -> None:
        out.append(indent + text)

    if not d.stack:
        line("stack: unchanged")
    for name, change in d.stack.items():
        line(f"  {name}: {change['a'] or '-'} -> {change['b'] or '-'}")
    for label, change in (("min driver", d.min_driver), ("min driver to JIT PTX", d.min_driver_jit)):
        if change["a"] != change["b"]:
            line(f"  {label}: {change['a'] or '-'} -> {change['b'] or '-'}")
    line(f"GPU targets gained: {' '.join(d.gained) or '-'}")
    line(f"GPU targets lost:   {' '.join(d.lost) or '-'}")
    b = d.binaries
    if b["added"] or b["removed"] or b["changed"]:
        line(f"GPU libraries: {len(b['added'])} added, {len(b['removed'])} removed, {len(b['changed'])} changed")
    for kind, p in d.packages.items():
        line(f"{kind} packages: {len(p['added'])} added, {len(p['removed'])} removed, {len(p['changed'])} changed")
    if d.fleet is not None:
        if not d.fleet:
            line("fleet: no cluster's verdict changes")
        for row in d.fleet:
            line(f"  cluster {row['cluster']}: {row['a']} -> {row['b']}")
    return out
