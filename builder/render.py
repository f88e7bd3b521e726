"""Render variants into Dockerfiles (Jinja2, StrictUndefined) and compute their content hashes.

``render_variant`` is a pure function of its inputs (template files, the variant, the resolved
base, the dependency lock and the family's context files): the same inputs give byte-identical
output. The only I/O is reading the templates, context files and lock files.

Base images (design, see docs/templates.md):
- every Dockerfile starts with ``ARG BASE_IMAGE=<default>`` / ``FROM ${BASE_IMAGE}``;
- for an upstream base the default is the reference pinned by the digest from the committed
  ``bases.lock.json`` (``nvidia/cuda:12.8.1-...@sha256:...``), or the bare tag when the lock has no
  digest yet (the render then lists the base in ``RenderedImage.unpinned`` and builds refuse it);
- for a machine-local mirror base (``mirror:debian:bookworm``) the default is the symbolic upstream
  name (``debian:bookworm``): the digest is machine-local and never written into committed files;
- the build always passes ``BASE_IMAGE`` from ``RenderedImage.build_args``: the pull reference
  (mirror-mapped for air-gapped sites) pinned ``@digest``;
- the content hash covers the base *digest* (not the pull reference), so a new base digest is a new
  content tag while a mirror map or a mirror host name does not change it.

Base images are resolved by :mod:`builder.bases`.

Labels whose values are machine-dependent (content hash, base digest) are not in the Dockerfile
text; they are in ``RenderedImage.labels`` and the build applies them with ``--label``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder import labels as label_names
from builder.bases import BaseResolution, is_mirror, symbolic_name, unpinned_reasons
from builder.compat.distros import SYSTEM_PYTHON, split_os
from builder.errors import ConfigError, NotFoundError, RenderStaleError, UnpinnedBaseError
from builder.labels import NO_GPU_CODE, OWN
from builder.locks import read_lock
from builder.models import BaseImage, RenderedImage, Variant
from builder.registry.reference import qualify

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    import jinja2

    from builder.templating import SectionedTemplate

#: A template family: (its Dockerfile template, template file -> sha256, context files (path, bytes)).
_Family = tuple["jinja2.Template", dict[str, str], tuple[tuple[str, bytes], ...]]

#: The project's label namespace (:data:`builder.labels.OWN`: ``io.github.builder-project.``).
LABEL_PREFIX = OWN
CONTENT_SCHEMA = "builder-content/1"
COMMON_DIR = "_common"
#: Non-root user every image runs as (numeric, so ``runAsNonRoot`` can verify it; not 1000, which
#: Ubuntu 24.04 images already give to ``ubuntu``).
USER_NAME = "app"
USER_UID = 10001
#: Build secrets the templates read when present (never build args: those stay in the image history).
SECRET_CA_BUNDLE = "ca_bundle"
SECRET_NETRC = "netrc"
#: Template variable paths that differ for every variant: the template sections that read them are
#: rendered for each variant, the others once per distinct value (:mod:`builder.templating`).
_VOLATILE = frozenset({("variant", (True, "id")), ("labels",), ("label_items",)})


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


#: The content hash's JSON: sorted keys, no spaces (one encoder for every variant; the same text as
#: ``json.dumps(doc, sort_keys=True, separators=(",", ":"), default=list)``).
# check_circular off: the document is a tree of fresh dicts and lists (the same text, no id() bookkeeping)
_HASH_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=list, check_circular=False)


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def jinja_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The Jinja environment every Dockerfile is rendered with (``loader``: where templates come
    from): undefined names are errors, no escaping, the template's final newline kept, block tags
    take their own line's whitespace (https://jinja.palletsprojects.com/en/stable/api/#jinja2.Environment)."""
    import jinja2

    return jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


class Renderer:
    """Holds one Jinja environment and the file hashes of the template families, so many
    variants render fast. Create one per run (it caches file contents)."""

    def __init__(self, images_dir: Path, locks_dir: Path, bases: BaseResolution) -> None:
        from builder.templating import SectionLoader

        self.images_dir = Path(images_dir)
        self.locks_dir = Path(locks_dir)
        self.bases = bases
        self.env = jinja_environment(SectionLoader(str(self.images_dir), volatile=_VOLATILE))
        self._locks: frozenset[str] | None = None
        self._families: dict[str, _Family] = {}
        self._sectioned: dict[str, SectionedTemplate | None] = {}
        self._resolved: dict[str, BaseImage] = {}  # reference -> its resolution (a pure function of both)

    def _lock_names(self) -> frozenset[str]:
        if self._locks is None:
            self._locks = frozenset(os.listdir(self.locks_dir)) if self.locks_dir.is_dir() else frozenset()
        return self._locks

    def _family(self, family: str) -> _Family:
        if family in self._families:
            return self._families[family]
        fam_dir = self.images_dir / family
        if not (fam_dir / "Dockerfile.j2").is_file():
            raise NotFoundError(
                f"no template {fam_dir / 'Dockerfile.j2'} for family {family!r}",
                hint="create images/<family>/Dockerfile.j2 or fix `family` in the matrix",
            )
        template = self.env.get_template(f"{family}/Dockerfile.j2")
        hashes: dict[str, str] = {}
        for d in (fam_dir, self.images_dir / COMMON_DIR):
            if d.is_dir():
                for f in sorted(d.rglob("*")):
                    rel = f.relative_to(self.images_dir).as_posix()
                    if f.is_file() and not f.name.lower().startswith("readme") and "/context/" not in f"/{rel}":
                        hashes[rel] = _sha256(f.read_bytes())
        context: list[tuple[str, bytes]] = []
        ctx_dir = fam_dir / "context"
        if ctx_dir.is_dir():
            for f in sorted(ctx_dir.rglob("*")):
                if f.is_file():
                    context.append((f.relative_to(ctx_dir).as_posix(), f.read_bytes()))
        self._families[family] = (template, hashes, tuple(context))
        return self._families[family]

    def _render_text(self, family: str, template: jinja2.Template, variables: dict[str, Any]) -> str:
        """The family's template rendered: the first variant of a family directly, the next ones
        section by section with this run's cache (:mod:`builder.templating`: the same text; the
        sections are worked out once, which one render alone would not repay)."""
        from builder.templating import SectionedTemplate

        sectioned = self._sectioned.get(family)
        if sectioned is None:
            if family not in self._sectioned:
                self._sectioned[family] = None
                return template.render(variables)
            # the variables' names are the same for every variant
            sectioned = self._sectioned[family] = SectionedTemplate(self.env, template.name or "", frozenset(variables))
        return sectioned.render(variables)

    def render(self, variant: Variant) -> RenderedImage:
        """Render one variant (see module docstring). Raises NotFoundError for a missing template,
        ConfigError for a template error (names the template and line)."""
        import jinja2

        template, template_hashes, family_context = self._family(variant.family)
        base = self._resolved.get(variant.base.reference)
        if base is None:
            base = self._resolved[variant.base.reference] = self.bases.resolve(variant.base.reference)
        lock = read_lock(variant, self.locks_dir, existing=self._lock_names())
        variables = template_variables(variant, base)
        try:
            dockerfile = _tidy(self._render_text(variant.family, template, variables))
        except jinja2.TemplateError as exc:
            where = f"{getattr(exc, 'filename', None) or variant.family}:{getattr(exc, 'lineno', '?')}"
            raise ConfigError(
                f"template {where}: {exc} (rendering {variant.id})",
                hint="the variables a template may use are listed in images/README.md",
            ) from exc
        context = list(family_context)
        if lock.text is not None and variant.packages:
            context.append(("requirements.lock", lock.text.encode()))
        context.sort()
        unpinned = list(unpinned_reasons(base))
        if lock.status not in {"locked", "not-needed"}:
            unpinned.append(lock.reason)
        labels = dict(variables["labels"])
        lock_sha = _sha256(lock.text) if lock.text is not None else None
        hashed_variables = dict(variables)  # all but the two derived ones (a copy, then two deletions)
        del hashed_variables["base_default"], hashed_variables["label_items"]
        hash_doc = {
            "schema": CONTENT_SCHEMA,
            "variant": variant.id,
            "templates": template_hashes,
            "dockerfile": _sha256(dockerfile),
            "variables": hashed_variables,
            "base": {"reference": base.reference, "digest": base.digest},
            "lock": lock_sha,
            "context": {name: _sha256(data) for name, data in context},
            "build_args": dict(variant.build_args),
        }
        content_hash = _sha256(_HASH_JSON.encode(hash_doc))
        labels.update(base_labels(base))
        labels[LABEL_PREFIX + "content-hash"] = content_hash
        if lock_sha is not None and variant.packages:
            labels[LABEL_PREFIX + "lock.sha256"] = lock_sha
        build_args = dict(variant.build_args)
        build_args["BASE_IMAGE"] = base.pull
        return RenderedImage(
            variant=variant if variant.base == base else dataclasses.replace(variant, base=base),
            dockerfile=dockerfile,
            context=tuple(context),
            content_hash=content_hash,
            labels=tuple(sorted(labels.items())),
            build_args=tuple(sorted(build_args.items())),
            unpinned=tuple(unpinned),
        )


#: The project's per-variant label names (:func:`builder.labels.own`), computed once, not per variant.
_L_VARIANT, _L_MATRIX, _L_FAMILY, _L_ACCELERATOR = map(label_names.own, ("variant", "matrix", "family", "accelerator"))
_L_FRAMEWORK, _L_FRAMEWORK_VERSION = map(label_names.own, ("framework", "framework.version"))
_L_PYTHON, _L_OS, _L_PLATFORM = map(label_names.own, ("python", "os", "platform"))
_L_GPU_ARCHS, _L_CUDA_VERSION, _L_MIN_DRIVER = map(label_names.own, ("gpu-archs", "cuda.version", "min-driver"))
_L_ROCM_VERSION = label_names.own("rocm.version")


def template_variables(variant: Variant, base: BaseImage) -> dict[str, Any]:
    """The variables every template gets (documented in images/README.md). Plain JSON values."""
    acc = variant.accelerator
    os_name, os_version, system_python = _os_facts(variant.os)
    base_default, mirror, base_name = _base_facts(base.reference, base.digest)
    require_cuda = min_driver = None
    if acc.kind == "cuda" and acc.version:
        require_cuda, min_driver = _cuda_facts(acc.version)
    framework = variant.framework
    labels: dict[str, str] = {
        label_names.TITLE: variant.id,
        label_names.DESCRIPTION: _describe(variant),
        label_names.VERSION: framework.version if framework.name != "none" else "",
        label_names.BASE_NAME: base_name,
        _L_VARIANT: variant.id,
        _L_MATRIX: variant.matrix,
        _L_FAMILY: variant.family,
        _L_ACCELERATOR: acc.kind,
        _L_FRAMEWORK: framework.name,
        _L_FRAMEWORK_VERSION: framework.version,
        _L_PYTHON: variant.python,
        _L_OS: variant.os,
        _L_PLATFORM: variant.platform,
    }
    archs = gpu_archs_label(variant)
    if archs is not None:
        labels[_L_GPU_ARCHS] = archs
    if acc.kind == "cuda":
        labels[_L_CUDA_VERSION] = acc.version or ""
        labels[_L_MIN_DRIVER] = min_driver or ""
    elif acc.kind == "rocm":
        labels[_L_ROCM_VERSION] = acc.version or ""
    if not labels[label_names.VERSION]:
        del labels[label_names.VERSION]
    return {
        "variant": {
            "id": variant.id,
            "matrix": variant.matrix,
            "family": variant.family,
            "repository": variant.repository,
            "platform": variant.platform,
        },
        "accelerator": {"kind": acc.kind, "version": acc.version, "tag": acc.tag},
        "cuda_version": acc.version if acc.kind == "cuda" else None,
        "rocm_version": acc.version if acc.kind == "rocm" else None,
        "framework": {"name": framework.name, "version": framework.version},
        "python": variant.python,
        "python_is_system": system_python == variant.python,
        "os": variant.os,
        "os_name": os_name,
        "os_version": os_version,
        "base": {
            "reference": base.reference,
            "pinned": base.digest is not None,
            "mirror": mirror,
        },
        "base_default": base_default,
        "packages": list(variant.packages),
        "index_url": variant.index_url,
        "has_lock": bool(variant.packages),
        "gpu_archs": list(variant.gpu_archs),
        "build_args": [list(kv) for kv in variant.build_args],
        "require_cuda": require_cuda,
        "min_driver": min_driver,
        "nvidia_visible_devices": "all",
        "nvidia_driver_capabilities": "compute,utility",
        "user": {"name": USER_NAME, "uid": USER_UID},
        "secrets": {"ca_bundle": SECRET_CA_BUNDLE, "netrc": SECRET_NETRC},
        "labels": labels,
        "label_items": [list(kv) for kv in sorted(labels.items())],
    }


def gpu_archs_label(variant: Variant) -> str | None:
    """The ``gpu-archs`` label: the compiled architectures, :data:`builder.labels.NO_GPU_CODE`
    (``none``) for a CPU variant or a framework build without GPU kernels (one spelling for both),
    None (no label: unknown) for a GPU variant whose list is not known."""
    if variant.gpu_archs:
        return ",".join(variant.gpu_archs)
    return NO_GPU_CODE if variant.accelerator.kind == "cpu" else None


def base_labels(base: BaseImage) -> dict[str, str]:
    """The base image's machine-dependent labels (applied with ``--label``, never in the Dockerfile
    text): ``org.opencontainers.image.base.digest``, the digest of the fully qualified
    ``base.name`` (an upstream base pinned by bases.lock.json); for a machine-local mirror base the
    mirror's reference and digest under the project's own ``base.mirror`` / ``base.mirror-digest``
    (the upstream name's digest is not known there, so ``base.digest`` is left out). Nothing for an
    unpinned base."""
    if base.digest is None:
        return {}
    if is_mirror(base.reference):
        return {
            LABEL_PREFIX + "base.mirror": base.pull.split("@", 1)[0],
            LABEL_PREFIX + "base.mirror-digest": base.digest,
        }
    return {label_names.BASE_DIGEST: base.digest}


@functools.lru_cache(maxsize=256)
def _os_facts(os_: str) -> tuple[str, str, str | None]:
    """``(os_name, os_version, system Python or None)`` of a matrix ``os`` (asked once per OS, not per variant)."""
    os_name, os_version = split_os(os_)
    return os_name, os_version, SYSTEM_PYTHON.get(os_)


@functools.lru_cache(maxsize=4096)
def _base_facts(reference: str, digest: str | None) -> tuple[str, bool, str]:
    """``(ARG BASE_IMAGE default, is a mirror base, fully qualified base.name label)`` of a
    resolved base (module docstring: a mirror's default is its symbolic upstream name)."""
    mirror = is_mirror(reference)
    pinned = f"{reference}@{digest}" if digest else reference
    default = symbolic_name(reference) if mirror else pinned
    return default, mirror, qualify(symbolic_name(reference))


@functools.lru_cache(maxsize=256)
def _cuda_facts(cuda_version: str) -> tuple[str, str]:
    from builder import compat

    return compat.require_cuda(cuda_version), compat.min_driver(cuda_version)


def _tidy(text: str) -> str:
    """At most one blank line in a row, no trailing spaces or tabs, one final newline
    (deterministic). One pass over the lines: regular expressions over the whole text (trailing
    blanks, runs of newlines) try a match at every blank and newline and took a fifth of a render.
    Text without a blank before a line end (what the shipped templates give) has its runs of
    newlines collapsed by ``str.replace`` instead (the same result, without a loop over lines)."""
    # rfind: CPython's reverse search skips faster over text full of spaces (about 2/3 the time)
    if text.rfind(" \n") < 0 and text.rfind("\t\n") < 0 and not text.endswith((" ", "\t")):
        while "\n\n\n" in text:
            text = text.replace("\n\n\n", "\n\n")
        return text.strip("\n") + "\n"
    out: list[str] = []
    blank = False
    for raw in text.split("\n"):
        line = raw.rstrip(" \t")
        if not line:
            if blank:
                continue
            blank = True
        else:
            blank = False
        out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def _describe(v: Variant) -> str:
    acc = v.accelerator
    accel = "CPU" if acc.kind == "cpu" else f"{'CUDA' if acc.kind == 'cuda' else 'ROCm'} {acc.version}"
    what = "Python" if v.framework.name == "none" else f"{v.framework.name} {v.framework.version}"
    return f"{what} for {accel}, Python {v.python}, {v.os} ({v.platform})"


def render_variant(variant: Variant, *, images_dir: Path, locks_dir: Path, bases: BaseResolution) -> RenderedImage:
    """Render one variant: Dockerfile text, build context, content hash, labels, build args and the
    reasons it is not yet reproducible (``unpinned``). Pure except for reading template, context
    and lock files. Raises NotFoundError (no template), ConfigError (template error)."""
    return Renderer(images_dir, locks_dir, bases).render(variant)


def render_all(
    variants: Sequence[Variant], *, images_dir: Path, locks_dir: Path, bases: BaseResolution
) -> tuple[RenderedImage, ...]:
    """Render many variants with one shared environment (same result as ``render_variant`` each)."""
    r = Renderer(images_dir, locks_dir, bases)
    return tuple(r.render(v) for v in variants)


def require_pinned(rendered: RenderedImage) -> None:
    """Raise ``UnpinnedBaseError`` when the rendered image is not reproducible (base without a
    digest, dependency lock missing or stale). Builds call this before building."""
    if rendered.unpinned:
        raise UnpinnedBaseError(
            f"{rendered.variant.id} is not reproducible: " + "; ".join(rendered.unpinned),
            variant=rendered.variant.id,
            reasons=list(rendered.unpinned),
        )


# --------------------------------------------------------------------------------------------
# Committed renders: rendered/<matrix>/<variant-id>.Dockerfile
# --------------------------------------------------------------------------------------------

#: A committed render's file name: ``<variant-id>.Dockerfile`` in its matrix's folder (one file per
#: variant and no folder per variant: creating 10,000 folders cost as much as rendering them).
RENDER_SUFFIX = ".Dockerfile"
#: The file of a render in the earlier layout, ``<matrix>/<variant-id>/Dockerfile``: a render of
#: every variant replaces such files (they are reported ``removed``, their folders deleted).
LEGACY_RENDER_FILE = "Dockerfile"


def render_files(rendered: Iterable[RenderedImage]) -> dict[str, str]:
    """Relative path -> text of the committed render files (only machine-independent content)."""
    return {f"{r.variant.matrix}/{r.variant.id}{RENDER_SUFFIX}": r.dockerfile for r in rendered}


def _encoded(texts: Mapping[str, str]) -> dict[str, bytes]:
    return {rel: text.encode("utf-8") for rel, text in texts.items()}


def _render_entries(matrix_dir: str) -> list[str]:
    """The renders in one matrix folder (names relative to it), either layout; [] when it is not a folder."""
    found: list[str] = []
    try:
        entries = list(os.scandir(matrix_dir))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for e in entries:
        if e.name.endswith(RENDER_SUFFIX) and e.is_file():
            found.append(e.name)
        elif e.is_dir() and os.path.isfile(os.path.join(e.path, LEGACY_RENDER_FILE)):
            found.append(f"{e.name}/{LEGACY_RENDER_FILE}")
    return found


def _existing(out_dir: Path, matrices: Iterable[str]) -> dict[str, bytes]:
    from builder.outputs import read_bytes

    found: dict[str, bytes] = {}
    for m in matrices:
        d = os.path.join(out_dir, m)
        for name in _render_entries(d):
            found[f"{m}/{name}"] = read_bytes(os.path.join(d, name))
    return found


class RenderReportDocument(TypedDict):
    """What a render found, paths relative to ``out_dir`` (``<matrix>/<variant>.Dockerfile``): ``changed``,
    ``added``, ``removed`` (renders of variants no longer in a matrix), the number ``unchanged``, and
    ``stale`` (any of the three)."""

    out_dir: str
    changed: list[str]
    added: list[str]
    removed: list[str]
    unchanged: int
    stale: bool


class RenderedVariantDocument(TypedDict):
    """A rendered variant: its id, content tag (``<variant-id>-<hash12>``), content hash (sha256 hex) and
    why it is not buildable yet (``unpinned``: unpinned base, missing or stale lock; empty: buildable)."""

    id: str
    content_tag: str
    content_hash: str
    unpinned: list[str]


class RenderDocument(RenderReportDocument):
    """``builder render --json``: the report and every variant rendered."""

    variants: list[RenderedVariantDocument]


@dataclasses.dataclass(frozen=True)
class RenderReport:
    """What ``write_renders``/``check_renders`` found: relative paths written/changed/removed."""

    out_dir: Path
    changed: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int

    @property
    def stale(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def to_json(self) -> RenderReportDocument:
        return {
            "out_dir": str(self.out_dir),
            "changed": list(self.changed),
            "added": list(self.added),
            "removed": list(self.removed),
            "unchanged": self.unchanged,
            "stale": self.stale,
        }


@dataclasses.dataclass(frozen=True)
class RenderOutcome:
    """``builder render``: the renders written (or, with ``checked``, compared: then current) and the report."""

    report: RenderReport
    rendered: tuple[RenderedImage, ...]
    checked: bool = False

    @property
    def unbuildable(self) -> int:
        """How many variants are not buildable yet (unpinned base or missing lock)."""
        return sum(1 for r in self.rendered if r.unpinned)

    def to_json(self) -> RenderDocument:
        return {
            **self.report.to_json(),
            "variants": [
                {
                    "id": r.variant.id,
                    "content_tag": r.content_tag,
                    "content_hash": r.content_hash,
                    "unpinned": list(r.unpinned),
                }
                for r in self.rendered
            ],
        }


def _compare(out_dir: Path, wanted: Mapping[str, bytes], matrices: Iterable[str], prune: bool) -> RenderReport:
    """Compare by content, as bytes (a re-render that changes nothing writes nothing), not by time stamps."""
    from builder.outputs import read_bytes

    if prune:
        existing = _existing(out_dir, matrices)
    else:
        existing = {k: read_bytes(p) for k in wanted if os.path.isfile(p := os.path.join(out_dir, k))}
    changed = tuple(sorted(k for k in wanted if k in existing and existing[k] != wanted[k]))
    added = tuple(sorted(k for k in wanted if k not in existing))
    removed = tuple(sorted(k for k in existing if k not in wanted)) if prune else ()
    unchanged = sum(1 for k in wanted if k in existing and existing[k] == wanted[k])
    return RenderReport(out_dir, changed, added, removed, unchanged)


def _matrix_dirs(out_dir: Path, rendered: Sequence[RenderedImage], every_matrix: bool) -> list[str]:
    names = {r.variant.matrix for r in rendered}
    if every_matrix and out_dir.is_dir():
        names |= {d.name for d in out_dir.iterdir() if d.is_dir() and _render_entries(str(d))}
    return sorted(names)


def write_renders(
    out_dir: Path, rendered: Sequence[RenderedImage], *, prune: bool = True, every_matrix: bool = False
) -> RenderReport:
    """Write ``<out_dir>/<matrix>/<id>.Dockerfile`` for each render whose file is missing or has other
    text; with ``prune`` remove renders of those matrices' variants that no longer exist (a variant
    removed from a matrix, or a render in the earlier ``<matrix>/<id>/Dockerfile`` layout), and with
    ``every_matrix`` (all matrices were rendered) also the renders of matrices that no longer exist.
    A file that already holds the render's bytes is left alone (inode and mtime unchanged); a new
    or changed one is written in place (``open(O_TRUNC)``, ``write``, ``close``; no ``fsync``, no
    temporary file: a render cut short is a file the next render finds different and rewrites).
    Raises NotFoundError (exit 8) naming the file that cannot be written."""
    import shutil

    from builder.outputs import cannot_write, write_bytes

    wanted = _encoded(render_files(rendered))
    matrices = _matrix_dirs(out_dir, rendered, every_matrix and prune)
    report = _compare(out_dir, wanted, matrices, prune)
    made: set[str] = set()
    for rel in (*report.changed, *report.added):
        path = os.path.join(out_dir, rel)
        try:
            folder = os.path.dirname(path)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            write_bytes(path, wanted[rel])
        except OSError as exc:
            raise cannot_write(Path(path), exc, "--out (render_dir)") from exc
    for rel in report.removed:
        gone = out_dir / rel
        if gone.name == LEGACY_RENDER_FILE:
            shutil.rmtree(gone.parent)  # the earlier layout's folder of one variant
        else:
            gone.unlink()
        matrix_dir = out_dir / rel.split("/", 1)[0]
        if matrix_dir.is_dir() and not any(matrix_dir.iterdir()):
            matrix_dir.rmdir()
    return report


def check_renders(
    out_dir: Path, rendered: Sequence[RenderedImage], *, prune: bool = True, every_matrix: bool = False
) -> RenderReport:
    """Compare committed renders with fresh ones; raise ``RenderStaleError`` with a unified diff
    (``details['diff']``, ``details['stale']``) when they differ. Returns the report when current."""
    import difflib

    texts = render_files(rendered)
    matrices = _matrix_dirs(out_dir, rendered, every_matrix and prune)
    report = _compare(out_dir, _encoded(texts), matrices, prune)
    if not report.stale:
        return report
    diff: list[str] = []
    for rel in (*report.changed, *report.added, *report.removed):
        old = (out_dir / rel).read_text() if (out_dir / rel).is_file() else ""
        new = texts.get(rel, "")
        diff.extend(
            difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}")
        )
    text = "".join(diff)
    n = len(report.changed) + len(report.added) + len(report.removed)
    raise RenderStaleError(
        f"{n} committed render{'s' if n != 1 else ''} in {out_dir} {'are' if n != 1 else 'is'} stale:\n{text}",
        diff=text,
        stale=[*report.changed, *report.added, *report.removed],
    )
