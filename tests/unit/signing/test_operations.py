"""builder.signing.operations and the key-password rule: the usage errors the CLI used to choose."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import ConfigError, SigningKeyError
from builder.signing.dsse import IN_TOTO_PAYLOAD_TYPE, pae, payload_of_pae
from builder.signing.keys import new_key_password
from builder.signing.operations import VerifyRequest, check_predicate_type, generate_keys, load_predicate


def test_verify_request_needs_a_key_or_an_identity() -> None:
    with pytest.raises(ConfigError, match="at least one --key"):
        VerifyRequest().check()
    with pytest.raises(ConfigError, match="--attestations-only needs") as err:
        VerifyRequest(key_files=(Path("k.pub"),), attestations_only=True).check()
    assert "--attestation https://" in err.value.hint and "builder.toml" not in err.value.hint
    VerifyRequest(identities=("me@example.com",), issuer="https://issuer.example").check()
    with pytest.raises(ConfigError, match="--attestation 'slsaprovenance' is not a URI"):
        VerifyRequest(key_files=(Path("k.pub"),), predicate_types=("slsaprovenance",)).check()
    assert VerifyRequest(identity_regexps=(".*",)).keyless


def test_load_predicate(tmp_path: Path) -> None:
    good, bad, array = tmp_path / "p.json", tmp_path / "bad.json", tmp_path / "a.json"
    good.write_text('{"a": 1}')
    bad.write_text("{")
    array.write_text("[]")
    assert load_predicate(good) == {"a": 1}
    with pytest.raises(ConfigError, match="not readable JSON"):
        load_predicate(bad)
    with pytest.raises(ConfigError, match="must be a JSON object, not an array") as err:
        load_predicate(array)
    assert "predicate alone" in err.value.hint
    statement = tmp_path / "statement.json"  # a whole statement where only its predicate belongs
    statement.write_text('{"_type": "https://in-toto.io/Statement/v1", "subject": [], "predicate": {}}')
    with pytest.raises(ConfigError, match="whole in-toto statement") as err:
        load_predicate(statement)
    assert "only its `predicate`" in err.value.hint


@pytest.mark.parametrize(
    "ptype", ["https://slsa.dev/provenance/v1", "https://cyclonedx.org/bom", "urn:example:test", "x-y+z.1:a"]
)
def test_predicate_type_uris_are_accepted(ptype: str) -> None:
    check_predicate_type(ptype)


@pytest.mark.parametrize("ptype", ["slsaprovenance", "", ":x", "https:", "1http://x", "https://x/a b", "ht tp://x"])
def test_predicate_type_that_is_not_a_uri_is_refused(ptype: str) -> None:
    with pytest.raises(ConfigError, match="is not a URI") as err:
        check_predicate_type(ptype)
    assert "https://slsa.dev/provenance/v1" in err.value.hint


def test_new_key_password() -> None:
    assert new_key_password(None, unencrypted=True) is None
    assert new_key_password("pw", unencrypted=True) is None
    assert new_key_password("pw", unencrypted=False) == "pw"
    with pytest.raises(SigningKeyError, match="BUILDER_KEY_PASSWORD is not set"):
        new_key_password(None, unencrypted=False)


def test_generate_keys_result(tmp_path: Path) -> None:
    pair = generate_keys(tmp_path, None, unencrypted=True)
    assert pair.to_json() == {
        "private_key": str(tmp_path / "builder.key"),
        "public_key": str(tmp_path / "builder.pub"),
        "fingerprint": pair.fingerprint,
        "encrypted": False,
    }


def test_generate_keys_needs_a_password_unless_unencrypted(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="BUILDER_KEY_PASSWORD is not set"):
        generate_keys(tmp_path, None)
    assert not (tmp_path / "builder.key").exists()
    assert generate_keys(tmp_path, "pw").encrypted


def test_one_pae_and_its_inverse() -> None:
    body = b'{"_type":"x"}'
    encoded = pae(IN_TOTO_PAYLOAD_TYPE, body)
    assert encoded == b"DSSEv1 28 application/vnd.in-toto+json 13 " + body
    assert payload_of_pae(encoded) == body
    assert payload_of_pae(b"not pae") is None
