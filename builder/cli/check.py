"""``builder hostinfo``, ``builder check``, ``builder diagnose``: host probe, device checks, diagnosis.

Thin Click layer over ``builder.checks`` (docs/checks.md, docs/diagnosis.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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


def esc(text: str) -> str:
    """Escape outside text (engine stderr, image labels, tool output) for rich markup: docker's
    ``capabilities: [[gpu]]`` must print as written, not as markup."""
    from rich.markup import escape

    return escape(text)


@click.command()
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Read saved output (raw nvidia-smi/rocm-smi/amd-smi/docker info text, or hostinfo JSON; '-' = stdin).",
)
@json_option
def hostinfo(from_file: str | None) -> None:
    """Probe this host's GPUs, driver, fabric manager, container toolkit, CDI and engine.

    \b
    builder hostinfo --json > host.json        save this host (for fleets and --host)
    builder hostinfo --from nvidia-smi.txt     parse saved tool output
    """
    from builder.checks.host.probing import probe_host
    from builder.checks.host.reading import load_hostinfo, parse_text

    if from_file == "-":
        info = parse_text(sys.stdin.read(), source="<stdin>")
    elif from_file:
        info = load_hostinfo(Path(from_file))
    else:
        from builder import engine
        from builder.errors import BuilderError

        try:
            engine_info: dict[str, Any] | None = engine.info_json()
        except BuilderError:
            engine_info = None
        info = probe_host(engine_info=engine_info)

    def human() -> None:
        c = console()
        c.print(
            f"vendor: [bold]{esc(str(info.vendor))}[/]  driver: {esc(info.driver_version or '?')}  CUDA (driver max): "
            f"{esc(info.cuda_version or '?')}" + (f"  ROCm: {esc(info.rocm_version)}" if info.rocm_version else "")
        )
        for g in info.gpus:
            c.print(
                f"  GPU {g.index if g.index is not None else '?'}: {g.name or '?'}  brand={g.brand or '?'}  "
                f"cc={g.compute_capability or g.gfx_target or '?'}  mem={g.memory_mib or '?'} MiB  "
                f"bus={g.bus_id or '?'}  vbios={g.vbios or '?'}  mig={g.mig_mode or '-'}",
                markup=False,
            )
        if info.fabric_manager:
            c.print(f"fabric manager: {info.fabric_manager}", markup=False)
        if info.toolkit is not None:
            c.print(
                f"container toolkit: {'present' if info.toolkit.present else 'missing'}"
                f" (nvidia-ctk {info.toolkit.nvidia_ctk_version or '-'}; CDI specs {len(info.toolkit.cdi_specs)})",
                markup=False,
            )
        if info.engine is not None:
            c.print(
                f"engine: {info.engine.name} {info.engine.version}  runtime: {info.engine.default_runtime}",
                markup=False,
            )
        if info.diagnosis:
            c.print(f"[red]diagnosis:[/] {esc(str(info.diagnosis))}: {esc(str(info.diagnosis_detail))}")
        for n in info.notes:
            c.print(f"[dim]note: {esc(n)}[/]")

    emit(info.to_json(), human)


@click.command()
@click.argument("file", required=False, default="-", type=click.Path(allow_dash=True, readable=False))
@click.option("--host", "host_file", type=click.Path(dir_okay=False), help="Host facts (hostinfo JSON or tool output).")
@click.option("--require-cuda", default=None, help="The image's NVIDIA_REQUIRE_CUDA (evaluated as a whole).")
@click.option("--image-cuda", default=None, help="The image's CUDA version (X.Y).")
@click.option("--driver", default=None, help="Host driver version (overrides --host).")
@click.option("--brand", default=None, help="GPU product brand (nvidia-smi -q 'Product Brand').")
@click.option("--vendor", type=click.Choice(["nvidia", "amd", "none"]), default=None, help="Host vendor.")
@json_option
def diagnose(
    file: str,
    host_file: str | None,
    require_cuda: str | None,
    image_cuda: str | None,
    driver: str | None,
    brand: str | None,
    vendor: str | None,
) -> None:
    """Name the layer at fault for a GPU/container error (FILE, or '-' for stdin).

    Prints diagnosis, at_fault, noticed_by, summary, fix and facts. Exit code 0: the
    diagnosis is the output, even when it is `unknown`.
    """
    from builder.checks.context import diagnosis_context
    from builder.checks.diagnosis import diagnose as run_diagnosis
    from builder.checks.diagnosis import read_input
    from builder.checks.host.reading import load_hostinfo

    text = sys.stdin.read() if file == "-" else read_input(Path(file))  # NotFoundError (exit 8) names it
    ctx = diagnosis_context(
        load_hostinfo(Path(host_file)) if host_file else None,
        require_cuda=require_cuda,
        image_cuda=image_cuda,
        driver_version=driver,
        gpu_brand=brand,
        vendor=vendor,
    )
    result = run_diagnosis(text, ctx)

    def human() -> None:
        c = console()
        c.print(
            f"[bold]{esc(result.key)}[/]  at fault: [red]{esc(str(result.at_fault))}[/]  "
            f"noticed by: {esc(str(result.noticed_by))}"
        )
        c.print(result.summary, markup=False)
        c.print(f"[yellow]fix:[/] {esc(result.fix)}")
        for k, v in result.facts.items():
            if isinstance(v, list | tuple):  # one quoted line per line, not a Python list
                c.print(f"  {k}:" + ("" if v else " (none)"), markup=False, highlight=False)
                for item in v:
                    c.print(f"    {item}", markup=False, highlight=False)
            else:
                c.print(f"  {k}: {v}", markup=False)

    emit(result.to_json(), human)


def error_lines(error: str, keep: int = 6, width: int = 300) -> list[str]:
    """The lines of a step's error worth showing: docker's pull chatter before the real error
    (``Unable to find image ... locally``, layer progress) dropped, the last ``keep`` lines kept."""
    from builder.checks.device import meaningful_lines  # the engine's pull progress: device.PULL_NOISE

    lines = meaningful_lines(error)
    return [ln[:width] for ln in lines[-keep:]]


@click.command()
@click.argument("ref")
@click.option("--static", is_flag=True, help="Compatibility verdict only (nothing runs).")
@click.option("--host", "host_file", type=click.Path(dir_okay=False), help="With --static: saved host facts.")
@fleet_option("With --static: a fleet name (fleets/NAME.yaml) or a fleet file.", param="fleet_file")
@click.option("--mode", type=click.Choice(["auto", "nvidia", "amd", "cpu"]), default="auto", show_default=True)
@click.option("--cdi", is_flag=True, help="Request NVIDIA GPUs as CDI devices (--device nvidia.com/gpu=all).")
@click.option("--framework", default="auto", show_default=True, help="torch | jax | tensorflow | none | auto.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per check container.")
@click.option("--shm-size", default="1g", show_default=True)
@platform_option("Platform of the image to check.")
@click.option(
    "--key",
    type=click.Path(dir_okay=False),
    default=None,
    help="Check-runner key that signs the result (default: builder.toml `check_key`, "
    "<state_dir>/keys/check-runner/builder.key).",
)
@click.option(
    "--attest/--no-attest",
    default=None,
    help="Attach the device-check/v1 attestation (default: when the key exists).",
)
@docker_config_option
@json_option
def check(
    ref: str,
    static: bool,
    host_file: str | None,
    fleet_file: Path | None,
    mode: str,
    cdi: bool,
    framework: str,
    timeout: float,
    shm_size: str,
    platform: str,
    key: str | None,
    attest: bool | None,
) -> None:
    """Check an image on this host (fresh containers, signed result) or --static against a host/fleet.

    REF is an image reference or a variant id (its moving tag <registry>/<repository>:<variant-id>).

    \b
    builder check REF                          run the device checks here, attach device-check/v1
    builder check jax0.7-cpu-py3.11-debian12   the variant's latest build
    builder check REF --static --host h.json   verdict for a saved host
    builder check REF --static --fleet demo            (or --fleet fleets/demo.yaml)
    Exit codes: 20 check failed (diagnosis in the output), 11 static verdict blocked.
    """
    from builder.checks import device, image
    from builder.errors import CheckFailedError, ConfigError, IncompatibleError
    from builder.predicates import DEVICE_CHECK_V1
    from builder.registry import parse_reference

    cfg = app_context().config
    from builder.selection import looks_like_variant_id, variant_reference

    if looks_like_variant_id(ref):  # a variant id: its moving variant tag in the configured registry
        from builder.matrix import load_matrices, matrix_paths

        ref = variant_reference(load_matrices(matrix_paths(cfg.matrices_dir)), ref, cfg.registry)
    r = parse_reference(ref, cfg.registry)
    client = app_context().app.client(r.registry)  # credentials: --docker-config, $DOCKER_CONFIG, ~/.docker
    digest = client.resolve(r.repository, r.digest or r.ref)
    facts = image.probe_image(client, r.repository, digest, platform=platform)
    pinned = f"{r.registry}/{r.repository}@{digest}"

    if static:
        if bool(host_file) == bool(fleet_file):
            raise ConfigError("--static needs exactly one of --host FILE or --fleet NAME|FILE")
        from builder.checks.host.reading import load_hostinfo
        from builder.checks.static import static_check_fleet, static_check_host

        if host_file is not None:
            out = static_check_host(facts, load_hostinfo(Path(host_file)))
        else:
            assert fleet_file is not None  # one of the two, checked above
            out = static_check_fleet(facts, fleet_file)
        payload = {"reference": pinned, "image": facts.to_json(), **out}

        def human_static() -> None:
            c = console()
            if "header" in out:  # --fleet: the same summary line as `builder compat fleet`
                c.print(pinned, markup=False, highlight=False)
                c.print(out["header"], markup=False, highlight=False)
            else:
                c.print(f"{esc(pinned)}: [bold]{esc(str(out['verdict']))}[/]")
            for row in out.get("clusters") or out.get("gpus") or []:
                name = row.get("cluster") or row.get("gpu")
                if row.get("applies") is False:
                    c.print(f"  {name}: not-applicable ({row.get('vendor')})", markup=False)
                    continue
                c.print(
                    f"  {name}: {row['verdict']}  min driver {row.get('min_driver') or '-'}  "
                    f"arch covered {row.get('arch_covered')}",
                    markup=False,
                )
                for reason in row.get("reasons") or []:
                    c.print(f"    - {reason}", markup=False)

        blocked = out["verdict"] == "blocked"
        if not blocked or not app_context().json_output:  # --json: one document (the error carries it)
            emit(payload, human_static)
        if blocked:
            raise IncompatibleError(
                f"{pinned} is blocked: " + "; ".join(out.get("reasons") or ["see clusters"])[:800], verdict=out
            )
        return

    from builder import engine
    from builder.checks.host.probing import probe_host

    host = probe_host(engine_info=engine.info_json())
    # run exactly the platform manifest that was probed (an index would let the engine choose)
    run_ref = f"{r.registry}/{r.repository}@{facts.platform_digest}"
    # what runs, described (not a pseudo-command): the exact docker command of each step is in --json
    # (steps[].detail.command)
    line = device.describe_run(facts, host, run_ref, mode=mode, cdi=cdi)
    console().print(line, markup=False, highlight=False, style="dim", soft_wrap=True)
    result = device.run_device_check(
        run_ref, facts, host, mode=mode, cdi=cdi, framework=framework, timeout=timeout, shm_size=shm_size
    )
    key_path = Path(key) if key else cfg.check_key_path
    do_attest = attest if attest is not None else (key is not None or key_path.exists())
    payload = result.to_json()
    if do_attest:
        from builder.signing.keys import load_signer

        signer = load_signer(key_path, cfg.key_password)
        written = device.attest_result(result, client, r.repository, digest, signer, lock_dir=cfg.state_dir / "locks")
        payload["attestation"] = {
            "predicate_type": DEVICE_CHECK_V1,
            "key": str(key_path),
            "written": getattr(written, "appended", True),
        }

    def human() -> None:
        c = console()
        for s in result.steps:
            mark = "[green]ok[/]" if s.ok else "[red]FAIL[/]"
            c.print(f"{mark:>14}  {esc(f'{s.name:<28} {s.seconds:7.2f}s')}")
            for line in error_lines(s.error or ""):
                c.print(f"      {line}", markup=False, highlight=False)
        if result.diagnosis:
            d = result.diagnosis
            c.print(
                f"[red]{esc(d.key)}[/] (at fault: {esc(str(d.at_fault))}; noticed by: {esc(str(d.noticed_by))}): "
                f"{esc(d.summary)}"
            )
            c.print(f"[yellow]fix:[/] {esc(d.fix)}")
        if "attestation" in payload:
            c.print(f"attached device-check/v1 to {esc(pinned)}")

    if result.passed or not app_context().json_output:  # --json: one document (the error carries it)
        emit(payload, human)
    if not result.passed:
        d = result.diagnosis
        raise CheckFailedError(
            f"device check of {pinned} failed: "
            + (f"{d.key} (at fault: {d.at_fault}): {d.summary}" if d else "see the failed steps"),
            hint=d.fix if d else None,
            diagnosis=d.key if d else None,
            at_fault=d.at_fault if d else None,
            noticed_by=d.noticed_by if d else None,
            result=payload,
        )
