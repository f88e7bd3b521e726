"""What ``builder keys|sign|attest|verify`` do: typed values in, one frozen result out.

Each function takes what the command line collected (reference text, a loaded signer, key files,
identity patterns, an OIDC token and trust configuration) plus ``registries`` (registry host ->
``builder.registry.RegistryClient``, with credentials) and returns a frozen dataclass the CLI emits.
The reference is resolved here (``resolve_target``), and so are the usage errors (which
combination of options is refused, with which exit code: ``docs/exit-codes.md``).

Keyless work goes through ``builder.signing.keyless``; sigstore-python itself is imported only
when a keyless function runs.

Errors: ``ConfigError`` (2) for unusable option combinations and predicate files;
``SigningKeyError`` (16) for key files and passwords; ``SigningError`` (17), ``VerificationError``
(18, raised by the caller through ``VerificationReport.raise_for_failure``); registry errors.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.errors import ConfigError
from builder.predicates import COSIGN_SIGN_V1
from builder.registry import Reference, parse_reference, runnable_platforms
from builder.signing.bundles import ReferrerWrite, ReferrerWriteDocument, attest_both, attest_bundle
from builder.signing.dsse import STATEMENT_TYPES
from builder.signing.keyless.identity import policies_from_options
from builder.signing.keyless.trust import KeylessSetup, load_trusted_root
from builder.signing.keyless.verify import verify_keyless
from builder.signing.keyless.write import (
    KeylessWrite,
    KeylessWriteDocument,
    keyless_attest_image,
    keyless_sign_image,
)
from builder.signing.keys import (
    export_cosign_key_pair,
    generate_key_pair,
    import_key_pair,
    load_public_keys,
    new_key_password,
)
from builder.signing.layer import WriteResult, WriteResultDocument
from builder.signing.sign import sign_image
from builder.signing.verify import verify_image

if TYPE_CHECKING:
    from pathlib import Path

    from builder.registry import RegistryClient
    from builder.signing.report import VerificationReport
    from builder.signing.signer import Signer

#: registry host -> a client for it (with the invocation's credentials).
Registries = Callable[[str], "RegistryClient"]


@dataclasses.dataclass(frozen=True)
class Target:
    """A reference resolved for signing or verification: the parsed ``reference``, the ``client``
    of its registry and the manifest ``digest`` (``sha256:<hex>``) it names."""

    text: str
    reference: Reference
    client: RegistryClient
    digest: str

    @property
    def repository(self) -> str:
        return self.reference.repository

    @property
    def name(self) -> str:
        """``registry/repository``."""
        return self.reference.name

    @property
    def pinned_tag(self) -> str | None:
        """The tag given together with a digest (``name:tag@digest``): verification checks that it
        still points at the digest. None otherwise."""
        return self.reference.tag if self.reference.digest else None


def resolve_target(text: str, *, default_registry: str, registries: Registries, head_digest: bool = True) -> Target:
    """Parse ``text`` (``[registry/]repository[:tag][@digest]``) and resolve it to a digest.

    A tag is resolved in the registry; a digest is checked there too (HEAD) unless
    ``head_digest`` is False (verification checks the digest itself). Raises NotFoundError (8)
    when the tag or digest does not exist, other registry errors as ``builder.registry`` does."""
    ref = parse_reference(text, default_registry)
    client = registries(ref.registry)
    if ref.digest and not head_digest:
        return Target(text, ref, client, ref.digest)
    return Target(text, ref, client, client.resolve(ref.repository, ref.digest or ref.ref))


# ---------------------------------------------------------------------------------------------
# keys


class KeysGenerateDocument(TypedDict):
    """``builder keys generate --json``: the files written, the key's ``fingerprint``
    (``sha256:<hex of DER SPKI>``) and whether the private key is ``encrypted``."""

    private_key: str
    public_key: str
    fingerprint: str
    encrypted: bool


class KeysImportDocument(TypedDict):
    """``builder keys import --json``: the ``source`` file imported, the files written and the
    key's ``fingerprint``."""

    source: str
    private_key: str
    public_key: str
    fingerprint: str


class KeysExportDocument(TypedDict):
    """``builder keys export --json``: the private key file exported (``source``), the cosign key
    files written (``private_key``: ``cosign.key``, ``public_key``: ``cosign.pub``) and the key's
    ``fingerprint`` (the same as the source's)."""

    source: str
    private_key: str
    public_key: str
    fingerprint: str


@dataclasses.dataclass(frozen=True)
class KeyPairFiles:
    """A key pair written by ``builder keys generate|import``: the two files and the fingerprint
    (``sha256:<hex of DER SPKI>``); ``source`` is the imported file (None for a generated pair)."""

    private_key: Path
    public_key: Path
    fingerprint: str
    encrypted: bool
    source: Path | None = None

    def to_json(self) -> KeysGenerateDocument | KeysImportDocument:
        if self.source is not None:
            return {
                "source": str(self.source),
                "private_key": str(self.private_key),
                "public_key": str(self.public_key),
                "fingerprint": self.fingerprint,
            }
        return {
            "private_key": str(self.private_key),
            "public_key": str(self.public_key),
            "fingerprint": self.fingerprint,
            "encrypted": self.encrypted,
        }


def generate_keys(output_dir: Path, key_password: str | None, *, unencrypted: bool = False) -> KeyPairFiles:
    """``builder keys generate``: a new key pair in ``output_dir``, encrypted with ``key_password``
    (``BUILDER_KEY_PASSWORD``) unless ``unencrypted`` (``--no-password``). Raises SigningKeyError
    (no password, existing files, empty password)."""
    password = new_key_password(key_password, unencrypted=unencrypted)
    key_path, pub_path, fp = generate_key_pair(output_dir, password)
    return KeyPairFiles(key_path, pub_path, fp, password is not None)


def export_keys(source: Path, output_dir: Path, source_password: str | None, password: str | None) -> KeyPairFiles:
    """``builder keys export``: the key pair of ``source`` (``builder.key`` or another private key,
    decrypted with ``source_password``) written as cosign's ``cosign.key``/``cosign.pub`` in
    ``output_dir``, encrypted with ``password`` (``COSIGN_PASSWORD``), for ``cosign sign --key``.
    Raises SigningKeyError (no password, existing files, unreadable source)."""
    key_path, pub_path, fp = export_cosign_key_pair(source, output_dir, source_password, password)
    return KeyPairFiles(key_path, pub_path, fp, True, source)


def import_keys(
    source: Path,
    output_dir: Path,
    source_password: str | None,
    key_password: str | None,
    *,
    unencrypted: bool = False,
) -> KeyPairFiles:
    """``builder keys import``: ``source`` (cosign key or PEM EC key, decrypted with
    ``source_password``) written into ``output_dir``, encrypted with ``key_password`` unless
    ``unencrypted``. Raises SigningKeyError."""
    password = new_key_password(key_password, unencrypted=unencrypted)
    key_path, pub_path, fp = import_key_pair(source, output_dir, source_password, password)
    return KeyPairFiles(key_path, pub_path, fp, password is not None, source)


# ---------------------------------------------------------------------------------------------
# sign / attest


class SignedDocument(WriteResultDocument):
    """``builder sign|attest --json`` with a key: the ``reference`` as given, the ``digest`` it
    resolved to, the legacy write and, with ``--bundle``, the Sigstore bundle referrer written
    (``referrer``; None otherwise); ``platforms``: the platform manifests of an index signed with
    it (``builder sign``; empty for an image manifest and for attestations)."""

    reference: str
    digest: str
    referrer: ReferrerWriteDocument | None
    platforms: list[str]


class KeylessSignedDocument(KeylessWriteDocument):
    """``builder sign|attest --keyless --json``: the ``reference`` as given, the ``digest`` it
    resolved to and what the keyless write made."""

    reference: str
    digest: str


SignDocument = SignedDocument | KeylessSignedDocument
"""``builder sign --json`` and ``builder attest --json`` (with a key, or keyless)."""


@dataclasses.dataclass(frozen=True)
class Signed:
    """A key-pair signature or attestation written for ``target``: the ``write`` and the signer's
    fingerprint (``predicate_type`` set for an attestation); ``platforms``: the platform manifests
    of an index signed with it."""

    target: Target
    signer: str
    write: WriteResult
    predicate_type: str | None = None
    referrer: ReferrerWrite | None = None
    platforms: tuple[str, ...] = ()

    def to_json(self) -> SignedDocument:
        return {
            "reference": self.target.text,
            "digest": self.target.digest,
            **self.write.to_json(),
            "referrer": self.referrer.to_json() if self.referrer else None,
            "platforms": list(self.platforms),
        }


@dataclasses.dataclass(frozen=True)
class KeylessSigned:
    """A keyless signature or attestation written for ``target`` (``predicate_type`` None: a signature)."""

    target: Target
    write: KeylessWrite
    predicate_type: str | None = None

    def to_json(self) -> KeylessSignedDocument:
        return {"reference": self.target.text, "digest": self.target.digest, **self.write.to_json()}


_PREDICATE_HINT = "--predicate names a file holding the predicate alone: one JSON object"
_JSON_KINDS: dict[type, str] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true/false",
    type(None): "null",
}


def load_predicate(path: Path) -> dict[str, Any]:
    """The predicate in ``path``: a JSON object. Raises ConfigError (2) when the file is not
    readable JSON, not an object, or a whole in-toto statement (``_type`` one of the statement
    types: the statement is what builder writes around the predicate, as ``cosign attest
    --predicate`` expects; https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md)."""
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--predicate {path}: not readable JSON ({exc})", hint=_PREDICATE_HINT) from exc
    if not isinstance(body, dict):
        raise ConfigError(
            f"--predicate {path}: the predicate must be a JSON object, not {_JSON_KINDS.get(type(body), 'that')}",
            hint=_PREDICATE_HINT,
        )
    if body.get("_type") in STATEMENT_TYPES:
        raise ConfigError(
            f"--predicate {path} is a whole in-toto statement (_type {body['_type']})",
            hint="pass only its `predicate` object; builder writes the statement (subject = the image digest) "
            "around it",
        )
    return body


@dataclasses.dataclass(frozen=True)
class Place:
    """Where evidence is written: ``registries`` (host -> client with the invocation's
    credentials), the ``default_registry`` of references without a host, and ``lock_dir`` (file
    locks of concurrent writers of the same ``.sig``/``.att`` tags)."""

    registries: Registries
    default_registry: str
    lock_dir: Path

    def target(self, reference: str) -> Target:
        """:func:`resolve_target` of ``reference`` here."""
        return resolve_target(reference, default_registry=self.default_registry, registries=self.registries)


def sign_reference(reference: str, signer: Signer, place: Place, *, bundle: bool = False) -> Signed:
    """``builder sign REF``: a cosign signature of the digest ``reference`` names
    (``builder.signing.sign``: an index and each platform manifest) and, with ``bundle``, cosign 3's
    image signature too: a Sigstore bundle referrer holding an in-toto statement of type
    ``https://sigstore.dev/cosign/sign/v1`` (``builder.signing.bundles.attest_bundle``). Raises
    NotFoundError (8) for a missing image, SigningError, registry errors."""
    target = place.target(reference)
    client, repo, digest = target.client, target.repository, target.digest
    manifest = client.get_manifest(repo, digest)
    platforms = tuple(d.digest for d in runnable_platforms(manifest)) if manifest.is_index else ()
    write = sign_image(client, repo, digest, signer, lock_dir=place.lock_dir, manifest=manifest)
    referrer = (
        attest_bundle(client, repo, digest, COSIGN_SIGN_V1, {}, signer, lock_dir=place.lock_dir) if bundle else None
    )
    return Signed(target, signer.fingerprint, write, referrer=referrer, platforms=platforms)


def check_predicate_type(predicate_type: str, option: str = "--predicate-type") -> None:
    """An in-toto ``predicateType`` is a TypeURI
    (https://github.com/in-toto/attestation/blob/main/spec/v1/predicate.md): ``scheme:rest``, no
    spaces. Raises ConfigError (2) naming ``option`` otherwise, e.g. for cosign's ``--type`` short
    names (``slsaprovenance``), which cosign expands and builder does not."""
    scheme, sep, rest = predicate_type.partition(":")
    scheme_ok = scheme[:1].isalpha() and all(c.isalnum() or c in "+.-" for c in scheme)  # RFC 3986 3.1
    if sep and rest and scheme_ok and not any(c.isspace() for c in predicate_type):
        return
    raise ConfigError(
        f"{option} {predicate_type!r} is not a URI (in-toto predicate types are TypeURIs)",
        hint="write the full type, e.g. https://slsa.dev/provenance/v1 or https://cyclonedx.org/bom "
        "(cosign's short names such as slsaprovenance are not expanded)",
    )


def attest_reference(
    reference: str, predicate_type: str, predicate_file: Path, signer: Signer, place: Place, *, bundle: bool = False
) -> Signed:
    """``builder attest REF``: a signed in-toto attestation of the digest ``reference`` names with
    the predicate in ``predicate_file`` (:func:`load_predicate`; ``builder.signing.attest``), in the
    legacy ``.att`` tag and, with ``bundle``, the same statement as a Sigstore bundle referrer
    (``builder.signing.bundles.attest_both``: cosign 3's format). Raises ConfigError (2) for an
    unusable predicate file or a predicate type that is not a URI (:func:`check_predicate_type`),
    then as :func:`sign_reference`."""
    check_predicate_type(predicate_type)
    predicate = load_predicate(predicate_file)
    target = place.target(reference)
    client, repo, digest = target.client, target.repository, target.digest
    write, referrer = attest_both(
        client, repo, digest, predicate_type, predicate, signer, lock_dir=place.lock_dir, bundle=bundle
    )
    return Signed(target, signer.fingerprint, write, predicate_type, referrer)


def keyless_write_reference(
    reference: str,
    setup: KeylessSetup,
    place: Place,
    *,
    predicate_type: str | None = None,
    predicate_file: Path | None = None,
) -> KeylessSigned:
    """``sign --keyless`` (``predicate_type`` None) or ``attest --keyless`` (the predicate in
    ``predicate_file``): legacy layers and a Sigstore bundle referrer for the digest ``reference``
    names, with ``setup``'s identity token and trust config (``builder.signing.keyless.write``).
    Raises ConfigError (predicate type or file), SigningError, registry errors."""
    if predicate_type is not None:
        check_predicate_type(predicate_type)
    predicate = load_predicate(predicate_file) if predicate_file is not None else {}
    target = place.target(reference)
    token, trust_config, lock_dir = setup.identity_token, setup.trust_config, place.lock_dir
    client, repo, digest = target.client, target.repository, target.digest
    if predicate_type is None:
        write = keyless_sign_image(
            client, repo, digest, identity_token=token, trust_config=trust_config, lock_dir=lock_dir
        )
    else:
        write = keyless_attest_image(
            client,
            repo,
            digest,
            predicate_type=predicate_type,
            predicate=predicate,
            identity_token=token,
            trust_config=trust_config,
            lock_dir=lock_dir,
        )
    return KeylessSigned(target, write, predicate_type)


# ---------------------------------------------------------------------------------------------
# verify


@dataclasses.dataclass(frozen=True)
class VerifyRequest:
    """What ``builder verify`` was asked: trusted ``key_files``; required ``predicate_types``;
    ``attestations_only`` (no signature required); keyless ``identities`` / ``identity_regexps``
    with ``issuer`` / ``issuer_regexp``; ``trust_config`` (pinned trusted root or client trust
    config; None: the public-good root, offline copy)."""

    key_files: tuple[Path, ...] = ()
    predicate_types: tuple[str, ...] = ()
    attestations_only: bool = False
    identities: tuple[str, ...] = ()
    identity_regexps: tuple[str, ...] = ()
    issuer: str | None = None
    issuer_regexp: str | None = None
    trust_config: Path | None = None

    @property
    def keyless(self) -> bool:
        return bool(self.identities or self.identity_regexps)

    def check(self) -> None:
        """Raise ConfigError (2) for a request that cannot be verified: no key and no identity;
        ``attestations_only`` without a predicate type; a predicate type that is not a URI."""
        if not self.key_files and not self.keyless:
            raise ConfigError(
                "verify needs at least one --key PUBLIC_KEY or --identity/--identity-regexp with --issuer",
                hint="pass the builder.pub / cosign.pub file, or the keyless signer's identity and issuer",
            )
        if self.attestations_only and not self.predicate_types:
            raise ConfigError(
                "--attestations-only needs at least one --attestation TYPE",
                hint="name the attestation to require instead of a signature, e.g. "
                "--attestation https://slsa.dev/provenance/v1",
            )
        for ptype in self.predicate_types:
            check_predicate_type(ptype, "--attestation")


@dataclasses.dataclass(frozen=True)
class Verified:
    """The outcome of ``builder verify``: the ``target``, the ``report`` and ``key_names``
    (fingerprint -> key file as given, for display)."""

    target: Target
    report: VerificationReport
    key_names: Mapping[str, str]

    @property
    def header(self) -> str:
        ref = self.target.reference
        return f"{ref.name}:{ref.tag}" if ref.tag else ref.name


def verify_reference(text: str, request: VerifyRequest, *, default_registry: str, registries: Registries) -> Verified:
    """``builder verify REF``: every signature and attestation of the digest ``text`` names, with
    keys (``builder.signing.verify``) or keyless identities (``builder.signing.keyless.verify``).
    Raises ConfigError (usage, unreadable trust root, bad patterns), SigningKeyError (key files)
    and registry errors; a failed verification is in the report, not raised."""
    request.check()
    keys = load_public_keys(list(request.key_files))
    target = resolve_target(text, default_registry=default_registry, registries=registries, head_digest=False)
    require_signature = not request.attestations_only
    if request.keyless:
        report = verify_keyless(
            target.client,
            target.repository,
            target.digest,
            trusted_root=load_trusted_root(request.trust_config),
            identities=policies_from_options(
                request.identities, request.identity_regexps, request.issuer, request.issuer_regexp
            ),
            keys=keys,
            predicate_types=request.predicate_types,
            require_signature=require_signature,
            tag=target.pinned_tag,
            reference=text,
        )
    else:
        report = verify_image(
            target.client,
            target.repository,
            target.digest,
            keys=keys,
            predicate_types=request.predicate_types,
            require_signature=require_signature,
            tag=target.pinned_tag,
            reference=text,
        )
    return Verified(target, report, {k.fingerprint: k.source for k in keys})
