"""Keys, key sets and keyless identities a policy trusts, and how signers are shown."""

from __future__ import annotations

from builder.policy import KeyRef, KeySet
from builder.policy.signers import key_problems, signer_text
from builder.signing.fingerprints import short_fingerprint

GHA = "https://token.actions.githubusercontent.com"
FP = "sha256:" + "c" * 64


def test_key_and_identity_matching() -> None:
    key = KeyRef(fingerprint=FP, file="k.pub")
    assert key.matches(FP, None) and not key.matches("sha256:" + "d" * 64, None)
    ident = KeyRef(issuer=GHA, subject=r"https://github\.com/acme/.+")
    assert ident.matches(None, (GHA, "https://github.com/acme/images"))
    assert not ident.matches(None, ("https://accounts.google.com", "https://github.com/acme/images"))
    assert not ident.matches(None, (GHA, "xhttps://github.com/acme/images"))  # full match only
    assert not KeyRef(file="gone.pub", problem="file not found").matches(FP, None)


def test_key_set_problems_and_texts() -> None:
    broken = KeySet("runners", (KeyRef(file="r.pub", problem="r.pub: file not found"), KeyRef(fingerprint=FP)))
    assert broken.match(FP, None)
    # the set still has a usable key: its unusable entry is no reason for a denial (a reason naming
    # it contradicted the next rule's "signed by runners")
    assert key_problems([broken]) == ""
    unusable = KeySet("runners", (KeyRef(file="r.pub", problem="r.pub: file not found"),))
    assert key_problems([unusable]) == "; key set `runners`: r.pub: file not found"
    assert key_problems([KeySet("ok", (KeyRef(fingerprint=FP),))]) == ""
    assert signer_text(FP, None) == short_fingerprint(FP) == "SHA256:" + FP[7:19] + "…"
    assert signer_text(None, (GHA, "repo:acme/images")) == f"repo:acme/images ({GHA})"
    assert signer_text(None, None) == "unknown signer"


def test_keyless_signer_text_parses() -> None:
    """``builder.promote`` turns a verified keyless signer back into the ``(issuer, subject)`` the
    policy matches."""
    from builder.promote import keyless_identity

    assert keyless_identity("sha256:" + "a" * 64) is None
    assert keyless_identity("ci@example.com (issuer https://issuer.example)") == (
        "https://issuer.example",
        "ci@example.com",
    )
