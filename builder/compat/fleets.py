"""Fleets (``fleets/*.yaml``): the clusters an image must run on. Schema, loader, and one check.

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

Validation collects every problem (file, line, field) and raises one ConfigError with
``details['problems']``. Values are frozen dataclasses; pydantic only reads the YAML.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from builder.compat.drivers import parse_driver
from builder.compat.gpus import gpu_info, normalize_brand
from builder.compat.verdict import SEVERITY, Verdict, check_compat
from builder.errors import BuilderError, ConfigError, NotFoundError

# ------------------------------------------------------------------------------------ input schema


class _ClusterIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr
    vendor: Literal["nvidia", "amd"]
    gpus: list[StrictStr] = Field(default_factory=list)
    drivers: list[StrictStr] = Field(default_factory=list)
    brand: StrictStr | None = None
    cuda: StrictStr | None = None
    rocm: list[StrictStr] = Field(default_factory=list)
    compute_capability: StrictStr | None = None
    nodes: StrictInt | None = None
    hostinfo: list[StrictStr] = Field(default_factory=list)
    description: StrictStr | None = None


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
    top["$defs"] = {"Cluster": {**cluster, "title": "Cluster"}}
    top["title"] = "builder fleet"
    top["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    top["description"] = "Clusters an image must run on (docs/fleets.md). Quote versions."
    return top


# ---------------------------------------------------------------------------------------- values


@dataclasses.dataclass(frozen=True)
class HostConfig:
    """One (driver, GPU) combination of a cluster: what :func:`check_compat` is asked about."""

    driver: str | None
    gpu: str | None
    brand: str | None = None
    driver_cuda: str | None = None
    compute_capability: str | None = None
    source: str = "inline"

    @property
    def label(self) -> str:
        return f"driver {self.driver or 'unknown'}, {self.gpu or 'unknown GPU'}"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A cluster of a fleet. ``configs``: every (driver, GPU) combination its hosts run (inline: the cross
    product of ``drivers`` x ``gpus``; ``hostinfo``: one per host and GPU model)."""

    name: str
    vendor: Literal["nvidia", "amd"]
    gpus: tuple[str, ...]
    drivers: tuple[str, ...]
    brand: str | None
    cuda: str | None
    rocm: tuple[str, ...]
    nodes: int | None
    configs: tuple[HostConfig, ...]
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fleet:
    name: str
    path: str
    clusters: tuple[Cluster, ...]
    description: str | None = None

    def cluster(self, name: str) -> Cluster | None:
        return next((c for c in self.clusters if c.name == name), None)


# -------------------------------------------------------------------------------------- loading


def _line_of(node: Any, loc: Sequence[Any]) -> int | None:
    """1-based line of ``loc`` inside a ruamel round-trip tree (None when unknown)."""
    line: int | None = None
    cur = node
    for part in loc:
        lc = getattr(cur, "lc", None)
        try:
            if lc is not None and isinstance(part, str) and part in cur:
                line = lc.key(part)[0] + 1
            elif lc is not None and isinstance(part, int) and 0 <= part < len(cur):
                line = lc.item(part)[0] + 1
            cur = cur[part]
        except (KeyError, IndexError, TypeError, AttributeError):
            break
    return line


def _loc_text(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def _problem(path: Path, line: int | None, field: str, message: str) -> dict[str, Any]:
    return {"file": str(path), "line": line, "field": field, "message": message}


def _format(problems: list[dict[str, Any]]) -> str:
    lines = []
    for p in problems:
        where = f"{p['file']}:{p['line']}" if p.get("line") else p["file"]
        lines.append(f"  {where}: {p['field']}: {p['message']}")
    return "\n".join(lines)


def load_fleet(path: Path) -> Fleet:
    """Read and validate a fleet file. Raises ConfigError with ``details['problems']`` (every problem, each
    with file, line, field and message), NotFoundError-free: a missing file is a ConfigError problem too."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read fleet file {path}: {exc.strerror or exc}",
            hint="pass an existing fleets/*.yaml file",
            problems=[_problem(path, None, "(file)", str(exc))],
        ) from None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        tree = YAML(typ="rt").load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(
            f"fleet file {path} is not valid YAML: {exc}",
            hint="fix the YAML syntax at the line shown",
            problems=[_problem(path, line, "(file)", f"invalid YAML: {getattr(exc, 'problem', exc)}")],
        ) from None
    return fleet_from_data(tree, path=path)


def resolve_fleet_path(name_or_path: str, fleets_dir: Path) -> Path:
    """``"demo"`` -> ``<fleets_dir>/demo.yaml``; an existing path (or one with a ``.yaml``/``.yml`` suffix) as is.
    Raises NotFoundError naming the fleets known in ``fleets_dir``."""
    p = Path(name_or_path)
    if p.exists() or p.suffix in (".yaml", ".yml"):
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


def load_fleets(fleets_dir: Path) -> tuple[Fleet, ...]:
    """Every ``*.yaml`` / ``*.yml`` fleet in a directory, sorted by file name; ConfigError for the first invalid one."""
    if not fleets_dir.is_dir():
        return ()
    files = sorted([*fleets_dir.glob("*.yaml"), *fleets_dir.glob("*.yml")])
    return tuple(load_fleet(f) for f in files)


def fleet_from_data(tree: Any, *, path: Path) -> Fleet:
    """Validate an already-parsed fleet document (a ruamel tree gives line numbers; plain dicts work too)."""
    problems: list[dict[str, Any]] = []

    def schema_errors(exc: ValidationError, prefix: list[Any]) -> None:
        for err in exc.errors():
            loc = [*prefix, *err["loc"]]
            # pydantic adds the union member / type name to loc for Optional fields: keep real keys only
            loc = [p for p in loc if isinstance(p, int) or not str(p).startswith(("str", "int", "list", "function"))]
            msg = err["msg"]
            if err["type"] in ("string_type",) and isinstance(err.get("input"), (int, float)):
                msg = f"{msg}: got {err['input']!r}; quote versions (YAML reads 550.135 as a number)"
            problems.append(_problem(path, _line_of(tree, loc), _loc_text(loc), msg))

    def fail() -> ConfigError:
        return ConfigError(
            f"fleet file {path} is invalid ({len(problems)} problem(s)):\n{_format(problems)}",
            hint="fix each listed field; see docs/fleets.md for the schema",
            problems=problems,
        )

    try:
        model = _FleetIn.model_validate(_plain(tree))
    except ValidationError as exc:
        schema_errors(exc, [])
        raise fail() from None
    # clusters one by one, so that a schema error in one does not hide the problems of the others
    valid: list[tuple[int, _ClusterIn]] = []
    for i, raw in enumerate(model.clusters):
        try:
            valid.append((i, _ClusterIn.model_validate(raw)))
        except ValidationError as exc:
            schema_errors(exc, ["clusters", i])

    clusters: list[Cluster] = []
    seen: set[str] = set()
    for i, c in valid:
        base = ["clusters", i]

        def add(field: Sequence[Any], message: str, base: list[Any] = base) -> None:
            loc = [*base, *field]
            problems.append(_problem(path, _line_of(tree, loc), _loc_text(loc), message))

        if c.name in seen:
            add(["name"], f"duplicate cluster name {c.name!r}")
        seen.add(c.name)
        if not c.gpus and not c.hostinfo:
            add(["gpus"], "a cluster needs gpus (with drivers) or hostinfo files")
        if c.vendor == "nvidia" and c.gpus and not c.drivers and not c.hostinfo:
            add(["drivers"], "an NVIDIA cluster needs its driver versions (nvidia-smi 'Driver Version')")
        if c.vendor == "amd" and c.cuda:
            add(["cuda"], "cuda is for NVIDIA clusters (AMD: rocm)")
        if c.vendor == "nvidia" and c.rocm:
            add(["rocm"], "rocm is for AMD clusters")
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
        configs: list[HostConfig] = []
        # NVIDIA: driver x GPU. AMD: the ROCm release of the amdgpu driver x GPU (``drivers`` stays informational:
        # amdgpu versions such as 6.10.5 are not ROCm releases)
        check_drivers: list[str | None] = [*c.drivers] if c.vendor == "nvidia" else [*c.rocm] or [None]
        for drv in check_drivers:
            for g in c.gpus:
                configs.append(
                    HostConfig(
                        driver=drv, gpu=g, brand=c.brand, driver_cuda=c.cuda, compute_capability=c.compute_capability
                    )
                )
        sources: list[str] = []
        gpus = list(c.gpus)
        drivers = list(c.drivers)
        for j, rel in enumerate(c.hostinfo):
            file = (path.parent / rel) if not Path(rel).is_absolute() else Path(rel)
            sources.append(str(file))
            try:
                host = _load_host(file)
            except BuilderError as exc:
                add(["hostinfo", j], exc.message)
                continue
            hvendor = host.get("vendor")
            if hvendor not in (None, "none", c.vendor):
                add(["hostinfo", j], f"{rel}: host vendor is {hvendor}, cluster vendor is {c.vendor}")
                continue
            driver = host.get("driver_version")
            if c.vendor == "amd":
                driver = host.get("rocm_version") or (c.rocm[0] if c.rocm else None)
            if c.vendor == "nvidia" and not driver:
                add(["hostinfo", j], f"{rel}: no driver version in the host description")
                continue
            hgpus = host.get("gpus") or []
            if not hgpus:
                add(["hostinfo", j], f"{rel}: no GPUs in the host description")
                continue
            seen_models: set[tuple[Any, ...]] = set()
            for g in hgpus:
                known = gpu_info(g["name"]) if g.get("name") else None
                target = g.get("compute_capability") or g.get("gfx_target") or (known.target if known else None)
                key = (g.get("name"), g.get("brand"), target)
                if key in seen_models:
                    continue
                seen_models.add(key)
                brand = g.get("brand") if g.get("brand_source") not in ("name",) else None
                configs.append(
                    HostConfig(
                        driver=driver,
                        gpu=g.get("name"),
                        brand=brand or c.brand,
                        driver_cuda=host.get("cuda_version") if c.vendor == "nvidia" else None,
                        compute_capability=g.get("compute_capability") or g.get("gfx_target") or c.compute_capability,
                        source=rel,
                    )
                )
                if g.get("name") and g["name"] not in gpus:
                    gpus.append(g["name"])
            if driver and c.vendor == "nvidia" and driver not in drivers:
                drivers.append(driver)
        clusters.append(
            Cluster(
                name=c.name,
                vendor=c.vendor,
                gpus=tuple(gpus),
                drivers=tuple(drivers),
                brand=normalize_brand(c.brand) if c.brand else None,
                cuda=c.cuda,
                rocm=tuple(c.rocm),
                nodes=c.nodes,
                configs=tuple(configs),
                sources=tuple(sources),
                notes=tuple(notes),
            )
        )
    if problems:
        problems.sort(key=lambda p: (p["line"] or 0, p["field"]))
        raise fail()
    return Fleet(name=model.name or path.stem, path=str(path), clusters=tuple(clusters), description=model.description)


def _plain(node: Any) -> Any:
    """ruamel round-trip tree -> plain dict/list/scalars (keeps ints/floats as numbers)."""
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def _load_host(file: Path) -> dict[str, Any]:
    """A saved host description as a dict with vendor, driver_version, cuda_version, rocm_version and gpus
    [{name, brand, brand_source, compute_capability, gfx_target}]. Uses ``builder.checks.hostinfo.load_hostinfo``
    (raw nvidia-smi / rocm-smi output or hostinfo JSON) when that module is present; else hostinfo JSON only."""
    if not file.exists():
        raise ConfigError(f"{file} does not exist", hint="paths in hostinfo: are relative to the fleet file")
    try:
        module = importlib.import_module("builder.checks.hostinfo")
        loader = getattr(module, "load_hostinfo", None)
    except ImportError:
        loader = None
    if loader is not None:
        info = loader(file)
        data = info.to_json() if hasattr(info, "to_json") else dataclasses.asdict(info)
        return dict(data)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{file} is not hostinfo JSON ({exc}); raw tool output needs builder.checks.hostinfo",
            hint="save it with `builder hostinfo --json > FILE`",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: hostinfo JSON must be an object")
    return data


# --------------------------------------------------------------------------------------- checking


@dataclasses.dataclass(frozen=True)
class ClusterVerdict:
    """Verdict of one cluster: the worst of its host configurations, plus each one."""

    cluster: str
    verdict: Verdict
    configs: tuple[tuple[HostConfig, Verdict], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            **self.verdict.to_json(),
            "hosts": [{"host": dataclasses.asdict(h), **v.to_json()} for h, v in self.configs],
        }


def check_cluster(
    cluster: Cluster,
    *,
    cuda: str | None = None,
    require: str | None = None,
    rocm: str | None = None,
    image_archs: tuple[str, ...] = (),
) -> ClusterVerdict:
    """:func:`check_compat` for every configuration of a cluster; the cluster's verdict is the worst one,
    its reasons prefixed with the configuration ("driver 550.144.03, NVIDIA H100 ...: ...")."""
    results: list[tuple[HostConfig, Verdict]] = []
    for h in cluster.configs:
        v = check_compat(
            driver=h.driver,
            gpu=h.gpu,
            brand=h.brand,
            cuda=cuda,
            require=require,
            rocm=rocm,
            image_archs=image_archs,
            compute_capability=h.compute_capability,
            driver_cuda_version=h.driver_cuda,
            vendor=cluster.vendor,
        )
        results.append((h, v))
    if not results:
        empty = Verdict("blocked", None, (f"cluster {cluster.name} has no host configurations",), vendor=cluster.vendor)
        return ClusterVerdict(cluster.name, empty, ())
    _, worst_v = max(results, key=lambda hv: SEVERITY[hv[1].verdict])
    reasons = tuple(
        f"{h.label}: {v.verdict}: {r}" for h, v in results if v.verdict == worst_v.verdict for r in v.reasons
    )
    drivers = [v.min_driver for _, v in results if v.min_driver]
    from packaging.version import Version

    need = max(drivers, key=Version) if drivers else None
    covered = [v.arch_covered for _, v in results]
    arch = False if False in covered else (None if None in covered else True)
    combined = dataclasses.replace(worst_v, reasons=reasons, min_driver=need, arch_covered=arch)
    return ClusterVerdict(cluster.name, combined, tuple(results))


def check_fleet(
    fleet: Fleet,
    *,
    cuda: str | None = None,
    require: str | None = None,
    rocm: str | None = None,
    image_archs: tuple[str, ...] = (),
    clusters: Iterable[str] | None = None,
) -> list[tuple[Cluster, Verdict]]:
    """Check an image (its CUDA line / NVIDIA_REQUIRE_CUDA / ROCm release and compiled architectures)
    against every cluster of a fleet (or the named ones). Returns ``[(cluster, verdict)]`` in file order,
    each verdict the worst over the cluster's configurations. Use :func:`check_cluster` for the detail."""
    wanted = set(clusters) if clusters is not None else None
    out = []
    for c in fleet.clusters:
        if wanted is not None and c.name not in wanted:
            continue
        out.append((c, check_cluster(c, cuda=cuda, require=require, rocm=rocm, image_archs=image_archs).verdict))
    return out


# --------------------------------------------------------------------------------- fleet summary

NOT_APPLICABLE = "not-applicable"


def image_vendor(accelerator: str | None) -> Literal["nvidia", "amd", "none"]:
    """The GPU vendor an image is built for, from its accelerator kind (the ``io.builder.accelerator``
    label / ``Accelerator.kind``): ``cuda`` -> ``nvidia``, ``rocm`` -> ``amd``, anything else (``cpu``,
    unknown) -> ``none`` (a CPU image applies to every cluster)."""
    return "nvidia" if accelerator == "cuda" else "amd" if accelerator == "rocm" else "none"


@dataclasses.dataclass(frozen=True)
class FleetSummary:
    """One fleet verdict, the same for ``builder compat fleet``, ``builder check --static --fleet`` and
    ``builder run``: the WORST verdict over the *applicable* clusters.

    A cluster applies when its vendor is the image's (``image_vendor``; a CPU image, vendor ``none``,
    applies to every cluster); the others are ``not-applicable`` (a CUDA image is not expected to run on
    an AMD cluster), never ``blocked``. ``verdict``: ``blocked`` when any applicable cluster is blocked,
    or when no cluster applies (nothing in the fleet can run the image); else the worst of ``ok`` <
    ``minor-version-compat`` < ``forward-compat``. ``runs_on``: applicable clusters not blocked;
    ``blocked_on``: applicable clusters blocked; ``not_applicable``: clusters of another vendor;
    ``clusters``: ``(cluster, verdict)`` in file order, ``not-applicable`` for the skipped ones.
    ``blocked`` is what the CLIs turn into exit 11 (IncompatibleError)."""

    verdict: str
    runs_on: tuple[str, ...]
    blocked_on: tuple[str, ...]
    not_applicable: tuple[str, ...]
    clusters: tuple[tuple[str, str], ...]
    image_vendor: str

    @property
    def blocked(self) -> bool:
        return self.verdict == "blocked"

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the verdict is what it is, one line (empty when every applicable cluster is ok)."""
        if not self.runs_on and not self.blocked_on:
            return (f"no cluster of the fleet has the image's GPU vendor ({self.image_vendor})",)
        if self.blocked_on:
            return (f"cannot run on cluster(s): {', '.join(self.blocked_on)}",)
        return ()

    def header(self, fleet: str) -> str:
        """The one-line summary both CLIs print first (plain text, no markup)."""
        text = f"fleet {fleet}: {self.verdict}"
        if self.runs_on:
            text += f"  runs on: {', '.join(self.runs_on)}"
        if self.blocked_on:
            text += f"  blocked on: {', '.join(self.blocked_on)}"
        if self.not_applicable:
            text += f"  not applicable ({self.image_vendor} image): {', '.join(self.not_applicable)}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "image_vendor": self.image_vendor,
            "runs_on": list(self.runs_on),
            "blocked_on": list(self.blocked_on),
            "not_applicable": list(self.not_applicable),
        }


def summarize(results: Iterable[tuple[str, str, str]], image_vendor: str | None) -> FleetSummary:
    """The fleet verdict (see :class:`FleetSummary`) of ``results``: ``(cluster name, cluster vendor,
    cluster verdict)`` in file order (e.g. from :func:`check_fleet`: ``(c.name, c.vendor, v.verdict)``).
    ``image_vendor``: ``nvidia`` | ``amd`` | ``none``/None (CPU image: every cluster applies)."""
    vendor = image_vendor or "none"
    rows: list[tuple[str, str]] = []
    applicable: list[tuple[str, str]] = []
    skipped: list[str] = []
    for name, cluster_vendor, verdict in results:
        if vendor != "none" and cluster_vendor != vendor:
            skipped.append(name)
            rows.append((name, NOT_APPLICABLE))
        else:
            applicable.append((name, verdict))
            rows.append((name, verdict))
    if applicable:
        overall = max((v for _, v in applicable), key=lambda v: SEVERITY.get(v, SEVERITY["blocked"]))
    else:
        overall = "blocked"
    return FleetSummary(
        verdict=overall,
        runs_on=tuple(n for n, v in applicable if v != "blocked"),
        blocked_on=tuple(n for n, v in applicable if v == "blocked"),
        not_applicable=tuple(skipped),
        clusters=tuple(rows),
        image_vendor=vendor,
    )


__all__ = [
    "NOT_APPLICABLE",
    "Cluster",
    "ClusterVerdict",
    "Fleet",
    "FleetSummary",
    "HostConfig",
    "check_cluster",
    "check_fleet",
    "fleet_from_data",
    "fleet_json_schema",
    "image_vendor",
    "load_fleet",
    "load_fleets",
    "resolve_fleet_path",
    "summarize",
]
