"""``builder inspect REF``: the GPU code and GPU stack an image really holds, read from the registry.

Thin Click layer over :func:`builder.image.inspection.inspect_image` (docs/inspect.md).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import click

from builder.cli._common import app_context, console, docker_config_option, emit, json_option, platform_option
from builder.cli.terminal import counted

if TYPE_CHECKING:
    from builder.image.inspection import ImageInspection, LayerRead


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@click.command()
@click.argument("ref")
@platform_option("Platform manifest of an index to inspect.")
@click.option(
    "--no-cache",
    is_flag=True,
    help="Read every layer again (default: layers read before come from <state_dir>/cache/layers).",
)
@docker_config_option
@json_option
def inspect(ref: str, platform: str | None, no_cache: bool) -> None:
    """Read an image's GPU code and installed GPU stack from its layers (no pull, no run, no GPU).

    REF is an image reference (tag or digest; a relative name is in the configured registry).
    Every ELF file is searched for CUDA fat binaries (SASS sm_XY[a|f], PTX compute_XY with its
    ISA) and HIP offload bundles (gfx targets with xnack/sramecc); the stack comes from the
    libraries, wheels, dpkg database and environment in the image. Layers are cached by digest.

    \b
    builder inspect 127.0.0.1:5000/team/train:cu128
    builder inspect REF --json | jq '.binaries[] | {path, sass, ptx}'
    """
    from builder.image.inspection import inspect_image
    from builder.image.layers import LayerCache
    from builder.registry.reference import parse_reference

    app = app_context().app
    cfg = app.config
    r = parse_reference(app.image_reference(ref), cfg.registry)
    client = app.client(r.registry)
    cache = None if no_cache else LayerCache(cfg.state_dir / "cache" / "layers")
    quiet = app_context().json_output

    def progress(layer: LayerRead, done: int, total: int) -> None:
        if quiet:
            return
        how = "cached" if layer.cached else f"read {_mib(layer.size)}"
        console().print(f"layer {done}/{total} {layer.digest[:19]} {how}", style="dim", markup=False, highlight=False)

    result = inspect_image(
        client, r.repository, r.ref, platform=platform, cache=cache, on_layer=progress
    )
    emit(result.to_json(), lambda: _print(result))


def _print(result: ImageInspection) -> None:
    c = console()
    s = result.stack
    c.print(result.reference, markup=False, highlight=False)
    facts = [
        ("os", s.os),
        ("python", ", ".join(s.python) or None),
        ("CUDA runtime", s.cuda_runtime),
        ("CUDA toolkit", s.cuda_toolkit),
        ("cuDNN", s.cudnn),
        ("NCCL", s.nccl),
        ("cuBLAS", s.cublas),
        ("ROCm", s.rocm),
        ("HIP", s.hip),
        ("RCCL", s.rccl),
    ]
    facts += [
        (f.name, f.version + (f" (CUDA {f.cuda})" if f.cuda else "") + (f" (ROCm {f.rocm})" if f.rocm else ""))
        for f in s.frameworks
    ]
    for name, value in facts:
        if value:
            c.print(f"  {name}: {value}", markup=False, highlight=False)
    if result.min_driver or result.min_driver_jit:
        c.print(
            f"  min driver: {result.min_driver or '-'} (CUDA runtime)"
            + (f", {result.min_driver_jit} to JIT its PTX" if result.min_driver_jit else ""),
            markup=False,
        )
    c.print(f"  packages: {len(s.python_packages)} Python, {len(s.dpkg_packages)} dpkg", markup=False)
    check = result.label_check
    if check is not None:
        if check["uncovered"]:
            c.print(
                f"  label gpu-archs claims {' '.join(check['uncovered'])}, which no framework GPU library "
                f"has code for ({len(check['libraries'])} checked)",
                style="red",
                markup=False,
            )
        else:
            c.print("  label gpu-archs: every target found in the framework's GPU code", markup=False)
    if not result.binaries:
        c.print("no GPU code in the image's ELF files", markup=False)
        return
    loading = {b.path for b in result.kernel_binaries()}
    c.print(f"GPU code in {counted(len(result.binaries), 'ELF file')}:", markup=False)
    for b in result.binaries:
        c.print(f"  {b.path}", markup=False, highlight=False, soft_wrap=True)  # a path is never cut
        if b.path not in loading and not b.code_object:
            c.print("    not loaded: the build of another CUDA/ROCm line loads", markup=False)
        for label, items in (("SASS", b.sass), ("PTX ", b.ptx), ("gfx ", b.gfx)):
            if items:
                text = " ".join(items) + (f" (ISA {b.ptx_isa})" if label == "PTX " and b.ptx_isa else "")
                for line in textwrap.wrap(text, 80, initial_indent=f"    {label} ", subsequent_indent=" " * 9):
                    c.print(line, markup=False, highlight=False, soft_wrap=True)
