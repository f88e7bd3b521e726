"""After a push: sign the image and attach its SLSA provenance, with a key or keylessly.

:func:`signing_hook` makes the ``on_built`` hook of :func:`builder.build.run.build_variants` (and of
``builder run``). SLSA provenance v1: https://slsa.dev/spec/v1.0/provenance.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import ConfigError
from builder.models import BuiltImage, RenderedImage

if TYPE_CHECKING:
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityToken

    from builder.build.plan import BuildOptions
    from builder.registry import RegistryClient
    from builder.signing.signer import Signer


@dataclasses.dataclass(frozen=True)
class KeylessSetup:
    """What a keyless build signature needs: the OIDC identity token (explicit, or the ambient CI token
    found by ``builder.keyless.ambient_identity_token``; the CLI decides) and the Sigstore client trust
    config (``builder.keyless.load_trust_config``: public-good or a private instance)."""

    identity_token: IdentityToken
    trust_config: ClientTrustConfig


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
) -> Callable[[BuiltImage, RenderedImage], None]:
    """The ``on_built`` hook of :func:`build_variants`: after each push, build the SLSA provenance v1
    predicate (``builder.provenance.provenance_predicate``: ``git_commit``, ``options.builder``,
    ``secret_ids`` (default: the ids of ``options.secrets``), ``options.source_date_epoch``, finish time
    ``now()`` (default: UTC now)) and sign the digest and attach the provenance, either with ``signer``
    (``builder.sign.sign_and_attest_build``: ``.sig``/``.att`` layers) or keylessly with ``keyless``
    (``builder.keyless.keyless_sign_and_attest_build``: legacy layers and Sigstore bundle referrers).
    ``lock_dir``: file locks for concurrent writers of the same signature tags (``<state_dir>/locks``).

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

            keyless_sign_and_attest_build(
                client,
                repository,
                built.digest,
                predicate,
                identity_token=keyless.identity_token,
                trust_config=keyless.trust_config,
                lock_dir=lock_dir,
            )
            return
        from builder.signing.sign import sign_and_attest_build

        assert signer is not None
        sign_and_attest_build(client, repository, built.digest, signer, predicate, lock_dir=lock_dir)

    return hook
