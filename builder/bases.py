"""Base images: the OS releases they ship, pinning (``bases.lock.json``), mirrors and the mirror map.

Design (docs/templates.md, docs/air-gapped.md):

- a matrix names each variant's base as written (``nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04``,
  or ``mirror:debian:bookworm`` for a machine-local mirror);
- the committed ``bases.lock.json`` pins every upstream reference to a digest
  (:func:`update_bases` writes it, :func:`read_bases_lock` reads it);
- ``<state_dir>/mirror.json`` (written by ``scripts/setup``) records the machine-local mirrors
  (:func:`read_mirror_record`); their digests are never written into committed files;
- a site's mirror map (``mirror_map`` in builder.toml) rewrites upstream names for air-gapped sites
  (:func:`read_mirror_map`, :meth:`BaseResolution.map_reference`).

:class:`BaseResolution` brings the three together and turns a reference as written into a
:class:`~builder.models.BaseImage` (digest, pull reference).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.errors import ConfigError, NotFoundError, RegistryUnavailableError, RenderStaleError
from builder.models import BaseImage, Variant

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path

    from builder.registry import RegistryClient

#: Prefix of a machine-local mirror base in matrices: ``mirror:debian:bookworm``.
MIRROR_PREFIX = "mirror:"

# --------------------------------------------------------------------------------------------
# OS releases of the base images
# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# Resolution: committed lock, machine-local mirror record, mirror map
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BaseResolution:
    """What is known about base images on this machine.

    ``upstream``: reference as written in matrices -> digest or None (``bases.lock.json``);
    ``mirrors``: mirror name (``debian:bookworm``) -> (registry reference, digest)
    (``<state_dir>/mirror.json``); ``mirror_map``: (upstream prefix, mirror prefix) pairs,
    longest prefix first, applied to the fully qualified upstream name (``docker.io/nvidia/cuda``).
    """

    upstream: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    mirrors: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    mirror_map: tuple[tuple[str, str], ...] = ()

    def resolve(self, reference: str) -> BaseImage:
        """``reference`` as written in a matrix -> BaseImage (digest None when not pinned)."""
        if reference.startswith(MIRROR_PREFIX):
            name = reference[len(MIRROR_PREFIX) :]
            entry = self.mirrors.get(name)
            if entry is None:
                return BaseImage(reference, None, name)
            ref, mirror_digest = entry
            return BaseImage(reference, mirror_digest, f"{ref.split('@', 1)[0]}@{mirror_digest}")
        digest = self.upstream.get(reference)
        pull = self.map_reference(reference)
        return BaseImage(reference, digest, f"{pull}@{digest}" if digest else pull)

    def map_reference(self, reference: str) -> str:
        """The fully qualified name to pull ``reference`` from: short names on Docker Hub
        (:func:`builder.registry.reference.qualify`: ``ubuntu:24.04`` ->
        ``docker.io/library/ubuntu:24.04``), then the mirror map's longest matching prefix
        rewritten (air-gapped sites, ``{"docker.io": "mirror.corp/hub"}``)."""
        from builder.registry.reference import canonical_reference, canonical_registry, qualify

        full = qualify(reference)
        for src, dst in self.mirror_map:
            key = src.rstrip("/")
            source = canonical_reference(key) if "/" in key else canonical_registry(key)
            if full == source or full.startswith(source + "/"):
                return dst.rstrip("/") + full[len(source) :]
        return full


def is_mirror(reference: str) -> bool:
    """True for a machine-local mirror base (``mirror:debian:bookworm``)."""
    return reference.startswith(MIRROR_PREFIX)


def symbolic_name(reference: str) -> str:
    """The name a committed file may show: the upstream name of a mirror base (``debian:bookworm``),
    else the reference as written."""
    return reference[len(MIRROR_PREFIX) :] if is_mirror(reference) else reference


def unpinned_reasons(base: BaseImage) -> tuple[str, ...]:
    """Why ``base`` is not reproducible: ``()`` when it has a digest, else one sentence that says what
    to run (``builder bases update`` for an upstream base, ``scripts/setup`` for a mirror)."""
    if base.digest is not None:
        return ()
    if is_mirror(base.reference):
        name = symbolic_name(base.reference)
        return (f"mirror base {name} is not in the machine-local mirror record (run `bash scripts/setup`)",)
    return (f"base {base.reference} is not pinned: bases.lock.json has no digest (run `builder bases update`)",)


def read_bases_lock(path: Path) -> dict[str, str | None]:
    """``bases.lock.json`` -> {reference: digest or None}. A missing file is an empty lock.

    Format: ``{"version": 1, "bases": {"<reference>": {"digest": "sha256:..." | null, ...}}}``
    (extra keys per entry are kept by writers and ignored here). Raises ConfigError when invalid.
    """
    if not path.exists():
        return {}
    from builder.registry.reference import is_sha256_digest

    try:
        data = json.loads(path.read_text())
        entries = data["bases"]
        out: dict[str, str | None] = {}
        for ref, entry in entries.items():
            digest = entry.get("digest") if isinstance(entry, dict) else None
            if digest is not None and not is_sha256_digest(str(digest)):
                raise ValueError(f"{ref}: digest {digest!r} is not sha256:<64 hex>")
            out[str(ref)] = digest
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{path}: not a valid bases lock ({exc})", hint="regenerate it with `builder bases update`"
        ) from exc


def write_bases_lock(path: Path, entries: Mapping[str, Mapping[str, str | None]]) -> None:
    """Write ``bases.lock.json`` deterministically (sorted keys, 2-space indent, final newline).
    ``entries``: reference -> {"digest": "sha256:..." | None, ...extra facts (text or None)}."""
    doc = {
        "version": 1,
        "comment": "Upstream base-image digests; written by `builder bases update`. null = not pinned yet.",
        "bases": {ref: dict(entries[ref]) for ref in sorted(entries)},
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def read_mirror_record(path: Path) -> dict[str, tuple[str, str]]:
    """``<state_dir>/mirror.json`` (written by scripts/setup) -> {name: (reference, digest)}.
    Missing file: empty. Raises ConfigError when invalid."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {str(k): (str(v["reference"]), str(v["digest"])) for k, v in data.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: not a valid mirror record ({exc})", hint="rerun `bash scripts/setup`") from exc


def read_mirror_map(path: Path | None) -> tuple[tuple[str, str], ...]:
    """Mirror map file (JSON, or YAML when named *.yaml/*.yml): ``{"docker.io": "mirror.corp/hub",
    "docker.io/nvidia": "mirror.corp/nvidia"}`` -> pairs, longest prefix first. ``()`` for None.
    Raises ConfigError when the file is missing or not such a mapping."""
    if path is None:
        return ()
    if not path.exists():
        raise ConfigError(f"mirror map {path} does not exist", hint='fix `mirror_map` in builder.toml or set it to ""')
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        if path.suffix in (".yaml", ".yml"):
            data = YAML(typ="safe", pure=True).load(path.read_text())
        else:
            data = json.loads(path.read_text())
        pairs = [(str(k), str(v)) for k, v in dict(data).items()]
    except (YAMLError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"{path}: not a valid mirror map ({exc})", hint='expected {"docker.io": "mirror/hub"}'
        ) from exc
    return tuple(sorted(pairs, key=lambda kv: (-len(kv[0]), kv[0])))


def load_bases(bases_lock: Path, mirror_record: Path, mirror_map: Path | None = None) -> BaseResolution:
    """Everything known about bases on this machine (see ``BaseResolution``). Raises ConfigError
    when one of the files is invalid."""
    return BaseResolution(
        upstream=read_bases_lock(bases_lock),
        mirrors=read_mirror_record(mirror_record),
        mirror_map=read_mirror_map(mirror_map),
    )


def upstream_references(variants: Iterable[Variant]) -> tuple[str, ...]:
    """The upstream base references the variants use (what ``bases.lock.json`` must pin), sorted."""
    return tuple(sorted({v.base.reference for v in variants if not is_mirror(v.base.reference)}))


# --------------------------------------------------------------------------------------------
# Pinning: `builder bases update`
# --------------------------------------------------------------------------------------------

#: Image config Env facts recorded per base: the driver requirement and CUDA release every NVIDIA
#: CUDA image sets (``base`` flavour), the NCCL release of ``runtime`` and the cuDNN release of
#: ``cudnn`` images (https://gitlab.com/nvidia/container-images/cuda/-/tree/master/dist, e.g.
#: dist/12.8.1/ubuntu2404/base|runtime|runtime/cudnn/Dockerfile). A re-pushed tag that raises
#: ``NVIDIA_REQUIRE_CUDA`` is how hosts broke when NVIDIA re-published the cuda 11.8 tags in
#: November 2023 ("unsatisfied condition: cuda>=11.8",
#: https://github.com/NVIDIA/nvidia-container-toolkit/issues/152).
ENV_FACTS = ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION", "NV_CUDNN_VERSION", "NCCL_VERSION")


def lock_key(fact: str) -> str:
    """The key of an Env fact in a ``bases.lock.json`` entry: its name in lower case."""
    return fact.lower()


class FactChangeDocument(TypedDict):
    """An image fact before and after (None: not set)."""

    old: str | None
    new: str | None


class BaseChangeDocument(TypedDict):
    """One upstream base of ``builder bases update --json``: the ``reference`` as written in the
    matrices, the digest the lock held (``old_digest``; None: not pinned) and the one it resolves
    to now, ``changed``, the image's ``facts`` now (:data:`ENV_FACTS`; None: not set) and the
    facts that changed (name -> old and new). ``pulled_from``: the fully qualified name that was
    resolved (Docker Hub for short names, rewritten by the mirror map)."""

    reference: str
    pulled_from: str
    old_digest: str | None
    new_digest: str
    changed: bool
    facts: dict[str, str | None]
    fact_changes: dict[str, FactChangeDocument]


class BasesUpdateDocument(TypedDict):
    """``builder bases update --json``: the ``lock`` file, whether it was ``written`` (False with
    ``--check``) and every upstream base, sorted by reference."""

    lock: str
    written: bool
    bases: list[BaseChangeDocument]


@dataclasses.dataclass(frozen=True)
class BaseChange:
    """One base reference after ``bases update``: ``old``/``new`` digests and the image facts
    (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION`` from the config's Env) that changed between them."""

    reference: str
    old_digest: str | None
    new_digest: str
    old_facts: Mapping[str, str | None]
    new_facts: Mapping[str, str | None]
    pulled_from: str = ""

    @property
    def changed(self) -> bool:
        return self.old_digest != self.new_digest

    @property
    def fact_changes(self) -> dict[str, tuple[str | None, str | None]]:
        """Env fact -> (old, new), only the facts that differ."""
        return {
            k: (self.old_facts.get(k), self.new_facts.get(k))
            for k in ENV_FACTS
            if self.old_facts.get(k) != self.new_facts.get(k)
        }

    def to_json(self) -> BaseChangeDocument:
        return {
            "reference": self.reference,
            "pulled_from": self.pulled_from or self.reference,
            "old_digest": self.old_digest,
            "new_digest": self.new_digest,
            "changed": self.changed,
            "facts": dict(self.new_facts),
            "fact_changes": {k: {"old": o, "new": n} for k, (o, n) in self.fact_changes.items()},
        }


def base_facts(client: RegistryClient, repository: str, digest: str) -> dict[str, str | None]:
    """:data:`ENV_FACTS` from the image config's Env (None when absent);
    for an index, the linux/amd64 (else first runnable) platform's config. Raises the registry's
    errors (NotFoundError when ``digest`` is gone)."""
    from builder.registry import config_env, image_config

    env = config_env(image_config(client, repository, digest))
    return {k: env.get(k) for k in ENV_FACTS}


def _lock_entries(lock_path: Path) -> dict[str, dict[str, str | None]]:
    """The entries of an existing lock as written (missing file: empty). ConfigError when invalid."""
    if not lock_path.exists():
        return {}
    try:
        bases = json.loads(lock_path.read_text()).get("bases") or {}
        return {str(ref): dict(entry) for ref, entry in dict(bases).items() if isinstance(entry, dict)}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ConfigError(f"{lock_path}: not a valid bases lock ({exc})") from exc


def _facts_or(
    client: RegistryClient, repository: str, digest: str, recorded: dict[str, str | None]
) -> dict[str, str | None]:
    """:func:`base_facts` of ``digest``, or ``recorded`` (the lock's entry) when the registry no longer
    has that digest (NotFoundError); other registry errors propagate."""
    try:
        return base_facts(client, repository, digest)
    except NotFoundError:
        return recorded


def update_bases(
    references: Iterable[str],
    lock_path: Path,
    *,
    resolve_client: Callable[[str], RegistryClient],
    map_reference: Callable[[str], str] | None = None,
    write: bool = True,
    prune: bool = True,
) -> list[BaseChange]:
    """Resolve every upstream base reference to a digest where it is pulled from
    (``map_reference``, default :meth:`BaseResolution.map_reference` without a mirror map: short
    names on Docker Hub, ``docker.io`` reached through ``resolve_client("docker.io")``), read its
    :data:`ENV_FACTS`, compare with the lock (``old`` facts are read from the registry for the old
    digest when it still resolves, else from the lock entry), and write ``bases.lock.json``
    (:func:`write_bases_lock`: ``{"version": 1, "bases": {ref: {"digest", "pulled_from",
    "nvidia_require_cuda", "cuda_version", "nv_cudnn_version", "nccl_version"}}}``). With ``prune``
    (``references`` are every matrix's) references no longer used are dropped; without it (only
    some matrices were named) every other entry of the lock is kept as it was. Raises
    NotFoundError / RegistryError naming the reference, ConfigError for an invalid lock."""
    from builder.registry import parse_reference
    from builder.registry.reference import DOCKER_HUB

    map_reference = map_reference or BaseResolution().map_reference

    old_doc = _lock_entries(lock_path)
    changes: list[BaseChange] = []
    entries: dict[str, dict[str, str | None]] = {} if prune else {k: dict(v) for k, v in old_doc.items()}
    for reference in sorted(set(references)):
        pulled_from = map_reference(reference)
        ref = parse_reference(pulled_from, DOCKER_HUB)
        client = resolve_client(ref.registry)
        try:
            new_digest = client.resolve(ref.repository, ref.ref)
        except RegistryUnavailableError as exc:
            raise RegistryUnavailableError(
                f"base {reference}: {exc.message}",
                hint=_unreachable_hint(ref.registry, client.registry),
                **exc.details,
            ) from exc
        except NotFoundError as exc:
            upstream = str(parse_reference(reference, DOCKER_HUB))
            raise _base_not_found(reference, upstream, pulled_from, client.registry, exc) from exc
        new_facts = base_facts(client, ref.repository, new_digest)
        old_entry = old_doc.get(reference, {})
        old_digest = old_entry.get("digest")
        old_facts: dict[str, str | None] = {k: old_entry.get(lock_key(k)) for k in ENV_FACTS}
        if old_digest and old_digest != new_digest:
            old_facts = _facts_or(client, ref.repository, old_digest, old_facts)
        elif old_digest == new_digest:
            old_facts = new_facts
        changes.append(BaseChange(reference, old_digest, new_digest, old_facts, new_facts, pulled_from))
        entries[reference] = {"digest": new_digest, "pulled_from": pulled_from}
        entries[reference].update({lock_key(k): new_facts.get(k) for k in ENV_FACTS})
    if write:
        write_bases_lock(lock_path, entries)
    return changes


def _unreachable_hint(registry: str, answered_by: str) -> str:
    """What to do when ``registry`` (a base's, e.g. ``docker.io``) could not be reached at
    ``answered_by``: its own endpoint (the network, or a mirror) or a ``registry_endpoints``
    stand-in (is it running, plain HTTP)."""
    from builder.registry.reference import DOCKER_HUB, DOCKER_HUB_ENDPOINT

    if answered_by not in (registry, DOCKER_HUB_ENDPOINT if registry == DOCKER_HUB else registry):
        return (
            f"{answered_by} stands in for {registry} (builder.toml registry_endpoints): start it or fix the entry, "
            f'or send {registry} to a mirror with mirror_map ({{"{registry}": "MIRROR/PATH"}}); a stand-in speaking '
            "plain HTTP off this machine must be listed in insecure_registries"
        )
    return (
        f"{registry} must be reachable from here (network, HTTPS_PROXY), or builder.toml must send it to a "
        f'mirror this machine reaches: mirror_map ({{"{registry}": "MIRROR/PATH"}}) or registry_endpoints '
        f'(["{registry}=HOST:PORT"]); see docs/build.md'
    )


def _base_not_found(
    reference: str, upstream: str, pulled_from: str, answered_by: str, exc: NotFoundError
) -> NotFoundError:
    """The NotFoundError for a base (``reference``, fully qualified ``upstream``) whose tag
    ``pulled_from`` was not where it was looked up (``answered_by``: the registry, or its
    ``registry_endpoints`` stand-in): what was looked for where, and what to do for a mirror map's
    mirror, a stand-in, or the upstream registry itself."""
    from builder.registry.reference import DOCKER_HUB, DOCKER_HUB_ENDPOINT

    registry, _, name = pulled_from.partition("/")
    if pulled_from != upstream:
        hint = (
            f"builder.toml mirror_map sends {upstream} to {pulled_from}, which the mirror does not hold: "
            f"copy it there (skopeo copy docker://{upstream} docker://{pulled_from}), or fix mirror_map"
        )
    elif answered_by not in (registry, DOCKER_HUB_ENDPOINT if registry == DOCKER_HUB else registry):
        hint = (
            f"{answered_by} answers for {registry} (builder.toml registry_endpoints) but does not hold {name}: "
            f"copy it there (skopeo copy docker://{pulled_from} docker://{answered_by}/{name}), or change "
            "registry_endpoints / mirror_map"
        )
    else:
        hint = (
            f"check that {name} exists at {registry} (a typo in the matrix's `base:`, or a tag the publisher removed)"
        )
    return NotFoundError(
        f"base {reference}: {pulled_from} not found at {answered_by}",
        hint=hint,
        reference=reference,
        pulled_from=pulled_from,
        registry=answered_by,
        cause=exc.message,
    )


@dataclasses.dataclass(frozen=True)
class BasesUpdate:
    """What ``builder bases update`` did: the ``lock`` file, whether it was ``written`` (False:
    ``--check``) and every upstream base's :class:`BaseChange`."""

    lock: Path
    written: bool
    changes: tuple[BaseChange, ...]

    @property
    def changed(self) -> tuple[BaseChange, ...]:
        """The bases whose digest is not the one the lock held."""
        return tuple(c for c in self.changes if c.changed)

    @property
    def stale(self) -> bool:
        """Checked (not written) and out of date."""
        return not self.written and bool(self.changed)

    def to_json(self) -> BasesUpdateDocument:
        return {"lock": str(self.lock), "written": self.written, "bases": [c.to_json() for c in self.changes]}

    def raise_if_stale(self) -> None:
        """RenderStaleError (12) naming each changed base (``details['bases']``) when the lock was
        checked and is out of date; nothing otherwise."""
        if self.stale:
            raise RenderStaleError(
                f"{self.lock} is out of date for {len(self.changed)} base(s): "
                + ", ".join(c.reference for c in self.changed),
                hint="run `builder bases update` and commit bases.lock.json",
                bases=[c.to_json() for c in self.changed],
            )


def pin_bases(
    variants: Sequence[Variant],
    resolution: BaseResolution,
    lock_path: Path,
    *,
    resolve_client: Callable[[str], RegistryClient],
    check: bool = False,
    every_matrix: bool = True,
) -> BasesUpdate:
    """``builder bases update``: every upstream base of ``variants`` resolved through the site's
    mirror map (``resolution``) and compared with ``lock_path``, which is written unless
    ``check``. Only with ``every_matrix`` (no ``--matrix`` named) are entries no variant uses
    dropped; else the other matrices' entries stay. Raises what :func:`update_bases` raises; a
    stale lock is in the result (:meth:`BasesUpdate.raise_if_stale`)."""
    changes = update_bases(
        upstream_references(variants),
        lock_path,
        resolve_client=resolve_client,
        map_reference=resolution.map_reference,
        write=not check,
        prune=every_matrix,
    )
    return BasesUpdate(lock_path, not check, tuple(changes))
