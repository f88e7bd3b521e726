"""``builder compat``: can an image's CUDA (or ROCm) start and run on a driver and GPU?

``builder compat check``: one host; ``builder compat fleet``: every cluster of a fleet file.
Exit 0 for ok / minor-version-compat / forward-compat, 11 (IncompatibleError) when blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from builder.cli._common import app_context, console, emit, json_option, option_group, platform_option

if TYPE_CHECKING:
    from builder.compat import ImageSpec, Verdict
    from builder.errors import IncompatibleError

_COLOURS = {"ok": "green", "minor-version-compat": "yellow", "forward-compat": "yellow", "blocked": "red"}


@click.group()
def compat() -> None:
    """Compatibility knowledge: CUDA line -> minimum driver, NVIDIA_REQUIRE_CUDA, architectures."""


_image_options = option_group(
    click.option("--cuda", metavar="X.Y", help="CUDA line the application is built with (no hook requirement)."),
    click.option("--require", metavar="EXPR", help="The image's NVIDIA_REQUIRE_CUDA (the hook checks it)."),
    click.option(
        "--image-cuda",
        metavar="X.Y[.Z]",
        help="An official nvidia/cuda image of this release: use its NVIDIA_REQUIRE_CUDA.",
    ),
    click.option("--rocm", metavar="X.Y", help="ROCm release of a ROCm image."),
    click.option(
        "--arch-list",
        metavar="LIST",
        help="Architectures compiled into the image: sm_80,sm_90,compute_90 or gfx90a,gfx942.",
    ),
)


def _image(
    cuda: str | None, require: str | None, image_cuda: str | None, rocm: str | None, arch_list: str | None
) -> ImageSpec:
    """The image options as one ``ImageSpec`` (usage error, exit 2, when none or two requirements are given)."""
    from builder.compat import ImageSpec

    if not (cuda or require or image_cuda or rocm):
        raise click.UsageError("give the image: --cuda X.Y, --require EXPR, --image-cuda X.Y.Z or --rocm X.Y")
    if require and image_cuda:
        raise click.UsageError("--require and --image-cuda both give the requirement: use one")
    return ImageSpec(cuda, require, image_cuda, rocm, ImageSpec.parse_archs(arch_list))


def _print_verdict(v: Verdict, title: str) -> None:
    """The verdict line, then its minimum driver, architecture and reasons, folded at spaces to the
    console's width (:func:`builder.cli.terminal.fold`)."""
    from rich.markup import escape

    from builder.cli.terminal import fold

    con = console()
    colour = _COLOURS[v.verdict]
    con.print(f"[bold]{escape(title)}[/]: [{colour}]{v.verdict}[/]", highlight=False)
    if v.min_driver:
        line = f"minimum driver for ok: {v.min_driver}" + (f"  ({v.min_driver_row})" if v.min_driver_row else "")
        con.print(fold(line, con.width, indent="  "), highlight=False, markup=False, soft_wrap=True)
    if v.arch_covered is not None:
        con.print(f"  architecture covered: {'yes' if v.arch_covered else '[red]no[/]'}")
    for r in v.reasons:
        con.print(fold(f"- {r}", con.width, indent="  "), highlight=False, markup=False, soft_wrap=True)


@compat.command("check")
@click.option("--driver", metavar="VERSION", help="Host driver (nvidia-smi 'Driver Version'; AMD: ROCm release).")
@click.option("--gpu", metavar="NAME", help="GPU name as nvidia-smi / rocm-smi prints it.")
@click.option("--brand", metavar="BRAND", help="nvidia-smi -q 'Product Brand' (else derived from the GPU name).")
@click.option("--driver-cuda", "driver_cuda", metavar="X.Y", help="nvidia-smi 'CUDA Version' (else from the driver).")
@click.option("--cc", "compute_capability", metavar="X.Y|gfxNNN", help="GPU compute capability / gfx target.")
@click.option("--vendor", type=click.Choice(["nvidia", "amd"]), default=None, help="Host vendor (else from the GPU).")
@_image_options
@json_option
def check(
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    driver_cuda: str | None,
    compute_capability: str | None,
    vendor: str | None,
    cuda: str | None,
    require: str | None,
    image_cuda: str | None,
    rocm: str | None,
    arch_list: str | None,
) -> None:
    """Verdict for one host: ok, minor-version-compat, forward-compat or blocked (exit 11).

    \b
    Examples:
      builder compat check --driver 550.144.03 --gpu "NVIDIA GeForce RTX 4090" \\
          --image-cuda 12.8.1
      builder compat check --driver 535.161.08 --gpu "NVIDIA H100 80GB HBM3" \\
          --cuda 12.4 --json
    """
    from builder.compat import check_image

    v = check_image(
        _image(cuda, require, image_cuda, rocm, arch_list),
        driver=driver,
        gpu=gpu,
        brand=brand,
        compute_capability=compute_capability,
        driver_cuda_version=driver_cuda,
        vendor=vendor,
    )
    emit(v.to_json(), lambda: _print_verdict(v, f"driver {driver or '?'}, {gpu or 'GPU ?'}"))
    _exit_when_blocked(v.incompatibility())


def _exit_when_blocked(error: IncompatibleError | None) -> None:
    """Blocked: exit 11. With --json the verdict document already printed is the output (no error document);
    otherwise the error's message and hint."""
    if error is None:
        return
    if app_context().json_output:
        raise click.exceptions.Exit(error.exit_code)
    raise error


@compat.command("fleet")
@click.argument("fleet_file", metavar="NAME|FILE")
@click.option("--cluster", "clusters", multiple=True, metavar="NAME", help="Only these clusters (repeatable).")
@_image_options
@json_option
def fleet(
    fleet_file: str,
    clusters: tuple[str, ...],
    cuda: str | None,
    require: str | None,
    image_cuda: str | None,
    rocm: str | None,
    arch_list: str | None,
) -> None:
    """Verdict per cluster of a fleet (a file, or a name in the fleets directory: `demo` ->
    fleets/demo.yaml), and the fleet's verdict: the worst over the clusters of the image's vendor
    (--rocm: AMD clusters; otherwise NVIDIA ones; the others are not-applicable). Exit 11 when that
    verdict is blocked: an applicable cluster is blocked, or no cluster applies (docs/fleets.md)."""
    from builder.checks.host.reading import load_host
    from builder.compat.fleets import check_fleet_file

    result = check_fleet_file(
        fleet_file,
        _image(cuda, require, image_cuda, rocm, arch_list),
        fleets_dir=app_context().config.fleets_dir,
        load_host=load_host,
        clusters=clusters,
    )

    def human() -> None:
        from builder.cli.terminal import fold

        console().print(fold(result.header, console().width), markup=False, highlight=False, soft_wrap=True)
        for c, cv in result.clusters:
            if not result.applies(c.name):
                console().print(f"cluster {c.name}: not-applicable ({c.vendor})", markup=False)
                continue
            _print_verdict(cv.verdict, f"cluster {c.name}")

    emit(result.to_json(), human)
    _exit_when_blocked(result.incompatibility())


@compat.command("cuda")
@click.argument("cuda_version", metavar="X.Y[.Z]")
@platform_option("Image platform (arm64 differs).", image=False)
@json_option
def cuda_cmd(cuda_version: str, platform: str) -> None:
    """What a CUDA release needs: minimum driver (and the row used), minor-version floor, the
    NVIDIA_REQUIRE_CUDA of its official image, forward-compatibility branches, image OSes."""
    from builder.compat.releases import cuda_release

    r = cuda_release(cuda_version, platform=platform)
    info = r.requirement

    def human() -> None:
        con = console()
        con.print(f"[bold]CUDA {r.cuda}[/]: minimum driver {r.min_driver} ({r.min_driver_row}), branch {r.branch}")
        con.print(f"  minor-version floor: {r.minor_version_floor or 'none'}")
        con.print(
            f"  forward-compatibility branches: {', '.join(f'R{b}' for b in r.forward_compat_branches) or 'unknown'}"
        )
        con.print(f"  official images for: {', '.join(r.official_image_os) or 'none recorded'}")
        con.print(f"  NVIDIA_REQUIRE_CUDA ({info.note}):", markup=False)
        con.print(f"    {info.expr}", markup=False, soft_wrap=True)

    emit(r.to_json(), human)


@compat.command("wheels")
@click.argument("framework")
@click.argument("version")
@json_option
def wheels_cmd(framework: str, version: str) -> None:
    """Wheel lines (CUDA/ROCm/CPU), Pythons, platforms and compiled architectures of a framework release."""
    from builder.compat.releases import wheel_lines

    lines = wheel_lines(framework, version)

    def human() -> None:
        con = console()
        for w in lines:
            con.print(f"{w.kind:<5} {w.accel or '':<6} {w.wheel:<22} {w.status:<12} python {w.python}", markup=False)
            con.print(f"      platforms: {' '.join(w.platforms)}; archs: {' '.join(w.archs) or '-'}", markup=False)

    emit([w.to_json() for w in lines], human)
