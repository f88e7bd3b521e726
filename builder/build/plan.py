"""The build plan (pure): options, tag rules, reproducibility checks and what happens to each variant.

A variant is ``up-to-date`` when its content tag ``<variant-id>-<hash12>`` already exists in the
registry (:func:`plan_builds` decides from the look-ups :mod:`builder.build.tags` makes), else it is
built. Tags follow the OCI distribution spec's tag grammar (at most 128 characters of
``[A-Za-z0-9_.-]``: https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder.config import repository_path
from builder.errors import ConfigError, UnpinnedBaseError
from builder.registry.reference import is_tag

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from builder.models import RenderedImage

#: The host CA bundle (Debian/Ubuntu path) passed as BuildKit secret ``ca_bundle`` when it exists.
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


CA_SECRET_ID = "ca_bundle"


PENDING_PREFIX = "pending-"


CACHE_PREFIX = "buildcache-"


MAX_TAG = 128


#: What happens to a variant: built, already in the registry, or left out because its base or
#: dependency lock is not pinned (listed, never built; ``--allow-unpinned`` builds it anyway).
Action = Literal["build", "up-to-date", "unpinned"]


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """How to build. ``registry``: host[:port] the repositories are relative to; ``workers``:
    parallel builds (>= 1); ``builder``: buildx builder name (None: current); ``platforms``:
    overrides each variant's platform; ``cache``: registry build cache under
    ``<repo>:buildcache-<variant-id>``; ``secrets``: ``(id, path)`` BuildKit secrets;
    ``source_date_epoch``: seconds (None: not set); ``rebuild``: build even when the content tag
    exists (the tag step stays write-once); ``buildx_provenance``: buildx's own attestation
    manifest (None: buildx default); ``push_attempts``: builds run for one variant when its push
    fails with a transient registry error (429/5xx, a dropped connection; >= 1);
    ``repository_prefix``: builder.toml ``repository_prefix``, the repositories are under it;
    ``image_labels``: labels every image gets besides its render's (the OCI ``created``, ``source``,
    ``url``, ``revision``, ``licenses``: :meth:`builder.labels.SourceFacts.labels`)."""

    registry: str
    state_dir: Path
    workers: int = 2
    builder: str | None = None
    platforms: tuple[str, ...] = ()
    cache: bool = False
    secrets: tuple[tuple[str, Path], ...] = ()
    source_date_epoch: int | None = None
    allow_unpinned: bool = False
    rebuild: bool = False
    no_cache: bool = False
    buildx_provenance: bool | None = None
    push_attempts: int = 3
    repository_prefix: str = ""
    image_labels: tuple[tuple[str, str], ...] = ()

    def repository(self, rendered: RenderedImage) -> str:
        """The registry repository ``rendered`` is pushed to (under ``repository_prefix``)."""
        return repository_path(self.repository_prefix, rendered.variant.repository)

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"


def default_secrets(ca_bundle: Path | None = DEFAULT_CA_BUNDLE) -> tuple[tuple[str, Path], ...]:
    """``(("ca_bundle", path),)`` when the CA bundle file exists, else ``()``."""
    if ca_bundle is not None and ca_bundle.is_file():
        return ((CA_SECRET_ID, ca_bundle),)
    return ()


def parse_secret(text: str) -> tuple[str, Path]:
    """``--secret id=ID,src=PATH`` -> ``("ID", Path("PATH"))``. Raises ConfigError when either key is missing."""
    parts = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
    if "id" not in parts or "src" not in parts:
        raise ConfigError(f"--secret {text!r}: expected id=ID,src=PATH")
    return parts["id"], Path(parts["src"])


def build_secrets(
    ca_bundle: Path | None, *, no_ca_bundle: bool = False, extra: Iterable[str] = ()
) -> tuple[tuple[str, Path], ...]:
    """The BuildKit secrets of a build: the CA bundle (``ca_bundle``, default :data:`DEFAULT_CA_BUNDLE`
    when that file exists; none with ``no_ca_bundle``) and each ``--secret`` text (:func:`parse_secret`).
    Raises ConfigError when an explicit ``ca_bundle`` does not exist or a secret is malformed."""
    pairs = [] if no_ca_bundle else list(default_secrets(ca_bundle or DEFAULT_CA_BUNDLE))
    if ca_bundle and not no_ca_bundle and not ca_bundle.is_file():
        raise ConfigError(f"--ca-bundle {ca_bundle} does not exist")
    pairs.extend(parse_secret(s) for s in extra)
    return tuple(pairs)


class PlannedBuildDocument(TypedDict):
    """One variant of ``builder build --dry-run --json``: its ``reference``
    (``registry/repository``), write-once ``content_tag``, the ``action``, when up to date the
    digest the content tag already names, and for ``unpinned`` why (one sentence per base or
    lock, saying what to run). ``variant_digest``: what the moving variant tag ``<variant-id>``
    names now (None: no such tag); ``retag``: the variant is up to date but its variant tag names
    another digest (or none), so the build would point it back at ``existing_digest``;
    ``variant_digest_foreign``: ``variant_digest`` is an image this checkout has no record of
    pushing as a build of this variant (someone else pointed the tag there)."""

    variant: str
    reference: str
    content_tag: str
    action: Action
    existing_digest: str | None
    unpinned: list[str]
    variant_digest: str | None
    retag: bool
    variant_digest_foreign: bool


class BuildPlanDocument(TypedDict):
    """``builder build --dry-run --json``: what would happen to each selected variant, and the
    ids of the variants left out as ``unpinned``."""

    plan: list[PlannedBuildDocument]
    unpinned: list[str]


@dataclasses.dataclass(frozen=True)
class PlannedBuild:
    """What will happen to one variant: ``action`` ``build``, ``up-to-date`` (then
    ``existing_digest`` is the content tag's digest) or ``unpinned`` (not built: the render's
    ``unpinned`` reasons say why). ``repository_prefix``: the checkout's
    (:func:`builder.config.repository_path`). ``variant_digest``: what the moving variant tag
    names now (None: no tag, or not looked up); ``variant_foreign``: that digest is not one this
    checkout recorded pushing as a build of this variant (:func:`builder.build.pushed.pushed_as`)."""

    rendered: RenderedImage
    registry: str
    action: Action
    existing_digest: str | None = None
    repository_prefix: str = ""
    variant_digest: str | None = None
    variant_foreign: bool = False

    @property
    def retag(self) -> bool:
        """Up to date, and the variant tag names another digest (or none): the build points it at
        ``existing_digest`` (a build moves it to the new digest anyway: not a retag)."""
        return self.action == "up-to-date" and self.variant_digest != self.existing_digest

    @property
    def variant_id(self) -> str:
        return self.rendered.variant.id

    @property
    def repository(self) -> str:
        """The registry repository: the matrix repository under the checkout's prefix."""
        return repository_path(self.repository_prefix, self.rendered.variant.repository)

    @property
    def reference(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def content_tag(self) -> str:
        return self.rendered.content_tag

    @property
    def variant_tag(self) -> str:
        return self.rendered.variant.id

    @property
    def pending_tag(self) -> str:
        return (PENDING_PREFIX + self.variant_id)[:MAX_TAG]

    @property
    def cache_tag(self) -> str:
        return (CACHE_PREFIX + self.variant_id)[:MAX_TAG]

    def to_json(self) -> PlannedBuildDocument:
        return {
            "variant": self.variant_id,
            "reference": self.reference,
            "content_tag": self.content_tag,
            "action": self.action,
            "existing_digest": self.existing_digest,
            "unpinned": list(self.rendered.unpinned) if self.action == "unpinned" else [],
            "variant_digest": self.variant_digest,
            "retag": self.retag,
            "variant_digest_foreign": self.variant_foreign,
        }


def check_tags(rendered: Iterable[RenderedImage]) -> None:
    """Content and variant tags must be valid OCI tags, at most 128 characters, and never start
    with ``sha256-`` (reserved for signatures and the referrers fallback index). ConfigError."""
    bad: list[str] = []
    for r in rendered:
        for tag in (r.content_tag, r.variant.id):
            if len(tag) > MAX_TAG or not is_tag(tag) or tag.startswith("sha256-"):
                bad.append(f"{r.variant.id}: tag {tag!r}")
    if bad:
        raise ConfigError(
            "invalid image tags (at most 128 of [A-Za-z0-9_.-], not starting with sha256-): " + "; ".join(bad),
            hint="shorten the variant id (matrix axes values) so `<variant-id>-<hash12>` fits",
        )


def unpinned_error(rendered: Iterable[RenderedImage], *, built: int = 0, **details: object) -> UnpinnedBaseError | None:
    """The error for variants that are not reproducible (base without digest, missing/stale
    dependency lock): an ``UnpinnedBaseError`` (exit 13) listing every one with its reasons
    (``details['variants']``, ``details['reasons']``, plus ``details``), or None when all are
    pinned. ``built``: how many pinned variants were built or up to date first (said in the
    message)."""
    problems = [(r.variant.id, reason) for r in rendered for reason in r.unpinned]
    if not problems:
        return None
    listing = "\n".join(f"  {vid}: {reason}" for vid, reason in problems)
    done = f" ({built} pinned variant(s) were built or up to date)" if built else ""
    return UnpinnedBaseError(
        f"{len({p[0] for p in problems})} variant(s) are not reproducible and were not built{done}:\n{listing}",
        variants=sorted({p[0] for p in problems}),
        reasons=[f"{vid}: {reason}" for vid, reason in problems],
        hint="run `builder bases update` / `builder lock` and commit, or pass --allow-unpinned for a throwaway build",
        **details,
    )


def split_pinned(
    rendered: Sequence[RenderedImage], *, allow_unpinned: bool = False
) -> tuple[list[RenderedImage], list[RenderedImage]]:
    """``(to build, left out)``: the variants whose base and lock are pinned (all of them with
    ``allow_unpinned``) and those that are not, each in ``rendered``'s order."""
    if allow_unpinned:
        return list(rendered), []
    return [r for r in rendered if not r.unpinned], [r for r in rendered if r.unpinned]


def content_key(repository: str, content_tag: str) -> str:
    """Key of :func:`lookup_content_tags` results: ``<repository>:<content-tag>``."""
    return f"{repository}:{content_tag}"


def plan_builds(
    rendered: Sequence[RenderedImage],
    existing: Mapping[str, str | None],
    *,
    registry: str,
    rebuild: bool = False,
    allow_unpinned: bool = False,
    repository_prefix: str = "",
) -> list[PlannedBuild]:
    """Pure: decide per variant. ``existing``: :func:`content_key` (of the prefixed repository)
    -> digest or None (from :func:`lookup_content_tags`). A variant that is not pinned is
    ``unpinned`` unless ``allow_unpinned``. Order follows ``rendered``."""
    out: list[PlannedBuild] = []
    for r in rendered:
        digest = existing.get(content_key(repository_path(repository_prefix, r.variant.repository), r.content_tag))
        action: Action = "up-to-date" if digest and not rebuild else "build"
        if r.unpinned and not allow_unpinned:
            action = "unpinned"
        out.append(PlannedBuild(r, registry, action, digest, repository_prefix))
    return out
