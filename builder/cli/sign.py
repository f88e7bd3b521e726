"""``builder keys``, ``builder sign``, ``builder attest``, ``builder verify``: cosign-format evidence.

Thin Click layer: options, the environment (passwords), one call into ``builder.signing.operations``,
``emit``. Docs: docs/signing.md, docs/keyless.md.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from builder.cli._common import (
    ExistingFile,
    PathParam,
    app_context,
    bundle_option,
    console,
    docker_config_option,
    emit,
    json_option,
    key_option,
    keyless_options,
)
from builder.errors import SigningKeyError
from builder.predicates import display_name
from builder.signing.fingerprints import short_fingerprint
from builder.signing.report import check_result, signer_label, unnamed_signers

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from rich.console import Console

    from builder.cli.tables import Column
    from builder.signing.operations import KeylessSigned, Place
    from builder.signing.report import VerificationReport, VerifiedItem


def _place() -> Place:
    """Where this invocation writes evidence: its registry clients, default registry and locks."""
    from builder.signing.operations import Place

    app = app_context().app
    return Place(app.client, app.config.registry, app.config.state_dir / "locks")


@click.group()
def keys() -> None:
    """Generate or import an ECDSA P-256 key pair (cosign-compatible).

    The private key is written encrypted with BUILDER_KEY_PASSWORD (PKCS#8 PEM);
    the public key (builder.pub) is what `builder verify --key` and `cosign verify --key` read.
    """


@keys.command("generate")
@click.option(
    "--output-dir",
    type=PathParam(file_okay=False),
    default=None,
    help="Directory for builder.key and builder.pub (default: <state_dir>/keys).",
)
@click.option("--no-password", is_flag=True, help="Write the private key unencrypted (throwaway keys only).")
@json_option
def generate(output_dir: Path | None, no_password: bool) -> None:
    """Write a new key pair; never overwrites existing key files."""
    from builder.signing.operations import generate_keys

    cfg = app_context().config
    pair = generate_keys(output_dir or cfg.key_path.parent, cfg.key_password, unencrypted=no_password)
    emit(
        pair.to_json(),
        f"[green]wrote[/] {pair.private_key} ({'encrypted' if pair.encrypted else '[red]unencrypted[/]'}) and "
        f"{pair.public_key}\n  fingerprint {pair.fingerprint}",
    )


@keys.command("import")
@click.argument("source", type=ExistingFile())
@click.option(
    "--output-dir",
    type=PathParam(file_okay=False),
    default=None,
    help="Directory for builder.key and builder.pub (default: <state_dir>/keys).",
)
@click.option("--no-password", is_flag=True, help="Write the imported private key unencrypted.")
@json_option
def import_(source: Path, output_dir: Path | None, no_password: bool) -> None:
    """Import SOURCE: cosign's cosign.key (decrypted with COSIGN_PASSWORD) or a PEM EC key."""
    from builder.signing.operations import import_keys

    app = app_context().app
    out = output_dir or app.config.key_path.parent
    pair = import_keys(source, out, app.cosign_key_password, app.config.key_password, unencrypted=no_password)
    emit(
        pair.to_json(),
        f"[green]imported[/] {source} -> {pair.private_key}, {pair.public_key}\n  fingerprint {pair.fingerprint}",
    )


@keys.command("export")
@key_option
@click.option(
    "--output-dir",
    type=PathParam(file_okay=False),
    required=True,
    help="Directory for cosign.key and cosign.pub (never overwritten).",
)
@json_option
def export(key: Path | None, output_dir: Path) -> None:
    """Write the signing key as cosign's cosign.key (+ cosign.pub) so cosign signs with it.

    The key (default: builder.toml `key`) is decrypted with BUILDER_KEY_PASSWORD; cosign.key is
    encrypted with COSIGN_PASSWORD, which `cosign sign --key cosign.key` reads too.

    \b
    Example:
      COSIGN_PASSWORD=... builder keys export --output-dir out
      COSIGN_PASSWORD=... cosign sign --key out/cosign.key --tlog-upload=false REF
    """
    from builder.signing.operations import export_keys

    app = app_context().app
    source = key or app.config.key_path
    pair = export_keys(source, output_dir, app.key_password, app.environ.get("COSIGN_PASSWORD"))
    emit(
        pair.to_json(),
        f"[green]exported[/] {source}\n  -> {pair.private_key} (cosign format)\n  -> {pair.public_key}\n"
        f"  fingerprint:\n  {pair.fingerprint}",
    )


@click.command()
@click.argument("reference")
@key_option
@bundle_option("the image signature", ".sig tag is")
@keyless_options
@docker_config_option
@json_option
def sign(
    reference: str, key: Path | None, bundle: bool, keyless_: bool, oidc_token: str | None, trust_config: Path | None
) -> None:
    """Sign the digest REFERENCE (an image reference, or a variant id: its moving tag, if this
    checkout built that digest) resolves to (writes sha256-<hex>.sig, cosign format).

    An index is signed together with each of its platform manifests (podman and
    CRI-O verify the one they pull). With --bundle (key pair) or --keyless also a
    Sigstore bundle referrer (docs/signing.md, docs/keyless.md)."""
    from builder.signing.keyless.trust import key_or_keyless, keyless_setup
    from builder.signing.operations import keyless_write_reference, sign_reference

    key_or_keyless(key, keyless_)
    reference = app_context().app.signable_reference(reference)
    if keyless_:
        _emit_keyless(keyless_write_reference(reference, keyless_setup(oidc_token, trust_config), _place()))
        return
    result = sign_reference(reference, app_context().app.signer(key), _place(), bundle=bundle)
    write = result.write
    what = "signed" if write.appended else "already signed by this key (nothing written)"
    ref, platforms = result.referrer, result.platforms
    emit(
        result.to_json(),
        f"[green]{what}[/] {result.target.name}@{result.target.digest}\n  key {short_fingerprint(result.signer)}\n"
        f"  {write.tag} ({write.layers} layer(s))"
        + (f"\n  and its {len(result.platforms)} platform manifest(s), each in its own .sig" if platforms else "")
        + (f"\n  Sigstore bundle referrer:\n  {ref.manifest_digest}" if ref else ""),
    )


@click.command()
@click.argument("reference")
@key_option
@click.option(
    "--predicate-type",
    "predicate_type",
    required=True,
    metavar="URI",
    help="Predicate type URI (in-toto TypeURI), e.g. https://slsa.dev/provenance/v1.",
)
@click.option(
    "--predicate",
    type=ExistingFile(),
    required=True,
    help="JSON file holding the predicate (an object).",
)
@bundle_option("the attestation", ".att tag is")
@keyless_options
@docker_config_option
@json_option
def attest(
    reference: str,
    key: Path | None,
    predicate_type: str,
    predicate: Path,
    bundle: bool,
    keyless_: bool,
    oidc_token: str | None,
    trust_config: Path | None,
) -> None:
    """Attach a signed in-toto v1 attestation to the digest REFERENCE (or a variant id's moving tag,
    if this checkout built that digest) resolves to.

    Writes the legacy sha256-<hex>.att tag (cosign 2, Kyverno, policy-controller) and, with
    --bundle, the same statement as a Sigstore bundle referrer (cosign 3). Keyless writes both."""
    from builder.signing.keyless.trust import key_or_keyless, keyless_setup
    from builder.signing.operations import attest_reference, keyless_write_reference

    key_or_keyless(key, keyless_)
    reference = app_context().app.signable_reference(reference)
    if keyless_:
        setup = keyless_setup(oidc_token, trust_config)
        _emit_keyless(
            keyless_write_reference(reference, setup, _place(), predicate_type=predicate_type, predicate_file=predicate)
        )
        return
    signer = app_context().app.signer(key)
    result = attest_reference(reference, predicate_type, predicate, signer, _place(), bundle=bundle)
    what = "attested" if result.write.appended else "already attested (identical statement, nothing written)"
    ref = result.referrer
    emit(
        result.to_json(),
        f"[green]{what}[/] {result.target.name}@{result.target.digest}\n  {predicate_type}\n"
        f"  key {short_fingerprint(result.signer)}\n  {result.write.tag}"
        + (f"\n  Sigstore bundle referrer:\n  {ref.manifest_digest}" if ref else ""),
    )


@click.command()
@click.argument("reference")
@click.option(
    "--key",
    "key_files",
    multiple=True,
    type=PathParam(dir_okay=False, error=SigningKeyError),
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
    type=ExistingFile(),
    default=None,
    help="Keyless: pinned trusted_root.json or client trust config (default: public-good, offline copy).",
)
@docker_config_option
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
    """Verify the signatures and attestations of REFERENCE (tag, digest, tag@digest, or a variant
    id: its moving tag <registry>/<repository>:<variant-id>).

    Checks that the digest still resolves (and that a tag given with a digest still points at it),
    then every signature and attestation found (legacy .sig/.att tags and Sigstore bundle
    referrers); exits 18 when nothing valid meets the requirements (a valid signature; each
    --attestation type). Signatures by keys or identities not given are listed as untrusted;
    keyless ones need --identity and --issuer.

    \b
    Examples:
      builder verify REGISTRY/REPO:TAG --key keys/builder.pub
      builder verify REGISTRY/REPO@sha256:... --key keys/builder.pub \\
          --attestation https://slsa.dev/provenance/v1
      builder verify REGISTRY/REPO@sha256:... --issuer \\
          https://token.actions.githubusercontent.com --identity-regexp \\
          'https://github.com/ORG/REPO/.*'
    """
    from builder.signing.operations import VerifyRequest, verify_reference

    app = app_context().app
    request = VerifyRequest(
        key_files, predicate_types, attestations_only, identities, identity_regexps, issuer, issuer_regexp, trust_config
    )
    target = app.image_reference(reference)
    result = verify_reference(target, request, default_registry=app.config.registry, registries=app.client)
    report = result.report

    def human() -> None:
        render_verification(console().rich, report, result.key_names, header=result.header, name=result.target.name)

    if not report.ok and app_context().json_output:
        report.raise_for_failure()  # one JSON document: the error, with every item in details
    emit(report.to_json(), human)
    report.raise_for_failure()


def _emit_keyless(result: KeylessSigned) -> None:
    """``sign --keyless`` / ``attest --keyless`` output."""
    write = result.write
    pt = result.predicate_type
    what = "signed keylessly" if pt is None else f"attested keylessly ({pt})"
    legacy = write.legacy.tag if write.legacy else "-"
    bundle = write.referrer.manifest_digest if write.referrer else "-"
    emit(
        result.to_json(),
        f"[green]{what}[/] {result.target.name}@{result.target.digest}\n"
        f"  identity {write.identity} (issuer {write.issuer})\n"
        f"  legacy {legacy}\n  bundle referrer {bundle}\n  Rekor log index {', '.join(map(str, write.log_indexes))}",
    )


# ---------------------------------------------------------------------------------------------
# `builder verify` human output (pure: a report in, text on a rich Console out; the labels are
# builder.signing.report's)


def _what(item: VerifiedItem) -> str:
    """The predicate column: the short type; for a device check also its result (red unless passed)
    and where it ran when the predicate's ``placement`` names a cluster or node
    (``device-check: passed on gpu-a100/node-7``; builder.checks.runners.Placement)."""
    from rich.markup import escape

    from builder.predicates import DEVICE_CHECK_V1

    if item.kind != "attestation":
        return "-"
    label = escape(display_name(item.predicate_type))
    if item.predicate_type == DEVICE_CHECK_V1 and item.ok:
        result = check_result(item.predicate)
        colour = "green" if result == "passed" else "bold red"
        shown = str(result) if result == "passed" else str(result).upper()
        placement = (item.predicate or {}).get("placement")
        where = (
            [str(placement[k]) for k in ("cluster", "node") if placement.get(k)] if isinstance(placement, dict) else []
        )
        on = f" on {escape('/'.join(where))}" if where else ""
        return f"{label}: [{colour}]{escape(shown)}[/]{on}"
    return label


def _summary_name(item: VerifiedItem, names: Mapping[str, str]) -> str:
    """Short signer text for the summary line: the key file name relative to the common folder."""
    if item.signer and item.signer in names and names[item.signer]:
        return names[item.signer]
    return short_fingerprint(item.signer) if item.signer else "?"


def render_verification(
    con: Console, report: VerificationReport, names: Mapping[str, str], *, header: str, name: str
) -> None:
    """Print a verification report for a release engineer: the reference and digest, one table row
    per item (status ``ok`` / ``untrusted`` / ``INVALID``, kind (``(bundle)`` for a Sigstore bundle
    referrer), predicate (device checks with their
    result), signer as ``KEYFILE (fingerprint)``, time), the reasons of invalid items, and one summary
    line: ``VERIFIED NAME@DIGEST: signature by ...; attestations: ...; also present: ...`` or
    ``NOT VERIFIED`` with the unmet requirements and who did sign. ``names``: fingerprint -> key file
    as given on the command line."""
    from rich.markup import escape

    con.print(f"[bold]{escape(header)}[/]")
    gone = any(p.startswith("digest ") and "no longer resolves" in p for p in report.problems)
    resolves = "does not resolve" if gone else "resolves"
    con.print(f"  digest {report.digest} ({resolves})")
    _render_items(con, report.items, names)
    if report.ok:
        _render_verified(con, report, names, name)
    else:
        _render_not_verified(con, report, names, name)


def verification_columns() -> list[Column]:
    """The columns of `builder verify`'s table, in order (the signer and when are never split)."""
    from builder.cli.tables import Column

    return [
        Column("#", whole=True),
        Column("status"),
        Column("kind", 1, words=True),
        Column("predicate", words=True),
        Column("signer", whole=True),
        Column("when", 2, whole=True),
    ]


def _render_items(con: Console, items: Sequence[VerifiedItem], names: Mapping[str, str]) -> None:
    """The table of items (one row each) and the reasons of the invalid ones."""
    from rich.markup import escape

    from builder.cli.tables import fitted_table, to_seconds

    if not items:
        con.print("  no signatures or attestations found")
        return
    columns = verification_columns()
    rows: list[list[str]] = []
    style = {"ok": "[green]ok[/]", "untrusted": "[yellow]untrusted[/]", "invalid": "[bold red]INVALID[/]"}
    for n, item in enumerate(items, 1):
        who = escape(signer_label(item.signer, names))
        if item.untrusted:
            if item.signer and item.signer.startswith("sha256:"):  # the layer's unsigned signer annotation
                who = f"claims {who} [dim](unverified; not given)[/]"
            elif item.signer:
                who += " [dim](not given)[/]"
            elif item.keyless:
                who = "keyless certificate [dim](give --identity/--issuer)[/]"
            else:
                who = "key not named in the layer [dim](not given)[/]"
        kind = f"{item.kind} (bundle)" if item.is_bundle else item.kind
        kind = "signature (promotion)" if item.is_promotion else kind  # written by a promotion into here
        when = escape(to_seconds(item.time) if item.time else "-")
        rows.append([str(n), style[item.classification], kind, _what(item), who, when])
    legend = _signer_legend(columns, rows, con.width)
    if legend:  # a letter under "by" (4 cells narrower than "signer": room for whole predicate names)
        columns = [dataclasses.replace(c, header="by") if c.header == "signer" else c for c in columns]
    con.print(fitted_table(columns, rows, con.width))
    for label, who in legend:
        con.print(f"  signer {label}: {who}", soft_wrap=True)
    for n, item in enumerate(items, 1):
        if item.classification == "invalid":
            con.print(f"  [red]#{n} invalid:[/] {escape(item.reason)}")


def _signer_legend(columns: Sequence[Column], rows: list[list[str]], width: int) -> list[tuple[str, str]]:
    """When the table would not fit ``width`` with each signer written out (a key file's path with its
    fingerprint, a keyless identity: a whole value of 40-100 cells, which moved under the narrow ``#``
    column and collapsed the table into it), each distinct signer becomes a letter in its cell
    (``rows`` changed in place) and ``(letter, signer)`` pairs are returned for lines under the table."""
    from builder.cli.tables import overhead, plain_width

    col = next(i for i, c in enumerate(columns) if c.header == "signer")
    natural = [max([plain_width(c.header)] + [plain_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    if sum(natural) + overhead(len(columns), boxed=True) <= width:
        return []
    letters: dict[str, str] = {}
    for r in rows:
        letters.setdefault(r[col], chr(ord("A") + len(letters)) if len(letters) < 26 else str(len(letters) + 1))
        r[col] = letters[r[col]]
    return [(label, who) for who, label in letters.items()]


def _also_present(report: VerificationReport) -> list[str]:
    """The items that did not count: by signers not given (with their claimed keys), invalid ones."""
    items = report.items
    untrusted = [i for i in items if i.untrusted]
    invalid = [n for n, i in enumerate(items, 1) if i.classification == "invalid"]
    others = [short_fingerprint(s) for s in report.other_signers]
    others.extend(unnamed_signers(untrusted))
    also: list[str] = []
    if untrusted:
        keyless = any(i.keyless for i in untrusted) or any(not s.startswith("sha256:") for s in report.other_signers)
        kinds = "keys or identities" if keyless else "keys"
        also.append(f"{len(untrusted)} item(s) by {kinds} you did not pass (claimed: {', '.join(others)})")
    if invalid:
        also.append(f"{len(invalid)} invalid item(s) not needed ({', '.join(f'#{n}' for n in invalid)})")
    return also


def _render_verified(con: Console, report: VerificationReport, names: Mapping[str, str], name: str) -> None:
    """``VERIFIED NAME@DIGEST: signature by ...``, the attestations, what else is present, and a
    note on validly signed device checks that did not pass."""
    from rich.markup import escape

    from builder.predicates import DEVICE_CHECK_V1

    ok_sigs = [i for i in report.items if i.ok and i.kind == "signature" and not i.is_promotion]
    promoted = [i for i in report.items if i.is_promotion]
    ok_atts = [i for i in report.items if i.ok and i.kind == "attestation"]
    also = _also_present(report)
    sig_by = sorted({_summary_name(i, names) for i in ok_sigs})
    promoted_by = sorted({_summary_name(i, names) for i in promoted})
    said = [f"signature by {', '.join(sig_by)}"] if sig_by else []
    if promoted_by:  # written by a promotion into this repository: "promoted here", never "built by"
        said.append(f"promotion signature by {', '.join(promoted_by)}" + ("" if sig_by else " (no image signature)"))
    con.print(
        f"[bold green]VERIFIED[/] {escape(name)}@{report.digest}: "
        + (escape("; ".join(said)) if said else "no signature required")
    )
    if ok_atts:
        atts: list[str] = []
        for i in ok_atts:
            text = escape(display_name(i.predicate_type))
            if i.predicate_type == DEVICE_CHECK_V1:
                result = check_result(i.predicate)
                text += " passed" if result == "passed" else f" [bold red]{escape(str(result).upper())}[/]"
            atts.append(f"{text} ({escape(_summary_name(i, names))})")
        con.print("  attestations: " + ", ".join(dict.fromkeys(atts)))
    if also:
        con.print("  also present: " + escape("; ".join(also)))
    failed = [i for i in ok_atts if i.predicate_type == DEVICE_CHECK_V1 and check_result(i.predicate) != "passed"]
    if failed:
        con.print(
            f"  [bold red]note:[/] {len(failed)} validly signed device check(s) record a result other than "
            "passed: the signature proves who ran the check, not that it passed"
        )


def _render_not_verified(con: Console, report: VerificationReport, names: Mapping[str, str], name: str) -> None:
    """``NOT VERIFIED NAME@DIGEST``, the unmet requirements, the diagnosis, the keys given, who did
    sign validly and what else is present."""
    from rich.markup import escape

    con.print(f"[bold red]NOT VERIFIED[/] {escape(name)}@{report.digest}")
    for p in report.problems:
        con.print(f"  - {escape(p)}")
    verdict = {
        "wrong-key": "signed, but only by keys or identities you did not pass: wrong key given?",
        "not-signed": "not signed at all: no signature or attestation exists for this digest",
        "tampered": "tampered or broken item(s) present: do not use this digest",
        "reference": "the reference itself did not check out",
        "missing": "a required item is missing",
    }[report.diagnosis]
    con.print(f"  [bold]{escape(verdict)}[/]")
    if names:
        given = ", ".join(signer_label(fp, names) for fp in names)
        con.print(f"  you passed: {escape(given)}")
    valid = sorted({_summary_name(i, names) for i in report.items if i.ok})  # signatures and attestations
    if valid:
        con.print(f"  valid items by: {escape(', '.join(valid))}")
    also = _also_present(report)
    if also:
        con.print("  present: " + escape("; ".join(also)))
