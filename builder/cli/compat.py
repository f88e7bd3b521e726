"""``builder compat``: can an image's CUDA (or ROCm) start and run on a driver and GPU?

``builder compat check``: one host; ``builder compat fleet``: every cluster of a fleet file.
Exit 0 for ok / minor-version-compat / forward-compat, 11 (IncompatibleError) when blocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from builder.cli._common import app_context, console, emit, json_option, option_group, platform_option

if TYPE_CHECKING:
    from builder.compat.verdict import Verdict

_COLOURS = {"ok": "green", "minor-version-compat": "yellow", "forward-compat": "yellow", "blocked": "red"}


@click.group()
def compat() -> None:
    """Compatibility knowledge: CUDA line -> minimum driver, NVIDIA_REQUIRE_CUDA, architectures."""


def _archs(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(a.strip() for a in value.replace(";", ",").replace(" ", ",").split(",") if a.strip())


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
    cuda: str | None, require: str | None, image_cuda: str | None, rocm: str | None
) -> tuple[str | None, str | None]:
    given = [x for x in (cuda, require, image_cuda, rocm) if x]
    if not given:
        raise click.UsageError("give the image: --cuda X.Y, --require EXPR, --image-cuda X.Y.Z or --rocm X.Y")
    if require and image_cuda:
        raise click.UsageError("--require and --image-cuda both give the requirement: use one")
    if image_cuda:
        from builder.compat import require_cuda

        require = require_cuda(image_cuda)
    return cuda, require


def _print_verdict(v: Verdict, title: str) -> None:
    con = console()
    colour = _COLOURS[v.verdict]
    con.print(f"[bold]{title}[/]: [{colour}]{v.verdict}[/]", highlight=False)
    if v.min_driver:
        con.print(f"  minimum driver for ok: {v.min_driver}" + (f"  ({v.min_driver_row})" if v.min_driver_row else ""))
    if v.arch_covered is not None:
        con.print(f"  architecture covered: {'yes' if v.arch_covered else '[red]no[/]'}")
    for r in v.reasons:
        con.print(f"  - {r}", highlight=False, markup=False)


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
      builder compat check --driver 550.144.03 --gpu "NVIDIA GeForce RTX 4090" --image-cuda 12.8.1
      builder compat check --driver 535.161.08 --gpu "NVIDIA H100 80GB HBM3" --cuda 12.4 --json
    """
    from builder.compat import check_compat
    from builder.errors import IncompatibleError

    cuda, require = _image(cuda, require, image_cuda, rocm)
    v = check_compat(
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=cuda,
        require=require,
        image_archs=_archs(arch_list),
        compute_capability=compute_capability,
        driver_cuda_version=driver_cuda,
        rocm=rocm,
        vendor=vendor,
    )
    payload = v.to_json()
    emit(payload, lambda: _print_verdict(v, f"driver {driver or '?'}, {gpu or 'GPU ?'}"))
    if v.verdict == "blocked":
        if app_context().json_output:
            raise click.exceptions.Exit(IncompatibleError.exit_code)
        raise IncompatibleError(
            "the image cannot start or run on this host"
            + (f": needs driver >= {v.min_driver}" if v.min_driver else ""),
            verdict=payload,
        )


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
    from builder.compat.fleets import check_cluster, load_fleet, resolve_fleet_path, summarize
    from builder.errors import IncompatibleError

    cuda, require = _image(cuda, require, image_cuda, rocm)
    f = load_fleet(resolve_fleet_path(fleet_file, app_context().config.fleets_dir), load_host=load_host)
    wanted = set(clusters) or None
    results = [
        check_cluster(c, cuda=cuda, require=require, rocm=rocm, image_archs=_archs(arch_list))
        for c in f.clusters
        if wanted is None or c.name in wanted
    ]
    vendors = {c.name: c.vendor for c in f.clusters}
    summary = summarize(
        ((r.cluster, vendors[r.cluster], r.verdict.verdict) for r in results), "amd" if rocm else "nvidia"
    )
    skipped = set(summary.not_applicable)
    payload = {
        "fleet": f.name,
        "path": f.path,
        **summary.to_json(),
        "clusters": [{**r.to_json(), "applies": r.cluster not in skipped} for r in results],
    }

    def human() -> None:
        console().print(summary.header(f.name), markup=False, highlight=False)
        for r in results:
            if r.cluster in skipped:
                console().print(f"cluster {r.cluster}: not-applicable ({vendors[r.cluster]})", markup=False)
                continue
            _print_verdict(r.verdict, f"cluster {r.cluster}")

    emit(payload, human)
    if summary.blocked:
        if app_context().json_output:
            raise click.exceptions.Exit(IncompatibleError.exit_code)
        raise IncompatibleError(
            f"fleet {f.name} is blocked: " + "; ".join(summary.reasons), clusters=list(summary.blocked_on)
        )


@compat.command("cuda")
@click.argument("cuda_version", metavar="X.Y[.Z]")
@platform_option("Image platform (arm64 differs).")
@json_option
def cuda_cmd(cuda_version: str, platform: str) -> None:
    """What a CUDA release needs: minimum driver (and the row used), minor-version floor, the
    NVIDIA_REQUIRE_CUDA of its official image, forward-compatibility branches, image OSes."""
    from builder import compat

    row = compat.min_driver_row(cuda_version)
    info = compat.require_cuda_info(cuda_version, platform=platform)
    fc = [f"R{b}" for b in compat.forward_compat_branches(cuda_version)]
    oses = list(compat.cuda_image_os(cuda_version))
    payload: dict[str, Any] = {
        "cuda": cuda_version,
        "min_driver": row.min_driver,
        "min_driver_row": row.source,
        "branch": row.branch,
        "minor_version_floor": compat.minor_floor(cuda_version),
        "forward_compat_branches": fc,
        "official_image_os": oses,
        "require_cuda": info.expr,
        "require_cuda_image_release": info.image_release,
        "require_cuda_constructed": info.constructed,
        "require_cuda_note": info.note,
    }

    def human() -> None:
        con = console()
        con.print(f"[bold]CUDA {cuda_version}[/]: minimum driver {row.min_driver} ({row.source}), branch {row.branch}")
        con.print(f"  minor-version floor: {payload['minor_version_floor'] or 'none'}")
        con.print(f"  forward-compatibility branches: {', '.join(fc) or 'unknown'}")
        con.print(f"  official images for: {', '.join(oses) or 'none recorded'}")
        con.print(f"  NVIDIA_REQUIRE_CUDA ({info.note}):", markup=False)
        con.print(f"    {info.expr}", markup=False, soft_wrap=True)

    emit(payload, human)


@compat.command("wheels")
@click.argument("framework")
@click.argument("version")
@json_option
def wheels_cmd(framework: str, version: str) -> None:
    """Wheel lines (CUDA/ROCm/CPU), Pythons, platforms and compiled architectures of a framework release."""
    from builder.compat import compiled_archs
    from builder.compat.frameworks import wheel_rows_for
    from builder.errors import NotFoundError

    rows = wheel_rows_for(framework, version)
    if not rows:
        raise NotFoundError(
            f"no wheel data for {framework} {version} in builder/compat/data/framework-wheels.csv",
            hint="add the release's rows (docs/compat.md, 'Extending the data')",
        )
    payload: list[dict[str, Any]] = [
        {
            "kind": r.kind,
            "accel": r.accel or None,
            "accel_versions": str(r.accel_versions),
            "wheel": r.wheel,
            "status": r.status,
            "python": str(r.python),
            "platforms": list(r.platforms),
            "archs": list(compiled_archs(framework, version, r.kind, r.accel or None)),
            "provenance": r.provenance,
        }
        for r in rows
    ]

    def human() -> None:
        con = console()
        for p in payload:
            line = f"{p['kind']:<5} {p['accel'] or '':<6} {p['wheel']:<22} {p['status']:<12} python {p['python']}"
            con.print(line, markup=False)
            con.print(
                f"      platforms: {' '.join(p['platforms'])}; archs: {' '.join(p['archs']) or '-'}", markup=False
            )

    emit(payload, human)
