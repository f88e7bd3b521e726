"""What a promotion command names -> ``Target`` s: variant ids of the matrices, ``--select`` globs
over them, or image references (``registry/repository:tag`` or ``@sha256:...``) whose variant id
comes from ``--variant-id``, the tag (a content tag ``<id>-<12 hex>`` or a stage pointer
``<id>-<stage>``) or the image's ``io.github.builder-project.variant`` label (or the older
``io.builder.variant``).

The concepts are :mod:`builder.selection`'s, defined once for every command: ``--select`` globs
(:func:`builder.selection.select`), variant id or reference (:func:`builder.selection.looks_like_variant_id`)
and a variant id's moving tag with its did-you-mean (:func:`builder.selection.variant_reference`,
:mod:`builder.suggest`).

Errors: NotFoundError (8) for a glob or variant id the matrices do not have (naming close ids);
``UnknownVariantError`` (a ConfigError, exit 2) when the variant of a reference cannot be told;
registry errors other than a missing image propagate.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from builder.config import repository_path
from builder.errors import ConfigError, NotFoundError, RegistryError
from builder.promote.location import Location, Target
from builder.registry.reference import Reference, is_sha256_digest, parse_reference
from builder.selection import check_variant_id, looks_like_variant_id, select, variant_reference

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from builder.models import Variant
    from builder.policy import Stage
    from builder.promote.context import ClientFactory, PromotionContext
    from builder.registry.manifest import Descriptor, Manifest
    from builder.selection import VariantName

CONTENT_SUFFIX = re.compile(r"-[0-9a-f]{12}$")
"""The content-hash suffix of a build's write-once tag."""
MAX_VARIANT_TAGS = 8
"""The most variant tags read to find the index listing a digest whose variant is not known."""


def variant_label() -> str:
    """The label naming an image's variant (:func:`builder.labels.own`; images built before carry
    ``io.builder.variant``, still read). ``builder.labels`` is imported here, for a reference's
    label only: ``resolve VARIANT`` never reads one (start-up, issue 19)."""
    from builder.labels import own

    return own("variant")


class UnknownVariantError(ConfigError):
    """The variant id of an image reference cannot be told: pass ``--variant-id`` (exit 2)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"cannot tell the variant of {name}: pass --variant-id ID",
            hint=f"the tag names no variant and the image has no {variant_label()} label",
            reference=name,
        )
        self.name = name


@dataclasses.dataclass(frozen=True)
class TargetScope:
    """Where names are looked up: ``variants`` (called at most once, when a name needs it) gives
    every variant of the matrices; ``registry`` is the default registry; ``stage_names`` the
    policy's stages (pointer tags); ``clients`` reads image labels; ``repository_prefix`` the
    checkout's, under which its variants' repositories live; ``stages`` the policy's stages
    (their ``repository`` templates map a reference in a stage's repository back to the build's);
    ``names`` (None: ``variants``) gives every variant's id and repository only, what a variant
    id's target needs (read from the matrix index without decoding a variant)."""

    variants: Callable[[], Sequence[Variant]]
    registry: str
    stage_names: Sequence[str]
    clients: ClientFactory
    repository_prefix: str = ""
    stages: Sequence[Stage] = ()
    names: Callable[[], Sequence[VariantName]] | None = None


def matrix_variants(matrices_dir: Path | None, cache_dir: Path | None = None) -> list[Variant]:
    """Every variant of every matrix in ``matrices_dir`` (None: none), validated once per content
    when ``cache_dir`` is given (:func:`builder.matrix.index.cached_variants`). Raises MatrixError."""
    if matrices_dir is None:
        return []
    from builder.matrix.files import matrix_paths  # only when a name needs the matrices
    from builder.matrix.index import cached_variants

    return list(cached_variants(matrix_paths(matrices_dir), cache_dir))


def matrix_variant_names(matrices_dir: Path | None, cache_dir: Path | None = None) -> list[VariantName]:
    """Every variant's id and repository (:func:`matrix_variants`' order), read from the matrix index
    without decoding a variant when ``cache_dir`` holds it (:func:`builder.matrix.index.variant_names`):
    ``builder resolve VARIANT`` does no work per variant of the project. Raises MatrixError."""
    if matrices_dir is None:
        return []
    from builder.matrix.files import matrix_paths
    from builder.matrix.index import variant_names

    return list(variant_names(matrix_paths(matrices_dir), cache_dir))


def scope_of(ctx: PromotionContext) -> TargetScope:
    """The scope of a promotion context: the variants of its ``matrices_dir``, its default
    registry, the policy's stages and its clients."""
    return TargetScope(
        variants=lambda: matrix_variants(ctx.matrices_dir, ctx.cache_dir),
        registry=ctx.registry,
        stage_names=ctx.policy.stage_names,
        clients=ctx.clients,
        repository_prefix=ctx.repository_prefix,
        stages=ctx.policy.stages,
        names=lambda: matrix_variant_names(ctx.matrices_dir, ctx.cache_dir),
    )


def variant_from_tag(tag: str | None, stage_names: Sequence[str]) -> str | None:
    """The variant id a tag names: a content tag without its hash suffix, a stage pointer without
    its ``-<stage>``, else the tag itself (a variant tag). None for no tag."""
    if not tag:
        return None
    if CONTENT_SUFFIX.search(tag):
        return CONTENT_SUFFIX.sub("", tag)
    for s in stage_names:
        if tag.endswith("-" + s):
            return tag[: -len(s) - 1]
    return tag


def image_labels(clients: ClientFactory, ref: Reference) -> Mapping[str, object]:
    """The ``Labels`` of ``ref``'s image config (``builder render`` writes the variant and the
    content hash into every image); {} when the image or its config is missing or has none."""
    from builder.registry.copy import image_config  # only for a reference without a variant in its tag

    try:
        config = image_config(clients(ref.registry), ref.repository, ref.ref)
    except (NotFoundError, RegistryError):  # no image to read: the caller asks for --variant-id
        return {}
    labels = (config.get("config") or {}).get("Labels")
    return labels if isinstance(labels, dict) else {}


def resolve_targets(
    scope: TargetScope, names: Sequence[str], globs: Sequence[str] = (), variant_id: str | None = None
) -> list[Target]:
    """Variant ids, globs or image references -> targets, each once, in order: the variants the
    globs select (sorted by id), then each name. NotFoundError for a glob that matches nothing or
    an unknown variant id (with close matches); UnknownVariantError for a reference whose variant
    cannot be told."""
    cache: list[Sequence[Variant]] = []
    named: list[Sequence[VariantName]] = []

    def variants() -> Sequence[Variant]:
        if not cache:
            cache.append(scope.variants())
        return cache[0]

    def ids() -> Sequence[VariantName]:  # a variant id needs no more of the matrices
        if not named:
            named.append(variants() if scope.names is None or cache else scope.names())
        return named[0]

    targets: list[Target] = []
    if globs:
        chosen = sorted(select(list(variants()), list(globs)), key=lambda v: v.id)
        prefix = scope.repository_prefix
        targets.extend(Target(v.id, repository_path(prefix, v.repository), scope.registry) for v in chosen)
    for name in names:
        if looks_like_variant_id(name):
            targets.append(_variant_target(scope, ids(), name))
        else:
            targets.append(_reference_target(scope, name, variant_id, variants))
    return list(dict.fromkeys(targets))


class _Matrices:
    """The variants as :func:`builder.selection.variant_reference` reads matrices (``HasVariantNames``).
    A plain class, private to this module: a dataclass costs ``resolve`` about 1 ms of start-up
    (``dataclasses`` compiles its methods), more than this adapter is worth (issue 19)."""

    __slots__ = ("variants",)

    def __init__(self, variants: Sequence[VariantName]) -> None:
        self.variants = variants


def _variant_target(scope: TargetScope, variants: Sequence[VariantName], name: str) -> Target:
    """A variant id's target: the repository of its moving variant tag (``variant_reference``,
    NotFoundError naming close ids when the matrices have no such variant)."""
    text = variant_reference([_Matrices(variants)], name, scope.registry, scope.repository_prefix)
    ref = parse_reference(text, scope.registry)
    return Target(name, ref.repository, ref.registry)


def _reference_target(
    scope: TargetScope, name: str, variant_id: str | None, variants: Callable[[], Sequence[Variant]]
) -> Target:
    from builder.labels import read as read_label  # an image reference's labels (not a variant id's)

    ref = parse_reference(name, scope.registry)
    _check_under_prefix(scope, ref, name)
    manifest = _digest_manifest(scope, ref)
    said = check_variant_id(variant_id, "--variant-id") if variant_id is not None else None
    if manifest is not None:  # whatever names the variant, a digest promoted is an image
        _check_is_image(scope, variants, manifest, ref, name, said or variant_from_tag(ref.tag, scope.stage_names))
    from_label = False
    labels: Mapping[str, object] = {}
    if variant_id is not None:
        vid: str | None = check_variant_id(variant_id, "--variant-id")
    else:
        vid = variant_from_tag(ref.tag, scope.stage_names)
        if vid is None:
            labels = image_labels(scope.clients, ref)
            label = read_label(labels, "variant")
            vid = check_variant_id(label, f"the {variant_label()} label of {name}") if label is not None else None
            from_label = vid is not None
    if vid is None:
        raise UnknownVariantError(name)
    if variant_id is None and not from_label:
        _check_tag_claim(variants(), vid, name)
    if from_label:
        _check_label_claim(scope, variants(), vid, ref, name, read_label(labels, "content-hash"))
    registry, repository = _variant_repository(scope, variants(), vid, ref, name, named=variant_id is not None)
    if manifest is not None and not manifest.is_index and not from_label:  # the label's check names it
        _check_not_platform(scope, manifest, ref, name, vid, (registry, repository))
    at = Location(ref.registry, ref.repository)
    return Target(
        vid,
        repository,
        registry,
        tag=ref.tag if not ref.digest else None,
        digest=ref.digest,
        source=None if (registry, repository) == (ref.registry, ref.repository) else at,
    )


def _variant_repository(
    scope: TargetScope, variants: Sequence[Variant], vid: str, ref: Reference, name: str, *, named: bool
) -> tuple[str, str]:
    """(registry, repository) of the variant a reference is promoted as: the reference names only the
    digest; the stage pointers are the variant's, its build repository mapped by each stage's
    ``repository`` template (docs/promotion.md, "Where things live"). The matrices' repository for
    ``vid`` when the user ``named`` the variant (``--variant-id``), or when the reference is in that
    repository or one of its stage repositories; else (a tag or label naming a variant the
    reference's repository is not the home of, or no matrix defining it) the reference's repository,
    mapped back to the build's when it is a stage's (``prod/{repository}``: ``prod/demo/jax`` ->
    ``demo/jax``), so a stage's own image never becomes ``prod/prod/...``. NotFoundError (8) when
    two stages' templates map it back differently."""
    v = next((v for v in variants if v.id == vid), None)
    if v is not None:
        built = repository_path(scope.repository_prefix, v.repository)
        home = ref.registry == scope.registry and (built == ref.repository or built in _builds_of(scope, ref))
        if named or home:
            return scope.registry, built
    builds = _builds_of(scope, ref)
    if len(builds) > 1:
        raise NotFoundError(
            f"cannot tell which build repository {name} belongs to: the stages' repository templates "
            f"map {ref.repository} back to {' or '.join(sorted(builds))}",
            hint=f"run from the checkout whose matrices define the variant (--matrices DIR) with --variant-id {vid}, "
            "or give the image by its build repository (`builder status` shows it)",
        )
    if builds:
        [build] = builds
        return scope.registry, build
    return ref.registry, ref.repository


def _builds_of(scope: TargetScope, ref: Reference) -> set[str]:
    """The build repositories (under the prefix) whose stage repository ``ref`` is, by the
    stages' ``repository`` templates other than the identity ``{repository}``: ``prod/{repository}``
    holds ``prod/demo/jax`` for ``demo/jax``; a stage on its own ``registry`` only on that one."""
    prefix = scope.repository_prefix
    relative = ref.repository.removeprefix(f"{prefix}/") if prefix else ref.repository
    found: set[str] = set()
    for st in scope.stages:
        if st.repository == "{repository}" or "{repository}" not in st.repository:
            continue
        if st.registry is not None and st.registry != ref.registry:
            continue
        before, _, after = st.repository.partition("{repository}")
        if relative.startswith(before) and relative.endswith(after) and len(relative) > len(before) + len(after):
            found.add(repository_path(prefix, relative[len(before) : len(relative) - len(after)]))
    return found


def _check_under_prefix(scope: TargetScope, ref: Reference, name: str) -> None:
    """A stage pointer given by reference (``REPO:VARIANT-STAGE``) to a checkout with a
    ``repository_prefix`` must be under it: every stage pointer of the checkout is
    (``stage_location``), so one outside it is another checkout's, whose digest would be read yet
    reported and promoted as this checkout's stage under the prefixed name. NotFoundError (exit 8)
    naming both names. A build's image (a variant or content tag, a digest) may come from
    anywhere: that is a source, named as given."""
    prefix = scope.repository_prefix
    if not prefix or ref.repository.startswith(prefix + "/") or ref.digest or not ref.tag:
        return
    if not any(ref.tag.endswith("-" + stage) for stage in scope.stage_names):
        return
    inside = f"{ref.registry}/{repository_path(prefix, ref.repository)}" + (
        f"@{ref.digest}" if ref.digest else f":{ref.tag}"
    )
    raise NotFoundError(
        f"{name} is a stage pointer outside this checkout's repository_prefix {prefix!r}: repository "
        f"{ref.repository} is another checkout's (or an unprefixed one's); this checkout's stages are under {prefix}/",
        hint=f"give {inside} or the variant id; to work on the unprefixed images, unset repository_prefix "
        "(builder.toml / BUILDER_REPOSITORY_PREFIX)",
    )


def _check_tag_claim(variants: Sequence[Variant], vid: str, name: str) -> None:
    """A variant id read from a tag (``jax:V``, ``jax:V-<hash12>``, ``jax:V-dev``) must be one the
    matrices define (NotFoundError, exit 8): a tag is anyone's name for an image, and ``evil`` or
    ``bookworm`` would otherwise become a variant with stage pointers of its own. Without matrices
    in the checkout there is nothing to check against (the id grammar still holds)."""
    if variants and all(v.id != vid for v in variants):
        raise NotFoundError(
            f"the tag of {name} names variant {vid!r}, which no matrix defines",
            hint="give a variant id, or pass --variant-id VARIANT to say which variant the image is",
            reference=name,
        )


def never_promoted(scope: TargetScope, ref: Reference, digest: str) -> str | None:
    """Why ``digest`` (in ``ref``'s repository) can never be promoted, so that an approval of it
    would never count (promote reads the approvals of what it promotes): it is not an image
    (:func:`builder.registry.manifest.not_an_image`), or it is a platform manifest of the index that
    its variant's content tag or variant tag names (the variant from ``ref``'s tag or the image's
    ``variant`` label, the hash from its ``content-hash`` label). None otherwise, also for a digest
    the registry does not have. The same check ``promote REF@DIGEST`` refuses by (exit 8). Two to
    four GETs (manifest, config, one per tag); registry errors raise."""
    from builder.labels import read as read_label
    from builder.registry.copy import manifest_config
    from builder.registry.manifest import not_an_image

    at = Reference(ref.registry, ref.repository, digest=digest)
    manifest = _digest_manifest(scope, at)
    if manifest is None or manifest.is_index:
        return None
    vid = variant_from_tag(ref.tag, scope.stage_names)
    why = not_an_image(manifest)
    content_hash = None
    if why is None:
        try:
            labels = (manifest_config(scope.clients(ref.registry), ref.repository, manifest).get("config") or {}).get(
                "Labels"
            )
        except RegistryError:  # no readable config: no label to find the index by
            labels = None
        if isinstance(labels, dict):
            vid = vid or read_label(labels, "variant")
            content_hash = read_label(labels, "content-hash")
    found = _listing_index(scope, scope.names or scope.variants, at, digest, vid, content_hash)
    instead = f"; approve the index instead: {found[0]}@{found[2]}" if found else ""
    if why is not None:
        listed = f", listed by the index {found[2]} that {found[0]}:{found[1]} names" if found else ""
        return f"{digest} is {why}{listed}: it is never promoted, so this approval would never count{instead}"
    if found is None:
        return None
    said = _platform_error(found, f"{ref.registry}/{ref.repository}@{digest}").message
    return f"{said}; promote reads the approvals of the index, so this approval would never count{instead}"


def _digest_manifest(scope: TargetScope, ref: Reference) -> Manifest | None:
    """The manifest a digest reference names (one GET), None for a tag or a digest the registry does
    not have (the plan reports it missing); other registry errors raise."""
    if ref.digest is None:
        return None
    try:
        return scope.clients(ref.registry).try_get_manifest(ref.repository, ref.digest)
    except NotFoundError:  # no such repository or registry entry: the plan reports it missing
        return None


def _check_is_image(
    scope: TargetScope,
    variants: Callable[[], Sequence[Variant]],
    manifest: Manifest,
    ref: Reference,
    name: str,
    vid: str | None,
) -> None:
    """NotFoundError (exit 8) when the digest ``ref`` names is not an image
    (:func:`builder.registry.manifest.not_an_image`: a BuildKit attestation manifest, a signature,
    another artifact), naming the index that lists it when the variant's tags find one: promoting
    it would point a stage at something no host can run."""
    from builder.registry.manifest import not_an_image  # a digest reference only (start-up of resolve)

    why = not_an_image(manifest)
    if why is None:
        return
    found = _listing_index(scope, variants, ref, manifest.digest, vid, None)
    where = f", listed by the index {found[2]} that {found[0]}:{found[1]} names" if found else ""
    raise NotFoundError(
        f"{name} is {why}{where}: only an image (an index or a platform image) is promoted",
        hint=(
            f"promote the index instead: builder promote {found[0]}@{found[2]} --to STAGE"
            if found
            else "promote the build's index or image digest (`builder status` shows it), or its variant id"
        ),
        reference=name,
    )


def _check_not_platform(
    scope: TargetScope, manifest: Manifest, ref: Reference, name: str, vid: str, home: tuple[str, str]
) -> None:
    """NotFoundError (exit 8, :func:`_platform_error`) when the image manifest ``ref`` names is a
    platform manifest of the index that the variant's content tag (the hash from the image's
    ``content-hash`` label) or variant tag names, in the variant's repository ``home`` or the
    reference's: a multi-platform build is promoted whole, whoever names the variant (tag,
    ``--variant-id``). One GET of the config and of each tag read."""
    from builder.labels import read as read_label
    from builder.registry.copy import manifest_config

    client = scope.clients(ref.registry)
    try:
        labels = (manifest_config(client, ref.repository, manifest).get("config") or {}).get("Labels")
    except RegistryError:  # no readable config: the variant tag alone is looked at
        labels = None
    content_hash = read_label(labels, "content-hash") if isinstance(labels, dict) else None
    found = _listing_index(scope, lambda: (), ref, manifest.digest, vid, content_hash, home)
    if found is not None:
        raise _platform_error(found, name)


def _listing_index(
    scope: TargetScope,
    variants: Callable[[], Sequence[VariantName]],
    ref: Reference,
    digest: str,
    vid: str | None,
    content_hash: str | None,
    home: tuple[str, str] | None = None,
) -> tuple[str, str, str, Descriptor] | None:
    """(registry/repository, tag, index digest, the child's descriptor) of the first index that
    lists ``digest``, read under the variant's content tag (``<vid>-<hash12>``) and variant tag in
    the reference's repository, then the variant's (``home``, else the matrices'). Without ``vid``
    (an attestation manifest has no labels) the variant tags of the matrices' variants built into
    ``ref``'s repository are read (at most :data:`MAX_VARIANT_TAGS`). None when none lists it.
    One GET per tag read; registry errors raise."""
    named = [(scope.registry, repository_path(scope.repository_prefix, v.repository), v.id) for v in variants()]
    if vid is None:
        here = [v for registry, repository, v in named if (registry, repository) == (ref.registry, ref.repository)]
        tries = [(ref.registry, ref.repository, v) for v in here[:MAX_VARIANT_TAGS]]
    else:
        hashed = content_hash is not None and is_sha256_digest(f"sha256:{content_hash}")
        tags = ([f"{vid}-{content_hash[:12]}"] if content_hash and hashed else []) + [vid]
        places = [(ref.registry, ref.repository)]  # the reference's own repository first: its index
        places.extend([home] if home is not None else [(r, repo) for r, repo, v in named if v == vid])
        tries = [(registry, repository, tag) for registry, repository in dict.fromkeys(places) for tag in tags]
    for registry, repository, tag in tries:
        index = scope.clients(registry).try_get_manifest(repository, tag)
        child = next((d for d in index.manifests if d.digest == digest), None) if index is not None else None
        if index is not None and child is not None:
            return f"{registry}/{repository}", tag, index.digest, child
    return None


def _platform_error(found: tuple[str, str, str, Descriptor], name: str) -> NotFoundError:
    """The refusal of a platform manifest ``name`` of an indexed build, naming the index and the tag
    that names it, with the command that promotes the index (https://github.com/opencontainers/image-spec/blob/v1.1.0/image-index.md)."""
    at, tag, index, child = found
    platform = f" ({child.platform})" if child.platform is not None else ""
    kind = "content tag" if CONTENT_SUFFIX.search(tag) else "tag"
    return NotFoundError(
        f"{name} is a platform manifest{platform} of the index {index} that the {kind} {at}:{tag} "
        "names: a multi-platform build is promoted as its whole index",
        hint=f"promote the index instead: builder promote {at}@{index} --to STAGE (its platform manifests go with it)",
        reference=name,
    )


def _check_platform_of(scope: TargetScope, built: str, tagged: str, index: str, digest: str, name: str) -> None:
    """When ``tagged`` (the content tag, in ``built``) names an index (``index``) that lists
    ``digest`` as one of its platform manifests, NotFoundError (exit 8) saying so, with the command
    that promotes the index: a multi-platform build is promoted whole, its signature and records
    are the index's. Otherwise nothing (one GET of ``index``; registry errors raise). The index
    media types: https://github.com/opencontainers/image-spec/blob/v1.1.0/image-index.md"""
    listed = scope.clients(scope.registry).get_manifest(built, index)
    child = next((d for d in listed.manifests if d.digest == digest), None)
    if child is None:
        return
    raise _platform_error((f"{scope.registry}/{built}", tagged.rpartition(":")[2], index, child), name)


def _check_label_claim(
    scope: TargetScope, variants: Sequence[Variant], vid: str, ref: Reference, name: str, content_hash: str | None
) -> None:
    """An image's variant label is a claim the image makes about itself: it must name a variant
    of the matrices that is built into the image's repository or whose stage repository it is
    (``prod/{repository}``), and the build repository must agree: the variant's content tag
    ``<variant>-<hash12>`` (the hash from the image's ``content-hash`` label) names this very
    digest (NotFoundError, exit 8, otherwise). That refuses a label alone, labels copied from a
    build, and another variant's build in a repository several variants share. It is a
    consistency check, not a proof: whoever can push can write the content tag too; what stops
    such an image is a stage's signature rule (the build key signs only what this checkout built,
    ``builder.publish.sign_earlier``). Without matrices in the checkout there is nothing to check
    against (the id grammar still holds). ``--variant-id`` is the user's own statement and is not
    second-guessed."""
    if not variants:
        return
    v = next((v for v in variants if v.id == vid), None)
    if v is None:
        raise NotFoundError(
            f"the {variant_label()} label of {name} claims variant {vid!r}, which no matrix defines",
            hint="labels are claims: pass --variant-id VARIANT to name the variant yourself",
        )
    built = repository_path(scope.repository_prefix, v.repository)
    repository = ref.repository
    if built != repository and built not in _builds_of(scope, ref):
        raise NotFoundError(
            f"the {variant_label()} label of {name} claims variant {vid!r}, which is built into {built}, "
            f"not {repository}",
            hint="labels are claims: promote the image from the variant's repository, or pass --variant-id "
            "to name the variant yourself",
        )
    tag = f"{vid}-{content_hash[:12]}" if content_hash and is_sha256_digest(f"sha256:{content_hash}") else None
    named = scope.clients(scope.registry).try_resolve(built, tag) if tag is not None else None
    if tag is None or named != ref.digest:
        if tag is not None and named is not None and ref.digest is not None:
            _check_platform_of(scope, built, f"{built}:{tag}", named, ref.digest, name)
        why = f"{built}:{tag} does not name this digest" if tag else "the image has no content-hash label"
        raise NotFoundError(
            f"the {variant_label()} label of {name} claims variant {vid!r}, but no build of that variant "
            f"confirms it: {why}",
            hint="labels are claims: promote the variant's content tag (`builder status` shows it), or pass "
            "--variant-id to name the variant yourself",
        )
