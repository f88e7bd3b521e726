"""Pure parts of the registry client: references, challenges, Docker config credentials, indexes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from builder.errors import ConfigError, RegistryAuthError
from builder.registry import (
    OCI_INDEX,
    Descriptor,
    DockerCredentials,
    Manifest,
    Reference,
    _next_link,
    canonical_json,
    fallback_tag,
    parse_reference,
    parse_www_authenticate,
    platform_names,
    runnable_platforms,
    sha256_digest,
)

D = "sha256:" + "ab" * 32
REG = "127.0.0.1:5000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ml/jax:tag1", Reference(REG, "ml/jax", "tag1", None)),
        ("jax", Reference(REG, "jax", None, None)),
        (f"ghcr.io/org/img@{D}", Reference("ghcr.io", "org/img", None, D)),
        (f"ml/jax:t@{D}", Reference(REG, "ml/jax", "t", D)),
        ("localhost:5001/a/b:c", Reference("localhost:5001", "a/b", "c", None)),
        ("localhost/a", Reference("localhost", "a", None, None)),
        ("docker.io/ubuntu:24.04", Reference("docker.io", "library/ubuntu", "24.04", None)),
        (
            "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04",
            Reference(REG, "nvidia/cuda", "12.8.1-cudnn-runtime-ubuntu24.04"),
        ),
        ("[::1]:5000/x:y", Reference("[::1]:5000", "x", "y", None)),
    ],
)
def test_parse_reference(text: str, expected: Reference) -> None:
    ref = parse_reference(text, REG)
    assert ref == expected
    assert parse_reference(str(ref), "other.example") == ref  # str() round-trips


@pytest.mark.parametrize(
    "text",
    ["", "UPPER/case:t", "a:b:c@sha256:12", f"x@{D[:-1]}", "x:-tag", "a//b:t", "x:" + "t" * 129],
)
def test_parse_reference_rejects(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_reference(text, REG)
    assert "invalid image reference" in err.value.message


def test_reference_ref_needs_tag_or_digest() -> None:
    assert parse_reference(f"a:t@{D}", REG).ref == D
    assert parse_reference("a:t", REG).ref == "t"
    with pytest.raises(ConfigError, match="neither a tag nor a digest"):
        _ = parse_reference("a", REG).ref


def test_fallback_tag() -> None:
    assert fallback_tag(D) == "sha256-" + "ab" * 32


def test_parse_www_authenticate_bearer_and_basic() -> None:
    scheme, params = parse_www_authenticate(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/ubuntu:pull,push",error="insufficient_scope"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull,push",
        "error": "insufficient_scope",
    }
    assert parse_www_authenticate('Basic realm="builder-test"') == ("basic", {"realm": "builder-test"})
    assert parse_www_authenticate(r'Bearer realm="a\"b"')[1]["realm"] == 'a"b'


def test_docker_config_auths(tmp_path: Path) -> None:
    auth = base64.b64encode(b"alice:pa:ss").decode()
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "auths": {
                    "https://127.0.0.1:5001/v2/": {"auth": auth},
                    "https://index.docker.io/v1/": {"username": "bob", "password": "pw"},
                    "tok.example": {"identitytoken": "refresh-me"},
                }
            }
        )
    )
    creds = DockerCredentials.from_file(tmp_path)  # a directory means <dir>/config.json
    c = creds.get("127.0.0.1:5001")
    assert c is not None and (c.username, c.password) == ("alice", "pa:ss")
    assert "pa:ss" not in repr(c)
    hub = creds.get("docker.io")
    assert hub is not None and hub.username == "bob"
    tok = creds.get("tok.example")
    assert tok is not None and tok.identity_token == "refresh-me"
    assert creds.get("127.0.0.1:5000") is None
    assert DockerCredentials.from_file(tmp_path / "missing.json").get("x") is None


def test_docker_config_bad_auth_names_file(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"auths": {"r.example": {"auth": base64.b64encode(b"nocolon").decode()}}}))
    with pytest.raises(RegistryAuthError) as err:
        DockerCredentials.from_file(p).get("r.example")
    assert str(p) in err.value.message and "docker login r.example" in err.value.hint


def test_missing_credential_helper_is_named(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"credsStore": "does-not-exist-xyz"}))
    with pytest.raises(RegistryAuthError, match="docker-credential-does-not-exist-xyz"):
        DockerCredentials.from_file(p).get("r.example")


def test_runnable_platforms_skip_attestations() -> None:
    def desc(digest: str, os_: str, arch: str, ann: dict[str, str] | None = None) -> dict[str, object]:
        d: dict[str, object] = {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": 10,
            "platform": {"os": os_, "architecture": arch},
        }
        if ann:
            d["annotations"] = ann
        return d

    a, b, c = ("sha256:" + x * 64 for x in "abc")
    raw = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                desc(a, "linux", "amd64"),
                desc(b, "linux", "arm64"),
                desc(c, "unknown", "unknown", {"vnd.docker.reference.type": "attestation-manifest"}),
            ],
        }
    )
    index = Manifest(raw=raw, media_type=OCI_INDEX, digest=sha256_digest(raw))
    assert [d.digest for d in runnable_platforms(index)] == [a, b]
    assert platform_names(index) == ("linux/amd64", "linux/arm64")


def test_descriptor_json_round_trip() -> None:
    d = Descriptor.from_json(
        {"mediaType": "m", "digest": D, "size": 3, "artifactType": "t", "annotations": {"b": "2", "a": "1"}}
    )
    assert d.to_json() == {
        "mediaType": "m",
        "digest": D,
        "size": 3,
        "artifactType": "t",
        "annotations": {"a": "1", "b": "2"},
    }
    assert not d.is_attestation


def test_next_link() -> None:
    url = "http://r/v2/x/tags/list?n=2"
    assert _next_link('</v2/x/tags/list?last=b&n=2>; rel="next"', url) == "http://r/v2/x/tags/list?last=b&n=2"
    assert _next_link(None, url) is None
