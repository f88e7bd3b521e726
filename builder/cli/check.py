"""``builder hostinfo``, ``builder check``, ``builder diagnose``: host probe, device checks, diagnosis.

Thin Click layer over ``builder.checks`` (docs/checks.md, docs/diagnosis.md).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from builder.checks.diagnosis import ENGINES  # the diagnosis's values only (model), never its rules
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
    from collections.abc import Callable

    from builder.checks.clusters import FleetRun
    from builder.checks.device import Mode
    from builder.checks.run import DeviceCheck
    from builder.checks.static import StaticCheck
    from builder.compat import Verdict


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
    help="Read saved output ('-' = stdin): nvidia-smi (table, -q, -L, -x, --query-gpu CSV with or without "
    "header/units), nvidia-container-cli info, rocm-smi (text, --csv, --json), amd-smi (table, list, static, "
    "--json), rocminfo, docker info, or hostinfo JSON; a shell transcript is fine.",
)
@json_option
def hostinfo(from_file: str | None) -> None:
    """Probe this host's GPUs, driver, fabric manager, container toolkit, CDI and engine.

    \b
    builder hostinfo --json > host.json        save this host (fleets, --host)
    builder hostinfo --from nvidia-smi.txt     parse saved tool output
    amd-smi static --json | builder --json hostinfo --from -
    """
    from builder.checks.host.gather import host_facts

    info = host_facts(
        Path(from_file) if from_file and from_file != "-" else None,
        text=sys.stdin.read() if from_file == "-" else None,
    )

    def human() -> None:
        c = console()
        c.print(
            f"vendor: [bold]{esc(str(info.vendor))}[/]  driver: {esc(info.driver_version or '?')}  CUDA (driver max): "
            f"{esc(info.cuda_version or '?')}" + (f"  ROCm: {esc(info.rocm_version)}" if info.rocm_version else "")
        )
        if info.gpus:  # a fitted table: at 80 columns what does not fit moves under the GPU's name
            from builder.cli.tables import Column, fitted_table

            columns = [
                Column("GPU", whole=True),
                Column("name"),
                Column("brand", 2),
                Column("arch", 0, whole=True),
                Column("MiB", 1),
                Column("bus", 3, whole=True),
                Column("vbios", 4),
                Column("mig", 4),
            ]
            rows = [
                [
                    str(g.index) if g.index is not None else "?",
                    esc(g.name or "?"),
                    esc(g.brand or "?"),
                    esc(g.compute_capability or g.gfx_target or "?"),
                    str(g.memory_mib or "?"),
                    esc(g.bus_id or "?"),
                    esc(g.vbios or "?"),
                    esc(g.mig_mode or "-"),
                ]
                for g in info.gpus
            ]
            c.print(fitted_table(columns, rows, c.width - 2, boxed=False, indent=2))
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
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="What ran the failing program; decides between kinds that share a message (e.g. NCCL 'unhandled system "
    "error' in a container is /dev/shm) and spells the fix for that engine.",
)
@json_option
def diagnose(
    file: str,
    host_file: str | None,
    require_cuda: str | None,
    image_cuda: str | None,
    driver: str | None,
    brand: str | None,
    vendor: str | None,
    engine: str | None,
) -> None:
    """Name the layer at fault for a GPU/container error (FILE, or '-' for stdin).

    Prints diagnosis, at_fault, noticed_by, summary, fix and facts; `facts.alternatives` lists the other kinds an
    ambiguous message can be and what decides each (--engine, --vendor, --host FILE). The driver and CUDA the
    text names are cross-checked ("driver too old" with a new-enough driver is not the driver). Exit code 0:
    the diagnosis is the output, even when it is `unknown`.

    \b
    Examples:
      docker run --gpus all IMAGE 2>&1 | builder diagnose -
      builder diagnose err.txt --engine kubernetes --host host.json
    """
    from builder.checks.context import diagnose_message

    result = diagnose_message(
        sys.stdin.read() if file == "-" else Path(file),  # NotFoundError (exit 8) names a missing file
        host=Path(host_file) if host_file else None,
        require_cuda=require_cuda,
        image_cuda=image_cuda,
        driver_version=driver,
        gpu_brand=brand,
        vendor=vendor,
        engine=engine,
    )

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
                    line = f"{item['diagnosis']}: {item['decided_by']}" if isinstance(item, dict) else item
                    c.print(f"    {line}", markup=False, highlight=False)
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
@fleet_option(
    "A fleet name (fleets/NAME.yaml) or file: with --static its verdict; otherwise the check runs on every "
    "cluster with a `runner:`, in parallel (with --cluster: where to find it).",
    param="fleet_file",
)
@click.option(
    "--cluster",
    default=None,
    metavar="NAME",
    help="Run on this fleet cluster through its `runner:` (slurm, docker, podman; docs/fleets.md).",
)
@click.option(
    "--manifest",
    is_flag=True,
    help="With --cluster of a kubernetes runner: print the check's Jobs (YAML for kubectl apply -f -).",
)
@click.option("--mode", type=click.Choice(["auto", "nvidia", "amd", "cpu"]), default="auto", show_default=True)
@click.option("--cdi", is_flag=True, help="Request NVIDIA GPUs as CDI devices (--device nvidia.com/gpu=all).")
@click.option("--framework", default="auto", show_default=True, help="torch | jax | tensorflow | none | auto.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds per check container (more than 0).",
)
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
    cluster: str | None,
    manifest: bool,
    mode: Literal[Mode, "auto"],
    cdi: bool,
    framework: str,
    timeout: float,
    shm_size: str,
    platform: str | None,
    key: str | None,
    attest: bool | None,
) -> None:
    """Check an image on this host (fresh containers, signed result) or --static against a host/fleet.

    REF is an image reference or a variant id (its moving tag <registry>/<repository>:<variant-id>).

    \b
    builder check REF                          device checks here, signed result
    builder check jax0.7-cpu-py3.11-debian12   the variant's latest build
    builder check REF --static --host h.json   verdict for a saved host
    builder check REF --static --fleet demo    a fleet (or fleets/demo.yaml)
    builder check REF --cluster h100-train     on a cluster, through its runner
    builder check REF --fleet demo             on every cluster, in parallel
    Exit codes: 20 check failed (diagnosis shown), 11 static verdict blocked,
    22 a cluster's runner could not run the check, 23 a cluster was skipped
    (Kubernetes: builder renders its Jobs, --manifest; no runner:).
    """
    from builder.build.source import git_commit
    from builder.checks.run import CheckRequest, DeviceCheck, check_reference
    from builder.matrix.index import project_index

    app = app_context().app
    cfg = app.config
    request = CheckRequest(
        app.image_reference(ref),  # a variant id: its moving tag, as every command reads REF
        static=static,
        host_file=Path(host_file) if host_file else None,
        fleet_file=fleet_file,
        mode=mode,
        cdi=cdi,
        framework=framework,
        timeout=timeout,
        shm_size=shm_size,
        platform=platform,
        key=Path(key) if key else None,
        attest=attest,
    )
    if manifest and (cluster is None or static):
        raise click.UsageError("--manifest needs --cluster NAME (a cluster with a kubernetes runner), without --static")
    if not static and (cluster is not None or fleet_file is not None):
        from builder.checks.clusters import CheckServices, FleetRun, KubernetesJobs, check_clusters

        services = CheckServices(
            registries=app.client,
            default_registry=cfg.registry,
            matrices=lambda: (project_index(cfg),),
            signer=app.signer,
            default_key=cfg.check_key_path,
            lock_dir=cfg.state_dir / "locks",
            root=cfg.root,  # the declared tests' and benchmark's scripts, as for a local check
            commit=lambda: git_commit(cfg.root),
        )
        ran = check_clusters(
            request,
            services,
            cluster=cluster,
            fleet_file=fleet_file,
            fleets_dir=cfg.fleets_dir,
            on_event=_progress,
            manifest=manifest,
        )
        if isinstance(ran, KubernetesJobs):
            jobs = ran
            emit(jobs.to_json(), lambda: click.echo(jobs.to_yaml(), nl=False))
            for s in jobs.skipped:  # stderr, also with --json (evidence_skipped[])
                console().print(f"[{jobs.cluster}] {s.kind} not rendered: {s.reason}", style="yellow", markup=False)
            return
        if isinstance(ran, FleetRun):
            checks = [c.check for c in ran.clusters if c.check is not None]
            _emit_check(ran, partial(_print_fleet_run, ran), checks, attest, key, cfg.check_key_path)
        else:
            _emit_check(ran, partial(_print_device, ran), [ran], attest, key, cfg.check_key_path)
        return
    if cluster is not None:
        raise click.UsageError("--cluster runs the check on the cluster: leave out --static")
    outcome = check_reference(
        request,
        registries=app.client,  # credentials: --docker-config, $DOCKER_CONFIG, ~/.docker
        default_registry=cfg.registry,
        matrices=lambda: (project_index(cfg),),
        signer=app.signer,
        default_key=cfg.check_key_path,
        lock_dir=cfg.state_dir / "locks",
        # what runs, described (not a pseudo-command): each step's exact docker command is in --json
        # (steps[].detail.command)
        on_run=lambda line: console().print(line, markup=False, highlight=False, style="dim", soft_wrap=True),
        commit=lambda: git_commit(cfg.root),  # recorded in test-result/v1 and benchmark/v1 (when declared)
        root=cfg.root,  # the declared tests' and benchmark's scripts
        layer_dir=cfg.state_dir / "cache" / "layers",  # measured GPU code: each layer read once
    )
    if isinstance(outcome, DeviceCheck):
        _emit_check(outcome, partial(_print_device, outcome), [outcome], attest, key, cfg.check_key_path)
    else:
        _emit_check(outcome, partial(_print_static, outcome), [], attest, key, cfg.check_key_path)


def _progress(cluster: str, line: str) -> None:
    """One progress line of a cluster check on stderr (``[cluster] ...``)."""
    console().print(f"[{cluster}] {line}", markup=False, highlight=False, style="dim", soft_wrap=True)


def _emit_check(
    outcome: DeviceCheck | StaticCheck | FleetRun,
    human: Callable[[], None],
    checks: list[DeviceCheck],
    attest: bool | None,
    key: str | None,
    default_key: Path,
) -> None:
    """Print ``outcome`` (one --json document, else ``human()``), say when one of its device ``checks`` was
    not signed, raise its failure."""
    failure = outcome.failure()
    if failure is None or not app_context().json_output:  # --json: one document (the error carries it)
        emit(outcome.to_json(), human, report=outcome)
    else:
        from builder.cli.github import report_result

        report_result(outcome)
    for done in checks:  # declared checks that did not run: stderr, also with --json (evidence_skipped[])
        where = done.result.placement.cluster
        for s in done.evidence.skipped if done.evidence is not None else ():
            console().print(
                (f"[{where}] " if where else "") + f"{s.kind} not run: {s.reason}",
                style="yellow",
                markup=False,
                highlight=False,
            )
    unsigned_checks = [c for c in checks if c.attestation is None]
    if unsigned_checks and attest is not False:
        unsigned = Path(key) if key else default_key  # stderr, also with --json
        console().print(
            f"not signed: no check-runner key at {unsigned}; the result is no evidence for a policy "
            f"(create one: `builder keys generate --output-dir {unsigned.parent}`, or pass --key)",
            style="yellow",
            markup=False,
        )
    if failure is not None:
        raise failure


def _print_fleet_run(outcome: FleetRun) -> None:
    """One row per cluster: cluster, runner, node, job id, status; then each failure's diagnosis or error."""
    from builder.cli.tables import Column, fitted_table

    c = console()
    c.print(f"{outcome.reference} on fleet {outcome.fleet}", markup=False, highlight=False)
    columns = [Column("cluster", whole=True), Column("runner"), Column("node", 1), Column("job", 1), Column("status")]
    colour = {"passed": "green", "failed": "red", "error": "red", "skipped": "dim", "not-applicable": "dim"}
    rows = [
        [
            esc(r.cluster),
            r.runner or "-",
            esc(d["node"] or "-"),
            esc(d["job_id"] or "-"),
            f"[{colour[r.status]}]{r.status}[/]",
        ]
        for r, d in ((r, r.to_json()) for r in outcome.clusters)
    ]
    c.print(fitted_table(columns, rows, c.width))
    for r in outcome.clusters:
        if r.check is not None and r.check.result.diagnosis is not None:
            d = r.check.result.diagnosis
            c.print(f"{r.cluster}: {d.key} (at fault: {d.at_fault}): {d.summary}", markup=False, highlight=False)
            c.print(f"  fix: {d.fix}", markup=False, highlight=False)
        elif r.error is not None:
            c.print(f"{r.cluster}: {r.error.message}", markup=False, highlight=False)
            c.print(f"  what to do: {r.error.hint}", markup=False, highlight=False)
        elif r.status == "not-applicable":
            c.print(f"{r.cluster}: not applicable (a GPU image of another vendor)", markup=False, highlight=False)


def _print_static(outcome: StaticCheck) -> None:
    """The verdict (a fleet's summary line, or the host's) and each GPU's or cluster's line and
    reasons, folded at spaces to the console's width (:func:`builder.cli.terminal.fold`)."""
    from builder.cli.terminal import fold
    from builder.compat.fleet_verdicts import FleetCheck

    c = console()
    v = outcome.verdict
    rows: list[tuple[str | None, Verdict, bool, str]]
    if isinstance(v, FleetCheck):  # --fleet: the same summary line as `builder compat fleet`
        c.print(outcome.reference, markup=False, highlight=False, soft_wrap=True)
        c.print(fold(v.header, c.width), markup=False, highlight=False, soft_wrap=True)
        rows = [(cl.name, cv.verdict, v.applies(cl.name), cl.vendor) for cl, cv in v.clusters]
    else:
        c.print(f"{esc(outcome.reference)}: [bold]{esc(v.verdict)}[/]")
        rows = [(g.verdict.gpu, g.verdict, True, g.verdict.vendor) for g in v.gpus]
    for name, verdict, applies, vendor in rows:
        if not applies:
            c.print(f"  {name}: not-applicable ({vendor})", markup=False)
            continue
        minimum = "min ROCm" if verdict.vendor == "amd" else "min driver"  # AMD: ROCm releases (compat)
        line = f"{name}: {verdict.verdict}  {minimum} {verdict.min_driver or '-'}  arch covered {verdict.arch_text}"
        c.print(fold(line, c.width, indent="  "), markup=False, soft_wrap=True)
        for reason in verdict.reasons:
            c.print(fold(f"- {reason}", c.width, indent="    "), markup=False, soft_wrap=True)


def _print_device(outcome: DeviceCheck) -> None:
    c = console()
    result = outcome.result
    where = result.placement
    if where.cluster is not None:
        c.print(
            f"cluster {where.cluster} ({where.runner}): node {where.node or '?'}"
            + (f", job {where.job_id}" if where.job_id else ""),
            markup=False,
            highlight=False,
        )
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
    if outcome.attestation is not None:
        c.print(f"attached device-check/v1 to {esc(outcome.reference)}")
    if outcome.evidence is not None:
        _print_evidence(outcome)


def _print_evidence(outcome: DeviceCheck) -> None:
    """The declared tests and benchmark: one line each (metrics or JUnit totals), then what failed."""
    assert outcome.evidence is not None
    c = console()
    for run in outcome.evidence.runs:
        mark = "[green]ok[/]" if run.passed else "[red]FAIL[/]"
        if run.junit is not None:
            j = run.junit
            what = f"{j.tests} tests, {j.failures} failed, {j.errors} errors, {j.skipped} skipped"
        elif run.collective is not None:
            busbw = run.collective.get("busbw_gbps")
            what = f"{run.collective.get('ranks')} ranks ({run.collective.get('backend')}), busbw {busbw} GB/s"
        else:
            what = f"{len(run.metrics)} metric(s)"
        c.print(f"{mark:>14}  {esc(f'{run.check.kind:<10} {run.step.seconds:7.2f}s  {what}')}")
        for m in run.metrics:  # one per line: names are long
            c.print(f"      {m.name} {m.value:g} {m.unit}", markup=False, highlight=False)
        for line in [*run.problems, *error_lines(run.step.error or "")][:8]:
            c.print(f"      {line}", markup=False, highlight=False)
    if outcome.evidence_written:  # the digest was named on the device-check line: 80 columns
        kinds = " and ".join(f"{p.rsplit('/', 2)[-2]}/v1" for p in outcome.evidence_written)
        to = "the same digest" if outcome.attestation is not None else esc(outcome.reference)
        c.print(f"attached {esc(kinds)} to {to}", highlight=False)
