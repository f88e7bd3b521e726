"""builder.app: the composition root resolves credentials once, Docker's way, and every client
of an invocation carries them."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import TYPE_CHECKING

import pytest

from builder.app import App, docker_config_path
from builder.config import Config
from builder.errors import NotFoundError
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


def test_docker_config_lookup_order(tmp_path: Path) -> None:
    option, env_dir = tmp_path / "opt", tmp_path / "env"
    option.mkdir()
    env_dir.mkdir()
    assert docker_config_path(option, {"DOCKER_CONFIG": str(env_dir)}, tmp_path) == option
    assert docker_config_path(None, {"DOCKER_CONFIG": str(env_dir)}, tmp_path) == env_dir
    assert docker_config_path(None, {"DOCKER_CONFIG": ""}, tmp_path) == tmp_path / ".docker"
    assert docker_config_path(None, {}, tmp_path) == tmp_path / ".docker"


@pytest.mark.parametrize("given", ["--docker-config", "DOCKER_CONFIG"])
def test_a_named_docker_config_that_does_not_exist_is_refused_naming_it(tmp_path: Path, given: str) -> None:
    """A typo in --docker-config or $DOCKER_CONFIG is exit 8 naming the path and where it was
    given, not "no credentials" and a refused login later; the default ~/.docker may be missing."""
    missing = tmp_path / "nonexist-dc"
    with pytest.raises(NotFoundError) as info:
        if given == "DOCKER_CONFIG":
            docker_config_path(None, {"DOCKER_CONFIG": str(missing)}, tmp_path)
        else:
            docker_config_path(missing, {}, tmp_path)
    assert str(missing) in info.value.message and given in info.value.message
    assert docker_config_path(None, {}, tmp_path / "no-home") == tmp_path / "no-home" / ".docker"


def test_every_client_of_an_invocation_carries_the_credentials(tmp_path: Path) -> None:
    auth = base64.b64encode(b"alice:s3cret").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"registry.example:5000": {"auth": auth}}}))
    app = App(Config(root=tmp_path), tmp_path)
    client = app.client("registry.example:5000")
    assert app.client("registry.example:5000") is client  # one per host
    cred = client.credential()
    assert cred is not None and (cred.username, cred.password) == ("alice", "s3cret")
    assert app.client("other.example").credential() is None
    assert app.credentials is app.credentials  # read once


def test_key_password_precedence(tmp_path: Path) -> None:
    env = {"COSIGN_PASSWORD": "from-cosign"}
    assert App(Config(root=tmp_path, key_password="from-builder"), tmp_path, env).key_password == "from-builder"
    assert App(Config(root=tmp_path), tmp_path, env).key_password == "from-cosign"
    assert App(Config(root=tmp_path), tmp_path, {}).key_password is None
    assert App(Config(root=tmp_path, key_password="b"), tmp_path, env).cosign_key_password == "from-cosign"


def test_the_promotion_fleet_checker_is_the_compat_one_imported_on_first_use(tmp_path: Path) -> None:
    """``App.promotion`` hands the context a fleet checker that imports the compat and image-layer
    modules only when a fleet rule asks (start-up of every promotion command); asked, it is the
    real one: a fleet file that cannot be read is named."""
    import pytest

    from builder.errors import ConfigError
    from builder.registry import RegistryClient

    policy = tmp_path / "p.yaml"
    policy.write_text("stages:\n  dev: {from: build, require: {unconditional: x}}\n")
    app = App(Config(root=tmp_path, state_dir=tmp_path / "state"), tmp_path)
    ctx = app.promotion(policy)
    assert ctx.fleet_checker is not None
    missing = tmp_path / "fleets" / "nowhere.yaml"
    with pytest.raises(ConfigError, match=r"cannot read fleet file .*nowhere\.yaml"):
        ctx.fleet_checker(RegistryClient("127.0.0.1:9", insecure=True), "demo/jax", "sha256:" + "c" * 64, str(missing))
    app.close()


def test_a_variant_id_is_its_moving_tag_under_the_prefix_once(tmp_path: Path) -> None:
    """`builder verify VARIANT-ID` with BUILDER_REPOSITORY_PREFIX=nu2 read 127.0.0.1:5000/nu2/nu2/demo/jax
    (the matrix index is already under the prefix, and the prefix was put before it again)."""
    from tests.conftest import ROOT

    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "tiny.yaml").write_text((ROOT / "tests" / "data" / "matrices" / "tiny.yaml").read_text())
    cfg = Config(root=tmp_path, matrices_dir=tmp_path / "matrices", state_dir=tmp_path / "state")
    plain = App(cfg, tmp_path).image_reference("tiny-cpu-py3.11-debian12")
    assert plain == "127.0.0.1:5000/test/tiny:tiny-cpu-py3.11-debian12"
    under = App(dataclasses.replace(cfg, repository_prefix="nu2"), tmp_path)
    prefixed = under.image_reference("tiny-cpu-py3.11-debian12")
    assert prefixed == "127.0.0.1:5000/nu2/test/tiny:tiny-cpu-py3.11-debian12"
    assert App(cfg, tmp_path).image_reference("registry.example/x/y:1") == "registry.example/x/y:1"  # as given


def test_the_command_line_refuses_a_missing_docker_config_before_any_request(cli: Cli, tmp_path: Path) -> None:
    """`builder status --docker-config /tmp/nonexist-dc` and `DOCKER_CONFIG=... builder resolve`:
    exit 8 naming the path and the option or variable, not a refused login (6) later."""
    missing = str(tmp_path / "nonexist-dc")
    error = cli("status", "--docker-config", missing, "--json", code=8, cwd=ROOT).json()["error"]
    assert missing in error["message"] and "--docker-config" in error["message"]
    variant = "jax0.7-cpu-py3.11-debian12"
    env = {"DOCKER_CONFIG": missing}
    error = cli("resolve", variant, "--stage", "dev", "--json", code=8, cwd=ROOT, env=env).json()["error"]
    assert missing in error["message"] and "DOCKER_CONFIG" in error["message"]
