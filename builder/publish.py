"""After a push: sign the image and attach its SLSA provenance, with a key or keylessly; and
``builder build`` as one call (:func:`build_images`: plan or build, then sign what was pushed and
what was built earlier but carries no valid signature and provenance by the key, as ``builder run``
does: :func:`sign_earlier`).

:func:`signing_hook` makes the ``on_built`` hook of :func:`builder.build.run.build_variants` (and of
``builder run``). SLSA provenance v1: https://slsa.dev/spec/v1.0/provenance.

Errors: ConfigError (2) for ``--keyless`` with ``--key``; SigningKeyError (16), SigningError (17)
for keys and tokens; what :func:`builder.build.run.build_variants` raises; a run with failed
variants is returned (:func:`builder.build.results.raise_for_failures` raises its error).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any

from builder.build.results import BuildPreview, BuildRun
from builder.build.run import build_variants, preview
from builder.build.source import git_commit as source_commit
from builder.errors import BuilderError, ConfigError, TagConflictError
from builder.signing.keyless.trust import KeylessSetup, key_or_keyless, keyless_setup

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from builder.build.plan import BuildOptions
    from builder.build.variant import ProgressFn
    from builder.models import BuiltImage, RenderedImage
    from builder.registry import RegistryClient
    from builder.signing.keys import PublicKey
    from builder.signing.report import VerificationReport
    from builder.signing.signer import Signer


def signing_hook(
    *,
    client: RegistryClient,
    options: BuildOptions,
    lock_dir: Path,
    git_commit: str | None,
    signer: Signer | None = None,
    keyless: KeylessSetup | None = None,
    secret_ids: Sequence[str] | None = None,
    source_repository: str | None = None,
    now: Callable[[], dt.datetime] | None = None,
    bundle: bool = False,
    sbom: bool = True,
) -> Callable[[BuiltImage, RenderedImage], None]:
    """The ``on_built`` hook of :func:`build_variants`: after each push, build the SLSA provenance v1
    predicate (``builder.signing.provenance.provenance_predicate``: ``git_commit``, ``options.builder``,
    ``secret_ids`` (default: the ids of ``options.secrets``), ``options.source_date_epoch``, finish time
    ``now()`` (default: UTC now)) and sign the digest and attach the provenance, either with ``signer``
    (``builder.signing.sign.sign_and_attest_build``: ``.sig``/``.att`` layers) or keylessly with ``keyless``
    (``builder.signing.keyless.write.keyless_sign_and_attest_build``: legacy layers and Sigstore bundle
    referrers).
    ``lock_dir``: file locks for concurrent writers of the same signature tags (``<state_dir>/locks``).

    ``bundle``: with a key, also write the provenance as a Sigstore bundle referrer (cosign 3's
    format; keyless always writes both). ``sbom``: also attach the image's CycloneDX SBOM (with a key:
    :func:`attach_sbom`; keylessly: signed in the same session as the provenance, :func:`image_sbom`).

    Exactly one of ``signer`` and ``keyless``; otherwise ConfigError. The hook raises SigningError and
    registry errors, which ``build_variants`` turns into a failed variant."""
    if (signer is None) == (keyless is None):
        raise ConfigError(
            "signing needs exactly one of a signing key and a keyless (OIDC) setup",
            hint="pass --key/--sign for a key pair, or --keyless (not both)",
        )
    from builder.signing.provenance import provenance_predicate

    ids = list(secret_ids) if secret_ids is not None else [s[0] for s in options.secrets]
    clock = now or (lambda: dt.datetime.now(dt.UTC))

    def hook(built: BuiltImage, rendered: RenderedImage) -> None:
        predicate = provenance_predicate(
            rendered,
            built,
            git_commit=git_commit,
            source_repository=source_repository,
            buildx_builder=options.builder,
            secret_ids=ids,
            source_date_epoch=options.source_date_epoch,
            finished=clock(),
        )
        repository = built.reference.split("/", 1)[1]  # BuiltImage.reference is registry/repository
        if keyless is not None:
            from builder.signing.keyless.write import keyless_sign_and_attest_build

            also = [image_sbom(client, repository, built.digest, state_dir=options.state_dir)] if sbom else []
            keyless_sign_and_attest_build(
                client,
                repository,
                built.digest,
                predicate,
                identity_token=keyless.identity_token,
                trust_config=keyless.trust_config,
                lock_dir=lock_dir,
                also=also,
            )
            return
        from builder.signing.sign import sign_and_attest_build

        assert signer is not None
        sign_and_attest_build(client, repository, built.digest, signer, predicate, lock_dir=lock_dir, bundle=bundle)
        if sbom:
            attach_sbom(client, repository, built.digest, signer, lock_dir=lock_dir, state_dir=options.state_dir)

    return hook


def image_sbom(client: RegistryClient, repository: str, digest: str, *, state_dir: Path) -> tuple[str, dict[str, Any]]:
    """(``https://cyclonedx.org/bom``, the CycloneDX SBOM) of the pushed image
    (:func:`builder.image.sbom.image_bom` of its inspection, layers cached under
    ``<state_dir>/cache/layers``: a variant's base layers are read once). Raises registry errors."""
    from builder.image.inspection import inspect_image
    from builder.image.layers import LayerCache
    from builder.image.sbom import CYCLONEDX_PREDICATE, image_bom

    inspection = inspect_image(client, repository, digest, cache=LayerCache(state_dir / "cache" / "layers"))
    return CYCLONEDX_PREDICATE, image_bom(inspection)


def attach_sbom(
    client: RegistryClient, repository: str, digest: str, signer: Signer, *, lock_dir: Path, state_dir: Path
) -> None:
    """The CycloneDX SBOM of the pushed image (:func:`image_sbom`) attached to ``digest`` as a signed
    ``https://cyclonedx.org/bom`` attestation, as ``builder sbom --key`` does. Raises registry errors and
    SigningError."""
    from builder.signing.attest import attest_image

    predicate_type, bom = image_sbom(client, repository, digest, state_dir=state_dir)
    attest_image(client, repository, digest, predicate_type, bom, signer, lock_dir=lock_dir)


def signing_report(client: RegistryClient, built: BuiltImage, keys: Sequence[PublicKey]) -> VerificationReport:
    """The verification of ``built``'s signatures and SLSA provenance v1 by ``keys``
    (``builder.signing.verify.verify_image``; ``ok``: both are there and valid). Raises registry
    errors."""
    from builder.predicates import SLSA_PROVENANCE_V1
    from builder.signing.verify import verify_image

    repository = built.reference.split("/", 1)[1]
    return verify_image(client, repository, built.digest, keys=keys, predicate_types=(SLSA_PROVENANCE_V1,))


def sign_earlier(
    built: BuiltImage,
    retag: bool,
    client: RegistryClient,
    on_built: Callable[[BuiltImage, RenderedImage], None] | None,
    rendered: Mapping[str, RenderedImage],
    keys: Sequence[PublicKey],
    progress: ProgressFn,
    *,
    state_dir: Path,
    keyless: bool = False,
) -> BuiltImage:
    """The ``vet`` of :func:`builder.build.run.build_variants`: ``built`` as is, unless it was built
    earlier (``up-to-date``) without a valid signature and provenance by ``keys``: then ``on_built``
    signs it and its status becomes ``signed`` (``failed`` with the reason when that signing fails).
    Only an image this checkout pushed under that content
    tag (:func:`builder.build.pushed.pushed_here`, records under ``state_dir``), or one the key
    already gave an image signature (``builder sign REF``: the user's word; a promotion's signature
    of a copy does not count), is signed and given provenance: anyone
    who may push to the repository can point a content tag at any image, and the build key must not
    vouch for it; such an image is ``failed`` with a ``tag-conflict`` error (exit 15) and nothing is
    written. ``rendered``: the rendered images by variant id; ``progress(variant, event, detail)``
    hears ``sign`` before and ``signed`` after.

    ``retag``: the variant tag names another digest and would be moved to this one. Not signing
    (``on_built`` None) and ``keyless`` (no key to check a signature by): the variant tag moves only
    to a digest this checkout pushed (:func:`builder.build.pushed.refuse_foreign_retag`, else ``failed``,
    exit 15); keylessly, such a digest of this checkout's that carries no signature at all (no
    ``sha256-<hex>.sig`` tag, cosign's legacy signature tag,
    https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md) is signed, status ``signed``.
    Raises registry errors (RegistryUnavailableError, RegistryAuthError, RegistryError) while reading
    signatures."""
    from builder.build.pushed import refuse_foreign_retag

    if built.status != "up-to-date":
        return built
    if on_built is None:
        return refuse_foreign_retag(built, retag, state_dir, progress)
    if keyless:
        return _sign_own_unsigned(built, retag, client, on_built, rendered, progress, state_dir=state_dir)
    report = signing_report(client, built, keys)
    if report.ok:
        return built
    from builder.build.pushed import pushed_dir, pushed_here

    # the user's word: an image signature by the key (a promotion's signature of a copy is none)
    vouched = any(i.ok and i.kind == "signature" and not i.is_promotion for i in report.items)
    if not vouched and not pushed_here(state_dir, built.digest, built.content_tag):
        error = TagConflictError(
            f"{built.reference}:{built.content_tag} names {built.digest}, which carries no signature by the "
            f"key and which this checkout did not push (no record in {pushed_dir(state_dir)}): builder signs "
            f"only images it built. If it is your build from another machine, inspect it and sign it yourself "
            f"(builder sign {built.reference}@{built.digest}; the next build --sign adds its provenance)"
        )
        progress(built.variant_id, "failed", error.message)
        return dataclasses.replace(built, status="failed", error=f"{error.kind}: {error.message}")
    return _sign(built, on_built, rendered, progress)


def _sign_own_unsigned(
    built: BuiltImage,
    retag: bool,
    client: RegistryClient,
    on_built: Callable[[BuiltImage, RenderedImage], None],
    rendered: Mapping[str, RenderedImage],
    progress: ProgressFn,
    *,
    state_dir: Path,
) -> BuiltImage:
    """Keylessly (see :func:`sign_earlier`): this checkout's own push without any signature is signed;
    a digest it did not push keeps what it has and is given no variant tag."""
    from builder.build.pushed import pushed_here, refuse_foreign_retag

    if not pushed_here(state_dir, built.digest, built.content_tag):
        return refuse_foreign_retag(built, retag, state_dir, progress)
    repository = built.reference.split("/", 1)[1]  # BuiltImage.reference is registry/repository
    if client.try_resolve(repository, "sha256-" + built.digest.removeprefix("sha256:") + ".sig") is not None:
        return built
    return _sign(built, on_built, rendered, progress)


def _sign(
    built: BuiltImage,
    on_built: Callable[[BuiltImage, RenderedImage], None],
    rendered: Mapping[str, RenderedImage],
    progress: ProgressFn,
) -> BuiltImage:
    progress(built.variant_id, "sign", "signing an image built earlier without signature/provenance")
    try:
        on_built(built, rendered[built.variant_id])
    except BuilderError as exc:
        return dataclasses.replace(built, status="failed", error=f"signing failed: {exc.message}")
    progress(built.variant_id, "signed", built.digest)
    return dataclasses.replace(built, status="signed")


def signer_public_key(signer: Signer) -> PublicKey:
    """The verification key of a key-pair ``signer`` (its PEM public half)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from builder.signing.keys import PublicKey

    key = serialization.load_pem_public_key(signer.public_key_pem.encode())
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ConfigError(f"signing key {getattr(signer, 'source', '')} is not an ECDSA key")
    return PublicKey(key, source=getattr(signer, "source", ""))


@dataclasses.dataclass(frozen=True)
class SigningRequest:
    """How ``builder build`` signs what it pushes: not at all, with a key (``sign``; ``key``
    None: ``builder.toml`` ``key``) or keylessly (``keyless``: ``oidc_token``, else the ambient CI
    token, and the Sigstore ``trust_config``; None: public-good); ``bundle``: with a key, the
    provenance also as a Sigstore bundle referrer (``builder build --bundle``)."""

    sign: bool = False
    key: Path | None = None
    keyless: bool = False
    oidc_token: str | None = None
    trust_config: Path | None = None
    bundle: bool = False

    def resolve(self, signer_of: Callable[[Path | None], Signer]) -> Signer | KeylessSetup | None:
        """The signer (``signer_of(key)``), the keyless setup, or None when not signing. Raises
        ConfigError (2) for ``--keyless`` with ``--key``, SigningKeyError / SigningError for an
        unusable key or token."""
        key_or_keyless(self.key, self.keyless)
        if self.keyless:
            return keyless_setup(self.oidc_token, self.trust_config)
        if self.sign:
            return signer_of(self.key)
        return None


def build_images(
    rendered: Sequence[RenderedImage],
    options: BuildOptions,
    *,
    client: RegistryClient,
    signing: SigningRequest,
    signer_of: Callable[[Path | None], Signer],
    source_root: Path,
    dry_run: bool = False,
    on_progress: ProgressFn | None = None,
) -> BuildRun | BuildPreview:
    """``builder build``: with ``dry_run`` the plan (:func:`builder.build.run.preview`, nothing
    built); else every variant of ``rendered`` built and pushed (:func:`build_variants`) and, per
    ``signing`` (keys through ``signer_of``), each pushed digest signed with its SLSA provenance
    (the git commit of ``source_root``); with a key, a digest built earlier that carries no valid
    signature and provenance by it is signed too (status ``signed``, :func:`sign_earlier`, decided
    before its variant tag is moved: a refused digest moves no tag); keylessly, one this checkout
    pushed that carries no signature at all; in every mode (``--no-sign`` too) the variant tag moves
    only to a digest this checkout pushed or the key signed (else exit 15, no tag moved). Nothing
    selected: an empty run. Failed variants
    are in the run; raises before building what ``build_variants`` and
    :meth:`SigningRequest.resolve` raise, registry errors while checking earlier signatures."""
    if dry_run:
        return BuildPreview(tuple(preview(rendered, options, client)))
    chosen = signing.resolve(signer_of)
    if not rendered:
        return BuildRun((), (), 0.0)
    on_built = None
    if chosen is not None:
        on_built = signing_hook(
            client=client,
            options=options,
            lock_dir=options.state_dir / "locks",
            git_commit=source_commit(source_root),
            signer=chosen if not isinstance(chosen, KeylessSetup) else None,
            keyless=chosen if isinstance(chosen, KeylessSetup) else None,
            bundle=signing.bundle,
        )
    keyless = isinstance(chosen, KeylessSetup)
    keys = (signer_public_key(chosen),) if chosen is not None and not isinstance(chosen, KeylessSetup) else ()
    by_id = {r.variant.id: r for r in rendered}
    progress = on_progress or (lambda _v, _e, _d: None)

    def vet(built: BuiltImage, retag: bool) -> BuiltImage:  # before its variant tag moves: a refused digest keeps none
        return sign_earlier(
            built, retag, client, on_built, by_id, keys, progress, state_dir=options.state_dir, keyless=keyless
        )

    return build_variants(rendered, options, client=client, on_built=on_built, on_progress=on_progress, vet=vet)
