"""Fleets (``fleets/*.yaml``): the clusters an image must run on. Schema, loader and the ``--fleet`` resolver.

Values: :mod:`builder.compat.fleet_model`; verdicts: :mod:`builder.compat.fleet_verdicts` (re-exported here).

A fleet file lists clusters; each names its vendor (``nvidia`` | ``amd``), GPU models and driver
versions inline, or points at saved host descriptions (``hostinfo:``: ``builder hostinfo --json``
output or raw ``nvidia-smi`` / ``nvidia-smi -q`` / ``rocm-smi`` output, paths relative to the fleet
file). Checks, policies and ``resolve`` call :func:`check_fleet` so that they all share one answer.

Schema (docs/fleets.md)::

    name: demo                      # optional; default: the file stem
    clusters:
      - name: h100-train            # unique
        vendor: nvidia
        gpus: ["NVIDIA H100 80GB HBM3"]
        drivers: ["550.144.03"]     # quote versions: YAML reads 550.135 as a number
        brand: NVIDIA               # optional: nvidia-smi -q "Product Brand"
        cuda: "12.4"                # optional: nvidia-smi "CUDA Version"
        nodes: 64                   # optional, informational
      - name: mi300x
        vendor: amd
        gpus: ["AMD Instinct MI300X"]
        rocm: ["6.3"]               # ROCm release(s) of the hosts' amdgpu driver
      - name: lab
        vendor: nvidia
        hostinfo: [hosts/lab-01.json, hosts/lab-02-nvidia-smi.txt]

Validation collects every problem (:class:`builder.yamldoc.Problem`: file, line, col, path, message)
and raises one ConfigError with ``details['problems']`` (each ``Problem.to_json()``). Values are frozen
dataclasses; pydantic only reads the YAML.

``hostinfo:`` files are read by a *host loader* the caller passes (``load_fleet(path, load_host=...)``;
the CLI passes ``builder.checks.host.reading.load_host``): compat knows what a host description must say
(:class:`HostFacts`), not how ``nvidia-smi`` output looks, so it never imports ``builder.checks``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from builder.compat.drivers import parse_driver
from builder.compat.fleet_model import (
    Cluster,
    Fleet,
    GpuFacts,
    HostConfig,
    HostFacts,
    HostLoader,
    RunnerKind,
    RunnerSettings,
    SlurmLauncher,
)
from builder.compat.fleet_verdicts import (
    NOT_APPLICABLE,
    ClusterVerdict,
    FleetCheck,
    FleetSummary,
    check_cluster,
    check_fleet,
    check_fleet_image,
    image_vendor,
    summarize,
)
from builder.compat.gpus import gpu_info, normalize_brand
from builder.errors import BuilderError, ConfigError, NotFoundError
from builder.models import GpuVendor, Vendor
from builder.textfiles import read_text
from builder.yamldoc import Document, InvalidYaml, Problem, parse, plain

if TYPE_CHECKING:
    from builder.compat.check import ImageSpec

# ------------------------------------------------------------------------------------ input schema


class _RunnerIn(BaseModel):
    """``runner:`` of a cluster (docs/fleets.md): how checks reach it."""

    model_config = ConfigDict(extra="forbid", title="Runner")

    kind: RunnerKind
    host: StrictStr | None = None
    partition: StrictStr | None = None
    account: StrictStr | None = None
    qos: StrictStr | None = None
    gres: StrictStr | None = None
    time_limit: StrictInt | None = Field(default=None, gt=0)
    launcher: SlurmLauncher = "docker"
    context: StrictStr | None = None
    namespace: StrictStr = "default"
    runtime_class: StrictStr | None = None
    gpu_product: StrictStr | None = None
    node_selector: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    gpus: StrictInt = Field(default=1, ge=1)


#: the runner fields that only mean something for one kind (a field given to another kind is a mistake)
_RUNNER_FIELDS: dict[str, tuple[str, ...]] = {
    "host": ("docker", "podman"),
    "partition": ("slurm",),
    "account": ("slurm",),
    "qos": ("slurm",),
    "gres": ("slurm",),
    "time_limit": ("slurm",),
    "launcher": ("slurm",),
    "context": ("kubernetes",),
    "namespace": ("kubernetes",),
    "runtime_class": ("kubernetes",),
    "gpu_product": ("kubernetes",),
    "node_selector": ("kubernetes",),
    "gpus": ("kubernetes",),
}


class _ClusterIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr
    vendor: GpuVendor
    gpus: list[StrictStr] = Field(default_factory=list)
    drivers: list[StrictStr] = Field(default_factory=list)
    brand: StrictStr | None = None
    cuda: StrictStr | None = None
    rocm: list[StrictStr] = Field(default_factory=list)
    compute_capability: StrictStr | None = None
    nodes: StrictInt | None = None
    hostinfo: list[StrictStr] = Field(default_factory=list)
    description: StrictStr | None = None
    runner: _RunnerIn | None = None


class _FleetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr | None = None
    description: StrictStr | None = None
    clusters: list[dict[str, Any]] = Field(min_length=1)  # each validated as _ClusterIn on its own


def fleet_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a fleet file, generated from the input models; committed as
    ``fleets/fleet.schema.json`` for editors and ``check-jsonschema`` (a unit test keeps it current)."""
    cluster = _ClusterIn.model_json_schema()
    top = _FleetIn.model_json_schema()
    top["properties"]["clusters"] = {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Cluster"}}
    nested = cluster.pop("$defs", {})  # the runner: refs are "#/$defs/<name>", so they live at the top
    top["$defs"] = {**nested, "Cluster": {**cluster, "title": "Cluster"}}
    top["title"] = "builder fleet"
    top["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    top["description"] = "Clusters an image must run on (docs/fleets.md). Quote versions."
    return top


# -------------------------------------------------------------------------------------- loading


def _format(problems: list[Problem]) -> str:
    return "\n".join(f"  {p}" for p in problems)


def load_fleet(path: Path, *, load_host: HostLoader | None = None, data: bytes | None = None) -> Fleet:
    """Read and validate a fleet file. ``load_host`` reads the clusters' ``hostinfo:`` files (None: such a
    cluster is a problem); ``data``: the file's bytes when the caller already read them (validated as
    given, the file not read again: what a caller hashed is what is validated). Raises ConfigError with
    ``details['problems']`` (every problem, each a ``Problem.to_json()``: file, line, col, path,
    message, severity); a missing file is a ConfigError too."""
    path = Path(path)
    try:
        # UTF-8, at most yamldoc.MAX_BYTES (parse refuses a longer text)
        text = read_text(path) if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc})"
        raise ConfigError(
            f"cannot read fleet file {path}: {why or exc}",
            hint="pass an existing fleets/*.yaml file",
            problems=[Problem(str(path), 0, 0, "", str(exc)).to_json()],
        ) from None
    try:
        doc = parse(text, str(path))
    except InvalidYaml as exc:
        raise ConfigError(
            f"fleet file {exc.problem.location}: {exc.problem.message}",
            hint="fix the YAML syntax at the line shown",
            problems=[exc.problem.to_json()],
        ) from None
    return fleet_from_data(doc.root, path=path, load_host=load_host)


def resolve_fleet_path(name_or_path: str, fleets_dir: Path) -> Path:
    """What ``--fleet`` means, everywhere it exists: a fleet NAME (``"demo"`` -> ``<fleets_dir>/demo.yaml`` or
    ``.yml``) or a FILE (an existing path, or any value with a ``.yaml``/``.yml`` suffix or a ``/``).
    Raises NotFoundError for a file that does not exist, or a name not in ``fleets_dir`` (naming the known
    fleets)."""
    p = Path(name_or_path)
    if p.exists() or p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        if not p.exists():
            raise NotFoundError(f"fleet file {p} does not exist", hint="pass an existing fleets/*.yaml file")
        return p
    for suffix in (".yaml", ".yml"):
        candidate = fleets_dir / f"{name_or_path}{suffix}"
        if candidate.exists():
            return candidate
    known = sorted(f.stem for f in fleets_dir.glob("*.y*ml")) if fleets_dir.is_dir() else []
    raise NotFoundError(
        f"no fleet named {name_or_path!r} in {fleets_dir} (known: {', '.join(known) or 'none'})",
        hint="name a file in the fleets directory (builder.toml `fleets_dir`) or pass a path",
    )


def check_fleet_file(
    fleet: str | Path,
    image: ImageSpec,
    *,
    fleets_dir: Path,
    load_host: HostLoader,
    image_vendor: Vendor | None = None,
    clusters: Sequence[str] = (),
) -> FleetCheck:
    """``builder compat fleet``: the fleet ``fleet`` (a NAME in ``fleets_dir`` or a FILE, as
    :func:`resolve_fleet_path` reads it) loaded with ``load_host`` and checked against ``image``
    (:func:`check_fleet_image`; ``image_vendor`` default: the image's, ``amd`` for ROCm, else ``nvidia``).
    Raises NotFoundError (no such fleet), ConfigError (invalid fleet file or versions)."""
    path = fleet if isinstance(fleet, Path) else resolve_fleet_path(fleet, fleets_dir)
    loaded = load_fleet(path, load_host=load_host)
    return check_fleet_image(loaded, image, image_vendor=image_vendor or image.vendor, clusters=clusters)


def load_fleets(fleets_dir: Path, *, load_host: HostLoader | None = None) -> tuple[Fleet, ...]:
    """Every ``*.yaml`` / ``*.yml`` fleet in a directory, sorted by file name; ConfigError for the first invalid one."""
    if not fleets_dir.is_dir():
        return ()
    files = sorted([*fleets_dir.glob("*.yaml"), *fleets_dir.glob("*.yml")])
    return tuple(load_fleet(f, load_host=load_host) for f in files)


def find_cluster(fleets: Sequence[Fleet], name: str) -> tuple[Fleet, Cluster]:
    """The fleet and cluster called ``name`` (the first of ``fleets`` that has it): the one lookup of a
    cluster by name (``check --cluster``, ``resolve --cluster``). Raises NotFoundError ("unknown
    cluster") naming the fleet files looked in and every cluster they have."""
    for fleet in fleets:
        found = fleet.cluster(name)
        if found is not None:
            return fleet, found
    known = sorted({c.name for f in fleets for c in f.clusters})
    raise NotFoundError(
        f"unknown cluster {name!r}: no cluster named so in {', '.join(f.path for f in fleets) or 'any fleet file'} "
        f"(known: {', '.join(known) or 'none'})",
        hint="name a cluster of a fleet file (fleets/*.yaml), or pass --fleet FILE",
        cluster=name,
        known=known,
    )


@dataclasses.dataclass
class _Problems:
    """The problems found in one fleet file, each located in its tree (a line when the tree is ruamel's)."""

    path: Path
    doc: Document
    items: list[Problem] = dataclasses.field(default_factory=list)

    def add(self, base: Sequence[int | str], field: Sequence[int | str], message: str) -> None:
        """A problem at ``base`` + ``field`` (e.g. ``["clusters", 0]`` + ``["drivers", 1]``)."""
        self.items.append(self.doc.problem([*base, *field], message, default=(0, 0)))

    def schema_errors(self, exc: ValidationError, prefix: Sequence[int | str]) -> None:
        """One problem per pydantic error of ``exc``, located under ``prefix``."""
        for err in exc.errors():
            loc = [*prefix, *err["loc"]]
            # pydantic adds the union member / type name to loc for Optional fields: keep real keys only
            loc = [p for p in loc if isinstance(p, int) or not str(p).startswith(("str", "int", "list", "function"))]
            msg = err["msg"]
            if err["type"] in ("string_type",) and isinstance(err.get("input"), (int, float)):
                msg = f"{msg}: got {err['input']!r}; quote versions (YAML reads 550.135 as a number)"
            self.add(loc, (), msg)

    def error(self) -> ConfigError:
        """The ConfigError listing every problem (``details['problems']``: each ``Problem.to_json()``)."""
        return ConfigError(
            f"fleet file {self.path} is invalid ({len(self.items)} problem(s)):\n{_format(self.items)}",
            hint="fix each listed field; see docs/fleets.md for the schema",
            problems=[p.to_json() for p in self.items],
        )


#: reports a problem at a field of one cluster (``["drivers", 1]``) and its message
_AddProblem = Callable[[Sequence[int | str], str], None]


def fleet_from_data(tree: object, *, path: Path, load_host: HostLoader | None = None) -> Fleet:
    """Validate an already-parsed fleet document (a ruamel tree gives line numbers; plain dicts work too).
    ``load_host``: see :func:`load_fleet`. Raises ConfigError listing every problem."""
    problems = _Problems(path, Document(str(path), tree))
    if not isinstance(tree, Mapping):
        problems.add((), (), "a fleet file is a mapping with `clusters:` (docs/fleets.md)")
        raise problems.error()
    try:
        model = _FleetIn.model_validate(plain(tree))
    except ValidationError as exc:
        problems.schema_errors(exc, [])
        raise problems.error() from None
    # clusters one by one, so that a schema error in one does not hide the problems of the others
    valid: list[tuple[int, _ClusterIn]] = []
    for i, raw in enumerate(model.clusters):
        try:
            valid.append((i, _ClusterIn.model_validate(raw)))
        except ValidationError as exc:
            problems.schema_errors(exc, ["clusters", i])

    clusters: list[Cluster] = []
    seen: set[str] = set()
    for i, c in valid:
        add: _AddProblem = functools.partial(problems.add, ["clusters", i])
        if c.name in seen:
            add(["name"], f"duplicate cluster name {c.name!r}")
        seen.add(c.name)
        notes = _cluster_problems(c, add)
        clusters.append(_cluster(c, notes, _read_hostinfo(c, path, load_host, add)))
    if problems.items:
        problems.items.sort(key=lambda p: (p.line, p.path))
        raise problems.error()
    return Fleet(name=model.name or path.stem, path=str(path), clusters=tuple(clusters), description=model.description)


def _cluster_problems(c: _ClusterIn, add: _AddProblem) -> list[str]:
    """Report what is missing or contradictory in ``c``'s inline fields; returns the notes (GPUs not in
    the table: class and architecture unknown, not an error)."""
    if not c.gpus and not c.hostinfo:
        add(["gpus"], "a cluster needs gpus (with drivers) or hostinfo files")
    if c.vendor == "nvidia" and c.gpus and not c.drivers and not c.hostinfo:
        add(["drivers"], "an NVIDIA cluster needs its driver versions (nvidia-smi 'Driver Version')")
    if c.vendor == "amd" and c.cuda:
        add(["cuda"], "cuda is for NVIDIA clusters (AMD: rocm)")
    if c.vendor == "nvidia" and c.rocm:
        add(["rocm"], "rocm is for AMD clusters")
    if c.runner is not None:
        given = c.runner.model_fields_set
        for fname in sorted(given):
            kinds = _RUNNER_FIELDS.get(fname)
            if kinds is not None and c.runner.kind not in kinds:
                add(["runner", fname], f"{fname} is for {' and '.join(kinds)} runners, not {c.runner.kind}")
    for j, d in enumerate(c.drivers):
        try:
            parse_driver(d)
        except BuilderError:
            add(["drivers", j], f"{d!r} is not a driver version")
    notes: list[str] = []
    for j, g in enumerate(c.gpus):
        info = gpu_info(g)
        if info is None:
            notes.append(f"GPU {g!r} is not in builder/compat/data/gpus.csv (class and architecture unknown)")
        elif info.vendor != c.vendor:
            add(["gpus", j], f"{g!r} is an {info.vendor} GPU but the cluster's vendor is {c.vendor}")
    return notes


@dataclasses.dataclass(frozen=True)
class _SavedHosts:
    """What a cluster's ``hostinfo:`` files gave: the configurations of each usable host (file order) and
    every file named (``sources``, usable or not)."""

    hosts: tuple[list[HostConfig], ...]
    sources: tuple[str, ...]


def _read_hostinfo(c: _ClusterIn, path: Path, load_host: HostLoader | None, add: _AddProblem) -> _SavedHosts:
    """Load ``c``'s ``hostinfo:`` files (relative to the fleet file ``path``) with ``load_host``; a missing
    or unusable file is reported through ``add``."""
    hosts: list[list[HostConfig]] = []
    sources: list[str] = []
    for j, rel in enumerate(c.hostinfo):
        file = (path.parent / rel) if not Path(rel).is_absolute() else Path(rel)
        sources.append(str(file))
        if not file.exists():
            add(["hostinfo", j], f"{file} does not exist (paths in hostinfo: are relative to the fleet file)")
            continue
        if load_host is None:
            add(["hostinfo", j], f"{rel}: this command reads no hostinfo files (no host loader was given)")
            continue
        try:
            host = load_host(file)
        except BuilderError as exc:
            add(["hostinfo", j], exc.message)
            continue
        found = _host_configs(host, c, rel)
        if isinstance(found, str):
            add(["hostinfo", j], found)
            continue
        hosts.append(found)
    return _SavedHosts(tuple(hosts), tuple(sources))


def _cluster(c: _ClusterIn, notes: list[str], saved: _SavedHosts) -> Cluster:
    """The cluster value: the configurations to check (inline driver x GPU, then each saved host's), its GPU
    models and driver versions (inline, then new ones from the saved hosts)."""
    # NVIDIA: driver x GPU. AMD: the ROCm release of the amdgpu driver x GPU (``drivers`` stays informational:
    # amdgpu versions such as 6.10.5 are not ROCm releases)
    check_drivers: list[str | None] = [*c.drivers] if c.vendor == "nvidia" else [*c.rocm] or [None]
    configs = [
        HostConfig(
            driver=drv,
            gpu=g,
            brand=c.brand,
            driver_cuda=c.cuda,
            compute_capability=c.compute_capability,
            vendor=c.vendor,
        )
        for drv in check_drivers
        for g in c.gpus
    ]
    gpus = list(c.gpus)
    drivers = list(c.drivers)
    for found in saved.hosts:
        configs.extend(found)
        gpus.extend(h.gpu for h in found if h.gpu and h.gpu not in gpus)
        driver = found[0].driver if found else None
        if driver and c.vendor == "nvidia" and driver not in drivers:
            drivers.append(driver)
    return Cluster(
        name=c.name,
        vendor=c.vendor,
        gpus=tuple(gpus),
        drivers=tuple(drivers),
        brand=normalize_brand(c.brand) if c.brand else None,
        cuda=c.cuda,
        rocm=tuple(c.rocm),
        nodes=c.nodes,
        configs=tuple(configs),
        sources=saved.sources,
        notes=tuple(notes),
        runner=_runner(c.runner),
    )


def _runner(r: _RunnerIn | None) -> RunnerSettings | None:
    """The frozen runner settings of a validated ``runner:`` (None: the cluster names no runner)."""
    if r is None:
        return None
    fields = r.model_dump(exclude={"node_selector"})
    return RunnerSettings(**fields, node_selector=tuple(sorted(r.node_selector.items())))


def _host_configs(host: HostFacts, c: _ClusterIn, rel: str) -> list[HostConfig] | str:
    """One HostConfig per GPU model of a saved host (the cluster's brand / compute capability fill gaps), or
    the problem (a message) that makes the host unusable for the cluster."""
    if host.vendor not in ("none", c.vendor):
        return f"{rel}: host vendor is {host.vendor}, cluster vendor is {c.vendor}"
    driver = host.driver_version
    if c.vendor == "amd":
        driver = host.rocm_version or (c.rocm[0] if c.rocm else None)
    if c.vendor == "nvidia" and not driver:
        return f"{rel}: no driver version in the host description"
    if not host.gpus:
        return f"{rel}: no GPUs in the host description"
    out: list[HostConfig] = []
    seen: set[tuple[str | None, str | None, str | None]] = set()
    for g in host.gpus:
        known = gpu_info(g.name) if g.name else None
        target = g.compute_capability or g.gfx_target or (known.target if known else None)
        key = (g.name, g.brand, target)
        if key in seen:
            continue
        seen.add(key)
        brand = g.brand if g.brand_source != "name" else None  # a derived brand: check_compat derives it again
        out.append(
            HostConfig(
                driver=driver,
                gpu=g.name,
                brand=brand or c.brand,
                driver_cuda=host.cuda_version if c.vendor == "nvidia" else None,
                compute_capability=g.compute_capability or g.gfx_target or c.compute_capability,
                source=rel,
                vendor=c.vendor,
            )
        )
    return out


__all__ = [
    "NOT_APPLICABLE",
    "Cluster",
    "ClusterVerdict",
    "Fleet",
    "FleetCheck",
    "FleetSummary",
    "GpuFacts",
    "HostConfig",
    "HostFacts",
    "HostLoader",
    "RunnerSettings",
    "check_cluster",
    "check_fleet",
    "check_fleet_file",
    "check_fleet_image",
    "find_cluster",
    "fleet_from_data",
    "fleet_json_schema",
    "image_vendor",
    "load_fleet",
    "load_fleets",
    "resolve_fleet_path",
    "summarize",
]
