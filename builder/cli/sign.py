"""``builder keys``, ``builder sign``, ``builder attest``, ``builder verify``: cosign-format evidence.

Thin Click layer: parse, read the environment (passwords), call one function of
``builder.keys`` / ``builder.sign`` / ``builder.attest``, print with ``emit``. Docs: docs/signing.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builder.cli._common import app_context, console, emit, json_option

if TYPE_CHECKING:
    from builder.config import Config
    from builder.registry import Reference, RegistryClient


def _password(no_password: bool, *, cosign_fallback: bool = False) -> str | None:
    """The key password from BUILDER_KEY_PASSWORD (or COSIGN_PASSWORD for cosign keys); None
    means "no password" and is only allowed with --no-password when writing keys."""
    if no_password:
        return None
    cfg = app_context().config
    pw = cfg.key_password
    if pw is None and cosign_fallback:
        pw = os.environ.get("COSIGN_PASSWORD")
    return pw


def _require_password(no_password: bool) -> str | None:
    from builder.errors import SigningKeyError

    pw = _password(no_password)
    if pw is None and not no_password:
        raise SigningKeyError(
            "no key password: BUILDER_KEY_PASSWORD is not set",
            hint="export BUILDER_KEY_PASSWORD=... (the key is written encrypted), or pass --no-password "
            "for an unencrypted key (only for throwaway keys)",
        )
    return pw


def _client(cfg: Config, registry: str) -> RegistryClient:
    from builder.registry import DockerCredentials, client_for

    docker_config = Path(os.environ.get("DOCKER_CONFIG", str(Path.home() / ".docker")))
    return client_for(registry, insecure=cfg.is_insecure, auth=DockerCredentials.from_file(docker_config))


def _resolve(cfg: Config, ref_text: str) -> tuple[Reference, RegistryClient, str]:
    """Parse REF, and resolve it to the digest to sign/verify (tag -> digest; digest -> HEAD)."""
    from builder.registry import parse_reference

    ref = parse_reference(ref_text, cfg.registry)
    client = _client(cfg, ref.registry)
    digest = client.resolve(ref.repository, ref.digest or ref.ref)
    return ref, client, digest


@click.group()
def keys() -> None:
    """Generate or import an ECDSA P-256 key pair (cosign-compatible).

    \b
    The private key is written encrypted with BUILDER_KEY_PASSWORD (PKCS#8 PEM);
    the public key (builder.pub) is what `builder verify --key` and `cosign verify --key` read.
    """


@keys.command("generate")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for builder.key and builder.pub (default: <state_dir>/keys).",
)
@click.option("--no-password", is_flag=True, help="Write the private key unencrypted (throwaway keys only).")
@json_option
def generate(output_dir: Path | None, no_password: bool) -> None:
    """Write a new key pair; never overwrites existing key files."""
    from builder.keys import generate_key_pair

    cfg = app_context().config
    out = output_dir or cfg.key_path.parent
    key_path, pub_path, fp = generate_key_pair(out, _require_password(no_password))
    emit(
        {"private_key": str(key_path), "public_key": str(pub_path), "fingerprint": fp, "encrypted": not no_password},
        f"[green]wrote[/] {key_path} ({'encrypted' if not no_password else '[red]unencrypted[/]'}) and {pub_path}\n"
        f"  fingerprint {fp}",
    )


@keys.command("import")
@click.argument("source", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for builder.key and builder.pub (default: <state_dir>/keys).",
)
@click.option("--no-password", is_flag=True, help="Write the imported private key unencrypted.")
@json_option
def import_(source: Path, output_dir: Path | None, no_password: bool) -> None:
    """Import SOURCE: cosign's cosign.key (decrypted with COSIGN_PASSWORD) or a PEM EC key."""
    from builder.keys import import_key_pair

    cfg = app_context().config
    out = output_dir or cfg.key_path.parent
    source_pw = os.environ.get("COSIGN_PASSWORD", cfg.key_password)
    key_path, pub_path, fp = import_key_pair(source, out, source_pw, _require_password(no_password))
    emit(
        {"source": str(source), "private_key": str(key_path), "public_key": str(pub_path), "fingerprint": fp},
        f"[green]imported[/] {source} -> {key_path}, {pub_path}\n  fingerprint {fp}",
    )


def _signer(key: Path | None) -> Any:
    from builder.sign import load_signer

    cfg = app_context().config
    return load_signer(key or cfg.key_path, _password(False, cosign_fallback=True))


@click.command()
@click.argument("reference")
@click.option("--key", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Private key file.")
@click.option("--keyless", "keyless_", is_flag=True, help="Sign keylessly with Sigstore (OIDC -> Fulcio, Rekor).")
@click.option(
    "--oidc-token",
    envvar="BUILDER_OIDC_TOKEN",
    default=None,
    help="OIDC identity token for --keyless (default: the ambient CI token, e.g. GitHub Actions id-token).",
)
@click.option(
    "--trust-config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Sigstore client trust config JSON of a private instance for --keyless (default: public-good).",
)
@json_option
def sign(reference: str, key: Path | None, keyless_: bool, oidc_token: str | None, trust_config: Path | None) -> None:
    """Sign the digest REFERENCE resolves to (writes sha256-<hex>.sig, cosign format).

    With --keyless also a Sigstore bundle referrer (docs/keyless.md)."""
    from builder.sign import sign_image

    cfg = app_context().config
    if keyless_:
        _keyless_write(reference, oidc_token, trust_config)
        return
    signer = _signer(key)
    ref, client, digest = _resolve(cfg, reference)
    result = sign_image(client, ref.repository, digest, signer, lock_dir=cfg.state_dir / "locks")
    what = "signed" if result.appended else "already signed by this key (nothing written)"
    emit(
        {"reference": reference, "digest": digest, **result.to_json()},
        f"[green]{what}[/] {ref.name}@{digest}\n  key {signer.fingerprint}\n  {result.tag} ({result.layers} layer(s))",
    )


@click.command()
@click.argument("reference")
@click.option("--key", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Private key file.")
@click.option("--predicate-type", "predicate_type", required=True, help="Predicate type URI.")
@click.option(
    "--predicate",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    required=True,
    help="JSON file holding the predicate (an object).",
)
@click.option("--keyless", "keyless_", is_flag=True, help="Sign keylessly with Sigstore (OIDC -> Fulcio, Rekor).")
@click.option(
    "--oidc-token",
    envvar="BUILDER_OIDC_TOKEN",
    default=None,
    help="OIDC identity token for --keyless (default: the ambient CI token, e.g. GitHub Actions id-token).",
)
@click.option(
    "--trust-config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Sigstore client trust config JSON of a private instance for --keyless (default: public-good).",
)
@json_option
def attest(
    reference: str,
    key: Path | None,
    predicate_type: str,
    predicate: Path,
    keyless_: bool,
    oidc_token: str | None,
    trust_config: Path | None,
) -> None:
    """Attach a signed in-toto v1 attestation to the digest REFERENCE resolves to (sha256-<hex>.att)."""
    import json

    from builder.attest import attest_image
    from builder.errors import ConfigError

    cfg = app_context().config
    try:
        body = json.loads(predicate.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--predicate {predicate}: not readable JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ConfigError(f"--predicate {predicate}: the predicate must be a JSON object")
    if keyless_:
        _keyless_write(reference, oidc_token, trust_config, predicate_type, body)
        return
    signer = _signer(key)
    ref, client, digest = _resolve(cfg, reference)
    result = attest_image(
        client, ref.repository, digest, predicate_type, body, signer, lock_dir=cfg.state_dir / "locks"
    )
    what = "attested" if result.appended else "already attested (identical statement, nothing written)"
    emit(
        {"reference": reference, "digest": digest, **result.to_json()},
        f"[green]{what}[/] {ref.name}@{digest}\n  {predicate_type}\n  key {signer.fingerprint}\n  {result.tag}",
    )


@click.command()
@click.argument("reference")
@click.option(
    "--key",
    "key_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trusted public key (repeatable).",
)
@click.option("--attestation", "predicate_types", multiple=True, help="Require a valid attestation of this type.")
@click.option("--attestations-only", is_flag=True, help="Do not require a signature (only the --attestation types).")
@click.option("--identity", "identities", multiple=True, help="Keyless: allowed signer identity (exact; repeatable).")
@click.option(
    "--identity-regexp", "identity_regexps", multiple=True, help="Keyless: allowed identity pattern (full match)."
)
@click.option("--issuer", default=None, help="Keyless: required OIDC issuer (exact).")
@click.option("--issuer-regexp", default=None, help="Keyless: required OIDC issuer pattern (full match).")
@click.option(
    "--trust-config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Keyless: pinned trusted_root.json or client trust config (default: public-good, offline copy).",
)
@json_option
def verify(
    reference: str,
    key_files: tuple[Path, ...],
    predicate_types: tuple[str, ...],
    attestations_only: bool,
    identities: tuple[str, ...],
    identity_regexps: tuple[str, ...],
    issuer: str | None,
    issuer_regexp: str | None,
    trust_config: Path | None,
) -> None:
    """Verify the signatures and attestations of REFERENCE (tag, digest, or tag@digest).

    \b
    Checks that the digest still resolves (and that a tag given with a digest still points at it),
    then every signature and attestation found; exits 18 when nothing valid meets the
    requirements (a valid signature; each --attestation type).
    """
    from builder.errors import ConfigError
    from builder.registry import parse_reference
    from builder.sign import load_public_keys, verify_image

    cfg = app_context().config
    keyless_wanted = bool(identities or identity_regexps)
    if not key_files and not keyless_wanted:
        raise ConfigError(
            "verify needs at least one --key PUBLIC_KEY or --identity/--identity-regexp with --issuer",
            hint="pass the builder.pub / cosign.pub file, or the keyless signer's identity and issuer",
        )
    if attestations_only and not predicate_types:
        raise ConfigError("--attestations-only needs at least one --attestation TYPE")
    keys_ = load_public_keys(list(key_files))
    ref = parse_reference(reference, cfg.registry)
    client = _client(cfg, ref.registry)
    digest = ref.digest or client.resolve(ref.repository, ref.ref)
    if keyless_wanted:
        from builder import keyless

        report = keyless.verify_keyless(
            client,
            ref.repository,
            digest,
            trusted_root=keyless.load_trusted_root(trust_config),
            identities=keyless.policies_from_options(identities, identity_regexps, issuer, issuer_regexp),
            keys=keys_,
            predicate_types=predicate_types,
            require_signature=not attestations_only,
            tag=ref.tag if ref.digest else None,
            reference=reference,
        )
    else:
        report = verify_image(
            client,
            ref.repository,
            digest,
            keys=keys_,
            predicate_types=predicate_types,
            require_signature=not attestations_only,
            tag=ref.tag if ref.digest else None,
            reference=reference,
        )
    names = {k.fingerprint: Path(k.source).name for k in keys_}

    def human() -> None:
        from rich.markup import escape
        from rich.table import Table

        con = console()
        con.print(f"[bold]{ref.name}[/]" + (f":{ref.tag}" if ref.tag else ""))
        con.print(f"  digest {digest} (resolves)")
        table = Table(header_style="bold")
        for col in ("#", "result", "kind", "predicate type", "signer", "when"):
            table.add_column(col, overflow="fold")
        for n, item in enumerate(report.items, 1):
            who = "-"
            if item.signer:
                short = item.signer[:19] if item.signer.startswith("sha256:") else item.signer  # keyless: identity
                who = short + (f" {names[item.signer]}" if item.signer in names else "")
            table.add_row(
                str(n),
                "[green]ok[/]" if item.ok else "[red]FAIL[/]",
                item.kind,
                item.predicate_type or "-",
                who,
                item.time or "-",
            )
        if report.items:
            con.print(table)
            for n, item in enumerate(report.items, 1):
                if not item.ok:
                    con.print(f"  [red]#{n}[/] {escape(item.reason)}")
        else:
            con.print("  no signatures or attestations found")
        if report.ok:
            con.print(f"[bold green]VERIFIED[/]: {sum(i.ok for i in report.items)} valid item(s)")
        else:
            con.print("[bold red]NOT VERIFIED[/]")
            for p in report.problems:
                con.print(f"  - {p}", markup=False)

    if not report.ok and app_context().json_output:
        report.raise_for_failure()  # one JSON document: the error, with every item in details
    emit(report.to_json(), human)
    report.raise_for_failure()


def _keyless_write(
    reference: str,
    oidc_token: str | None,
    trust_config: Path | None,
    predicate_type: str | None = None,
    predicate: dict[str, Any] | None = None,
) -> None:
    """``sign --keyless`` / ``attest --keyless``: token (explicit or ambient), trust config, one core call."""
    from builder import keyless

    cfg = app_context().config
    token = keyless.identity_token(oidc_token) if oidc_token else keyless.ambient_identity_token()
    tc = keyless.load_trust_config(trust_config)
    ref, client, digest = _resolve(cfg, reference)
    lock_dir = cfg.state_dir / "locks"
    if predicate_type is None:
        result = keyless.keyless_sign_image(
            client, ref.repository, digest, identity_token=token, trust_config=tc, lock_dir=lock_dir
        )
        what = "signed keylessly"
    else:
        result = keyless.keyless_attest_image(
            client,
            ref.repository,
            digest,
            predicate_type=predicate_type,
            predicate=predicate or {},
            identity_token=token,
            trust_config=tc,
            lock_dir=lock_dir,
        )
        what = f"attested keylessly ({predicate_type})"
    legacy = result.legacy.tag if result.legacy else "-"
    bundle = result.referrer.manifest_digest if result.referrer else "-"
    emit(
        {"reference": reference, "digest": digest, **result.to_json()},
        f"[green]{what}[/] {ref.name}@{digest}\n  identity {result.identity} (issuer {result.issuer})\n"
        f"  legacy {legacy}\n  bundle referrer {bundle}\n  Rekor log index {', '.join(map(str, result.log_indexes))}",
    )
