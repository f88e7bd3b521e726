"""Docker credentials as Docker reads them (``auths``, ``credHelpers``, ``credsStore``, identity
tokens), with real ``docker-credential-<name>`` helper programs on PATH, and challenge parsing."""

from __future__ import annotations

import base64
import json
import logging
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from builder.errors import RegistryAuthError
from builder.registry.auth import Credential, DockerCredentials, normalize_host, parse_www_authenticate

HelperFactory = Callable[..., Path]


@pytest.fixture
def helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HelperFactory:
    """``helper(name, {server: (user, secret)})`` installs ``docker-credential-<name>`` on PATH:
    a shell script speaking the credential-helper protocol (``get``: server URL on stdin, JSON
    ``{"ServerURL","Username","Secret"}`` on stdout, or "credentials not found in native keychain"
    and exit 1). Each call appends the server it was asked for to the returned log file."""
    bindir = tmp_path / "helpers"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")

    def make(name: str, table: Mapping[str, tuple[str, str]], *, script: str | None = None) -> Path:
        log = tmp_path / f"{name}.log"
        cases = "".join(
            f'  "{server}") printf \'{{"ServerURL":"%s","Username":"{user}","Secret":"{secret}"}}\' "$server" ;;\n'
            for server, (user, secret) in table.items()
        )
        body = script or (
            '[ "$1" = get ] || { echo "unsupported: $1" >&2; exit 2; }\n'
            "read -r server\n"
            f'echo "$server" >> "{log}"\n'
            'case "$server" in\n'
            f"{cases}"
            '  *) echo "credentials not found in native keychain"; exit 1 ;;\n'
            "esac\n"
        )
        path = bindir / f"docker-credential-{name}"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        return log

    return make


def _config(tmp_path: Path, doc: Mapping[str, object]) -> Path:
    path = tmp_path / "docker-config" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


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


def test_normalize_host() -> None:
    assert normalize_host("https://127.0.0.1:5001/v2/") == "127.0.0.1:5001"
    assert normalize_host("https://index.docker.io/v1/") == "docker.io"
    assert normalize_host("registry-1.docker.io") == "docker.io"


def test_docker_config_auths(tmp_path: Path) -> None:
    _config(
        tmp_path,
        {
            "auths": {
                "https://127.0.0.1:5001/v2/": {"auth": _b64("alice:pa:ss")},
                "https://index.docker.io/v1/": {"username": "bob", "password": "pw"},
                "tok.example": {"identitytoken": "refresh-me"},
                "empty.example": {},
            }
        },
    )
    creds = DockerCredentials.from_file(tmp_path / "docker-config")  # a directory means <dir>/config.json
    c = creds.get("127.0.0.1:5001")
    assert c is not None and (c.username, c.password) == ("alice", "pa:ss")
    assert "pa:ss" not in repr(c)
    hub = creds.get("docker.io")
    assert hub is not None and (hub.username, hub.password) == ("bob", "pw")
    assert creds.get("index.docker.io") == hub
    tok = creds.get("tok.example")
    assert tok is not None and tok.identity_token == "refresh-me"
    assert creds.get("empty.example") is None  # `docker login` with a store leaves such entries
    assert creds.get("127.0.0.1:5000") is None
    assert creds.helper_for("127.0.0.1:5001") is None


def test_missing_file_has_no_credentials_and_reads_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the given path counts: the SDK's own fallback to $DOCKER_CONFIG / ~/.docker never runs."""
    elsewhere = _config(tmp_path, {"auths": {"r.example": {"auth": _b64("eve:pw")}}})
    monkeypatch.setenv("DOCKER_CONFIG", str(elsewhere.parent))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert DockerCredentials.from_file(tmp_path / "missing.json").get("r.example") is None
    assert DockerCredentials.from_file(_config(tmp_path / "empty", {})).get("r.example") is None


def test_anonymous_and_legacy_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "DOCKER_CONFIG", str(_config(tmp_path, {"auths": {"r.example": {"auth": _b64("eve:pw")}}}).parent)
    )
    assert DockerCredentials.anonymous().get("r.example") is None
    assert DockerCredentials.anonymous().source == "<anonymous>"


def test_docker_config_bad_auth_names_file(tmp_path: Path) -> None:
    p = _config(tmp_path, {"auths": {"r.example": {"auth": _b64("nocolon")}}})
    with pytest.raises(RegistryAuthError) as err:
        DockerCredentials.from_file(p).get("r.example")
    assert str(p) in err.value.message and "docker login r.example" in err.value.hint


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_unreadable_config_names_file(tmp_path: Path, text: str) -> None:
    p = tmp_path / "config.json"
    p.write_text(text)
    with pytest.raises(RegistryAuthError, match=str(p)):
        DockerCredentials.from_file(p)


def test_missing_credential_helper_is_named(tmp_path: Path, helper: HelperFactory) -> None:
    p = _config(tmp_path, {"credsStore": "does-not-exist-xyz"})
    with pytest.raises(RegistryAuthError, match="docker-credential-does-not-exist-xyz") as err:
        DockerCredentials.from_file(p).get("r.example")
    assert "not installed" in err.value.message and err.value.exit_code == 6


def test_cred_helpers_run_the_host_helper_once(
    tmp_path: Path, helper: HelperFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="builder.process")
    log = helper("buildertest", {"127.0.0.1:5001": ("helper-user", "helper-secret")})
    p = _config(
        tmp_path,
        {
            "credHelpers": {"127.0.0.1:5001": "buildertest"},
            "auths": {"127.0.0.1:5002": {"auth": _b64("file-user:pw")}},
        },
    )
    creds = DockerCredentials.from_file(p)
    assert creds.helper_for("127.0.0.1:5001") == "docker-credential-buildertest"
    assert creds.helper_for("127.0.0.1:5002") is None
    cred = creds.get("127.0.0.1:5001")
    assert cred == Credential("helper-user", "helper-secret")
    assert creds.get("127.0.0.1:5001") is cred  # cached: the helper ran once
    file_cred = creds.get("127.0.0.1:5002")
    assert file_cred is not None and file_cred.username == "file-user"
    assert log.read_text().split() == ["127.0.0.1:5001"]  # only hosts it is configured for
    assert [r.getMessage() for r in caplog.records] == ["+ docker-credential-buildertest get"]  # --debug echo


def test_creds_store_is_asked_before_auths_and_falls_back_to_them(tmp_path: Path, helper: HelperFactory) -> None:
    """As Docker: with ``credsStore`` the store answers; a host it does not know falls back to
    the ``auths`` entry; Docker Hub is asked for by its server URL."""
    log = helper(
        "store",
        {
            "127.0.0.1:5001": ("store-user", "store-secret"),
            "https://index.docker.io/v1/": ("hub-user", "hub-secret"),
        },
    )
    p = _config(
        tmp_path,
        {
            "credsStore": "store",
            "auths": {"127.0.0.1:5001": {}, "127.0.0.1:5002": {"auth": _b64("file-user:pw")}},
        },
    )
    creds = DockerCredentials.from_file(p)
    assert creds.get("127.0.0.1:5001") == Credential("store-user", "store-secret")
    hub = creds.get("index.docker.io")
    assert hub == Credential("hub-user", "hub-secret")
    fallback = creds.get("127.0.0.1:5002")
    assert fallback is not None and fallback.username == "file-user"
    assert creds.get("127.0.0.1:5003") is None
    assert log.read_text().split() == [
        "127.0.0.1:5001",
        "https://index.docker.io/v1/",
        "127.0.0.1:5002",
        "127.0.0.1:5003",
    ]


def test_helper_identity_token(tmp_path: Path, helper: HelperFactory) -> None:
    helper("tok", {"acr.example": ("<token>", "refresh-token")})
    creds = DockerCredentials.from_file(_config(tmp_path, {"credHelpers": {"acr.example": "tok"}}))
    cred = creds.get("acr.example")
    assert cred is not None and cred.identity_token == "refresh-token" and cred.password == ""


def test_failing_helper_is_named(tmp_path: Path, helper: HelperFactory) -> None:
    helper("broken", {}, script='echo "keychain locked"; exit 3\n')
    creds = DockerCredentials.from_file(_config(tmp_path, {"credHelpers": {"r.example": "broken"}}))
    with pytest.raises(RegistryAuthError) as err:
        creds.get("r.example")
    assert "docker-credential-broken" in err.value.message and "keychain locked" in err.value.message
    assert "docker login r.example" in err.value.hint


def test_helper_printing_garbage_is_named(tmp_path: Path, helper: HelperFactory) -> None:
    helper("garbage", {}, script="read -r server; echo 'not json'\n")
    creds = DockerCredentials.from_file(_config(tmp_path, {"credHelpers": {"r.example": "garbage"}}))
    with pytest.raises(RegistryAuthError, match="docker-credential-garbage get` printed no Username/Secret JSON"):
        creds.get("r.example")
