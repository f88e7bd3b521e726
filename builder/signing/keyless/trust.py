"""The Sigstore instance: client trust config (signing), pinned trusted root (verification), OIDC tokens.

Formats: https://github.com/sigstore/protobuf-specs (``ClientTrustConfig``, ``TrustedRoot``).
Rekor v1 is pinned (``ClientTrustConfig.force_tlog_version = 1``): v2 entries carry no signed entry
timestamp, and cosign's legacy bundle annotation needs one.

Errors: ``ConfigError`` (2) for unreadable or invalid trust files; ``SigningError`` (17) for an
unusable token or signing config.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import ConfigError, SigningError

if TYPE_CHECKING:
    from sigstore.models import ClientTrustConfig, TrustedRoot
    from sigstore.oidc import IdentityToken


def load_trust_config(path: Path | None, *, offline: bool = False) -> ClientTrustConfig:
    """The Sigstore instance to sign with, Rekor v1 pinned.

    ``path``: a client trust config JSON (``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json``:
    trusted root + signing config) for a private instance; None: the public-good instance from
    Sigstore's TUF repository (``offline=True`` uses the cached/bundled copy). Raises ConfigError
    (unreadable/invalid file) or SigningError (no Rekor v1 log in the signing config).
    """
    from sigstore.models import ClientTrustConfig

    try:
        if path is None:
            tc = ClientTrustConfig.production(offline=offline)
        else:
            tc = ClientTrustConfig.from_json(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the trust config {path}: {exc}") from exc
    except Exception as exc:  # sigstore raises ValueError/pydantic/TUF errors
        raise ConfigError(
            f"invalid Sigstore trust config {path or '(public-good TUF)'}: {exc}",
            hint="give a client trust config JSON (mediaType application/vnd.dev.sigstore.clienttrustconfig.v0.1+json)",
        ) from exc
    tc.force_tlog_version = 1
    try:
        tc.signing_config.get_tlogs()
    except Exception as exc:
        raise SigningError(
            f"the trust config {path or '(public-good)'} names no usable Rekor v1 log: {exc}",
            hint="the legacy cosign bundle annotation needs a Rekor v1 entry (signed entry timestamp)",
        ) from exc
    return tc


#: The mediaType prefixes of the files a pinned trusted root may be given as: a ``TrustedRoot``
#: (``application/vnd.dev.sigstore.trustedroot+json;version=0.1``, ``...trustedroot.v0.2+json``)
#: or a ``ClientTrustConfig`` (``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json``), per
#: https://github.com/sigstore/protobuf-specs/blob/main/protos/sigstore_trustroot.proto
TRUST_FILE_MEDIA_TYPES = ("application/vnd.dev.sigstore.trustedroot", "application/vnd.dev.sigstore.clienttrustconfig")


def check_trust_file(path: Path) -> None:
    """A cheap check that ``path`` is a Sigstore trusted root or client trust config: a JSON object
    whose ``mediaType`` starts with one of :data:`TRUST_FILE_MEDIA_TYPES` (no sigstore import, so
    a command that never verifies a keyless identity still refuses a wrong file while its command
    line is read). :func:`load_trusted_root` parses the whole file where it is used. Raises
    ConfigError (exit 2) naming the file and what it holds instead."""
    try:
        data = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read the trusted root {path}: {exc}") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ConfigError(f"{path} is not a Sigstore trusted root: not JSON ({exc})", hint=_TRUST_FILE_HINT) from exc
    media_type = data.get("mediaType") if isinstance(data, dict) else None
    if not isinstance(media_type, str) or not media_type.startswith(TRUST_FILE_MEDIA_TYPES):
        got = (
            f"JSON of a {type(data).__name__}, not an object"
            if not isinstance(data, dict)
            else ("no mediaType" if media_type is None else f"mediaType {media_type!r}")
        )
        raise ConfigError(f"{path} is not a Sigstore trusted root: {got}", hint=_TRUST_FILE_HINT)


_TRUST_FILE_HINT = "give a Sigstore trusted_root.json (`cosign trusted-root create` writes one)"


def load_trusted_root(path: Path | None, *, offline: bool = True) -> TrustedRoot:
    """The pinned trusted root for verification: a ``trusted_root.json`` or a client trust config
    file (its ``trustedRoot`` is used); None: the public-good root (offline: cached/bundled copy).
    Raises ConfigError when unreadable or invalid."""
    from sigstore.models import ClientTrustConfig, TrustedRoot

    try:
        if path is None:
            return ClientTrustConfig.production(offline=offline).trusted_root
        text = Path(path).read_text()
        media_type = str(json.loads(text).get("mediaType", ""))
        if "clienttrustconfig" in media_type:
            return ClientTrustConfig.from_json(text).trusted_root
        return TrustedRoot.from_file(str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read the trusted root {path}: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"invalid Sigstore trusted root {path or '(public-good TUF)'}: {exc}",
            hint="give a trusted_root.json (mediaType application/vnd.dev.sigstore.trustedroot+json;version=0.1)",
        ) from exc


def identity_token(raw: str) -> IdentityToken:
    """An explicit OIDC identity token (JWT). Raises SigningError when malformed or expired."""
    from sigstore.oidc import IdentityError, IdentityToken

    try:
        return IdentityToken(raw.strip())
    except IdentityError as exc:
        raise SigningError(f"the OIDC identity token is not usable: {exc}", hint="get a fresh token") from exc


def ambient_identity_token() -> IdentityToken:
    """The ambient OIDC token (GitHub Actions with ``permissions: id-token: write``, and the other
    environments ``id.detect_credential`` knows), audience ``sigstore``. The CLI decides to call this;
    it reads the CI environment through sigstore-python. Raises SigningError when none is found."""
    from sigstore.oidc import IdentityError, detect_credential

    try:
        raw = detect_credential()
    except IdentityError as exc:
        raise SigningError(f"detecting the ambient OIDC token failed: {exc}") from exc
    if not raw:
        raise SigningError(
            "no ambient OIDC identity token found",
            hint="in GitHub Actions grant `permissions: id-token: write`; elsewhere pass --oidc-token",
        )
    return identity_token(raw)


@dataclasses.dataclass(frozen=True)
class KeylessSetup:
    """What a keyless signature needs: the OIDC ``identity_token`` (explicit, or the ambient CI
    token) and the Sigstore client ``trust_config`` (public-good or a private instance)."""

    identity_token: IdentityToken
    trust_config: ClientTrustConfig


def key_or_keyless(key: Path | None, keyless: bool) -> None:
    """A signature is made with a key pair or keylessly, never both: ``--key`` with ``--keyless``
    raises ConfigError (2) naming both, before any token or key is read."""
    if keyless and key is not None:
        raise ConfigError(
            "--keyless and --key exclude each other",
            hint="drop --key to sign keylessly, or --keyless to sign with the key",
        )


def keyless_setup(oidc_token: str | None, trust_config: Path | None) -> KeylessSetup:
    """``--keyless``: the token ``oidc_token`` (``--oidc-token`` / ``BUILDER_OIDC_TOKEN``, read
    by the command line) or, when None, the ambient CI token (:func:`ambient_identity_token`),
    and :func:`load_trust_config` of ``trust_config`` (None: public-good). Raises SigningError
    (no usable token), ConfigError (unusable trust config)."""
    token = identity_token(oidc_token) if oidc_token else ambient_identity_token()
    return KeylessSetup(token, load_trust_config(trust_config))
