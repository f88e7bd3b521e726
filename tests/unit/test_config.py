"""builder.toml + BUILDER_* overrides."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.config import load_config
from builder.errors import ConfigError

if TYPE_CHECKING:
    from tests.conftest import Cli


def test_defaults_without_file(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, {})
    assert cfg.registry == "127.0.0.1:5000"
    assert cfg.state_dir == tmp_path / ".builder"
    assert cfg.render_dir == tmp_path / "rendered"
    assert cfg.ledger_path == tmp_path / ".builder" / "ledger.sqlite"
    assert cfg.mirror_map is None


def test_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('registry = "reg.example:443"\nworkers = 4\nstate_dir = "/var/tmp/st"\n')
    cfg = load_config(tmp_path, {"BUILDER_WORKERS": "8", "BUILDER_INSECURE_REGISTRIES": "a:1, b:2"})
    assert cfg.registry == "reg.example:443"
    assert cfg.workers == 8
    assert cfg.state_dir == Path("/var/tmp/st")
    assert cfg.insecure_registries == ("a:1", "b:2")
    assert cfg.is_insecure("a:1") and cfg.is_insecure("127.0.0.1:5000") and cfg.is_insecure("localhost:5000")
    assert not cfg.is_insecure("reg.example:443")


@pytest.mark.parametrize(
    "text", ['["a:5000"]', "['a:5000', 'b:5000']", "[a:5000, b:5000]", "a:5000 b:5000", "[]", "[a:5000]", "[::1]x"]
)
def test_a_list_in_another_syntax_is_refused_naming_the_variable(tmp_path: Path, text: str) -> None:
    """A JSON or TOML list (or blanks) in a comma-separated variable was taken as odd host names, so the
    registries it meant were silently not insecure; an IPv6 literal's brackets are an item's."""
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {"BUILDER_INSECURE_REGISTRIES": text})
    assert "environment variable BUILDER_INSECURE_REGISTRIES" in info.value.message
    assert "not a comma-separated list" in info.value.message and "ITEM1,ITEM2" in info.value.hint
    ipv6 = load_config(tmp_path, {"BUILDER_INSECURE_REGISTRIES": "[::1]:5000,[fd00::2]:443, a:1"})
    assert ipv6.insecure_registries == ("[::1]:5000", "[fd00::2]:443", "a:1")


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('registy = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {})
    assert "registy" in info.value.message and "builder.toml" in info.value.message
    assert "registry" in info.value.hint


def test_bad_value_names_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="BUILDER_WORKERS"):
        load_config(tmp_path, {"BUILDER_WORKERS": "-1"})


def test_invalid_toml(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text("registry = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, {})


def test_repository_config_loads() -> None:
    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root, {})
    assert cfg.root == root


def test_repository_prefix_names_every_repository(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('repository_prefix = "/team-a/"\n')
    cfg = load_config(tmp_path, {})
    assert cfg.repository_prefix == "team-a" and cfg.repository("ml/jax") == "team-a/ml/jax"
    env = load_config(tmp_path, {"BUILDER_REPOSITORY_PREFIX": "acme/images"})
    assert env.repository("prod/ml/jax") == "acme/images/prod/ml/jax"
    assert load_config(tmp_path, {"BUILDER_REPOSITORY_PREFIX": ""}).repository("ml/jax") == "ml/jax"
    # ${{ github.repository }} keeps the owner's capitals; GHCR names are lower case
    assert load_config(tmp_path, {"BUILDER_REPOSITORY_PREFIX": "Acme/Images"}).repository("x") == "acme/images/x"
    with pytest.raises(ConfigError, match="repository_prefix 'team a'") as err:
        load_config(tmp_path, {"BUILDER_REPOSITORY_PREFIX": "team a"})
    assert "BUILDER_REPOSITORY_PREFIX" in err.value.message and "lowercase" in err.value.hint


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("team//x", "component ''"),
        ("../up", "component '..'"),
        ("-lead", "component '-lead'"),
        ("a b", "component 'a b'"),
        ("x" * 256, "longer than 255 characters"),
    ],
)
def test_a_bad_repository_prefix_says_which_part(tmp_path: Path, prefix: str, why: str) -> None:
    (tmp_path / "builder.toml").write_text(f'repository_prefix = "{prefix}"\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, {})
    assert str(tmp_path / "builder.toml") in err.value.message and why in err.value.message
    assert err.value.exit_code == 2


def test_a_bad_repository_prefix_on_the_command_line(cli: Cli, tmp_path: Path) -> None:
    """As a new user meets it: ``builder build --dry-run`` in a checkout whose builder.toml has a
    bad prefix is exit 2 naming the file, the setting and the part at fault (human and --json)."""
    (tmp_path / "builder.toml").write_text('repository_prefix = "team//images"\n')
    human = cli("build", "--dry-run", code=2, cwd=tmp_path)
    assert "builder.toml" in human.stderr and "repository_prefix 'team//images'" in human.stderr
    assert "component ''" in human.stderr and "Traceback" not in human.stderr
    doc = cli("build", "--dry-run", "--json", code=2, cwd=tmp_path).json()
    assert doc["error"]["kind"] == "config" and "component ''" in doc["error"]["message"]


def test_registry_endpoints(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('registry_endpoints = ["docker.io=127.0.0.1:5001"]\n')
    assert load_config(tmp_path, {}).endpoint_overrides() == {"docker.io": "127.0.0.1:5001"}
    with pytest.raises(ConfigError, match="not NAME=HOST"):
        load_config(tmp_path, {"BUILDER_REGISTRY_ENDPOINTS": "docker.io"})
    # a name no reference can reach (Docker's rule: a registry has '.' or ':' or is localhost)
    with pytest.raises(ConfigError, match="'dockerhub' is not a registry name") as err:
        load_config(tmp_path, {"BUILDER_REGISTRY_ENDPOINTS": "dockerhub=127.0.0.1:5000"})
    assert "docker.io" in err.value.message
    assert load_config(tmp_path, {"BUILDER_REGISTRY_ENDPOINTS": "localhost=127.0.0.1:5001"}).endpoint_overrides()


@pytest.mark.parametrize("where", ["env", "file"])
def test_a_folder_setting_naming_a_file_is_refused_naming_it(cli: Cli, tmp_path: Path, where: str) -> None:
    """`BUILDER_STATE_DIR=README.md builder status` read a file as an empty state folder (no keys:
    every signature "unknown signer", exit 0): now exit 2 naming the path and where it was set."""
    (tmp_path / "README.md").write_text("# not a folder\n")
    env = {"BUILDER_STATE_DIR": str(tmp_path / "README.md")} if where == "env" else {}
    if where == "file":
        (tmp_path / "builder.toml").write_text('render_dir = "README.md"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, env)
    assert str(tmp_path / "README.md") in info.value.message and "not a folder" in info.value.message
    assert ("BUILDER_STATE_DIR" if where == "env" else "`render_dir`") in info.value.message
    if where == "env":
        error = cli("-C", str(tmp_path), "status", "--json", code=2, env=env).json()["error"]
        assert error["kind"] == "config" and "BUILDER_STATE_DIR" in error["message"]
    (tmp_path / "builder.toml").unlink(missing_ok=True)
    fresh = load_config(tmp_path, {"BUILDER_STATE_DIR": str(tmp_path / "new")})  # not made yet: fine
    assert fresh.state_dir == tmp_path / "new"


@pytest.mark.parametrize(
    "registry", ["bad registry!", "a..b:5000", "reg.example/path", ".example.com", "host:port", "127.0.0.1:5000\n"]
)
def test_a_registry_setting_that_is_not_host_port_is_a_setting_error(tmp_path: Path, registry: str) -> None:
    # no registry answered anything: the setting is wrong, named with where it was set
    with pytest.raises(ConfigError, match=r"environment variable BUILDER_REGISTRY: the registry .* is not|label"):
        load_config(tmp_path, {"BUILDER_REGISTRY": registry})
    (tmp_path / "builder.toml").write_text(f"registry = {registry!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match=r"builder.toml: `registry`") as info:
        load_config(tmp_path, {})
    assert "BUILDER_REGISTRY" in (info.value.hint or "")


@pytest.mark.parametrize("registry", ["127.0.0.1:5000", "localhost:5000", "ghcr.io", "[::1]:5000", "reg.example:443"])
def test_a_registry_host_port_is_accepted(tmp_path: Path, registry: str) -> None:
    assert load_config(tmp_path, {"BUILDER_REGISTRY": registry}).registry == registry


def test_a_bad_registry_setting_on_the_command_line_exits_2(cli: Cli, tmp_path: Path) -> None:
    out = cli("status", code=2, env={"BUILDER_REGISTRY": "bad registry!"}, cwd=tmp_path)
    assert "BUILDER_REGISTRY" in out.stderr and "answered" not in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("kind", ["folder", "dangling link", "link loop", "too large", "not utf-8"])
def test_a_builder_toml_that_cannot_be_read_is_exit_2_naming_it(cli: Cli, tmp_path: Path, kind: str) -> None:
    """`mkdir builder.toml; builder resolve ...` was an IsADirectoryError traceback, and a link to a
    removed file silently fell back to the defaults (another registry, another state folder): both
    are now exit 2 naming the file and what to do, as a new user meets them."""
    path = tmp_path / "builder.toml"
    if kind == "folder":
        path.mkdir()
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "gone.toml")
    elif kind == "link loop":
        path.symlink_to(path)
    elif kind == "too large":
        path.write_text("# " + "x" * (4 * 1024 * 1024) + "\n")
    else:
        path.write_bytes(b'registry = "\xff"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {})
    assert str(path) in info.value.message and info.value.exit_code == 2
    assert "remove it" in (info.value.hint or "")
    if kind == "folder":
        assert "is a folder" in info.value.message
    if kind == "too large":
        assert "larger than the 4 MiB limit for a hand-written file" in info.value.message
    if kind == "dangling link":
        assert "gone.toml" in info.value.message and "does not exist" in info.value.message
    out = cli("resolve", "jax0.7-cpu-py3.11-debian12", "--stage", "staging", code=2, cwd=tmp_path)
    assert str(path) in out.stderr.replace("\n", "") and "Traceback" not in out.stderr
    error = cli("status", "--json", code=2, cwd=tmp_path).json()["error"]
    assert error["kind"] == "config" and "builder.toml" in error["message"]


@pytest.mark.parametrize(
    ("line", "given", "expected"),
    [
        ('state_dir = ["a"]', '["a"] (an array)', "a path (a string)"),
        ("state_dir = 7", "7 (an integer)", "a path (a string)"),
        ("mirror_map = true", "true (a boolean)", "a path (a string)"),
        ("workers = 2.9", "2.9 (a float)", "a whole number >= 1"),
        ("copy_streams = 2.5", "2.5 (a float)", "a whole number >= 1"),
        ("workers = true", "true (a boolean)", "a whole number >= 1"),
        ('workers = "4"', "'4'", "a whole number >= 1"),
        ("registry_retries = -1", "-1 (an integer)", "a whole number >= 0"),
        ("registry = 5000", "5000 (an integer)", "a string"),
        ("image_licenses = {a = 1}", '{"a": 1} (a table)', "a string"),
        ("insecure_registries = [1, 2]", "[1, 2] (an array)", "a list of strings"),
        ("promotion_remote = 1979-05-27", "1979-05-27 (a date or time)", "a string"),
    ],
)
def test_every_key_of_builder_toml_is_type_checked(tmp_path: Path, line: str, given: str, expected: str) -> None:
    """`state_dir = ["a"]` made a folder `['a']/` in the checkout and `workers = 2.9` or `true` were
    taken while BUILDER_COPY_STREAMS=2.5 was refused: each key's type is its Config field's, a
    boolean or a float is no integer, a path is a string; exit 2 naming the file, the key, what was
    given and what the key takes."""
    (tmp_path / "builder.toml").write_text(line + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {})
    key = line.split(" ", 1)[0]
    message = info.value.message
    assert str(tmp_path / "builder.toml") in message and f"`{key}`" in message and info.value.exit_code == 2
    assert given in message and f"expected {expected}" in message
    assert f"BUILDER_{key.upper()}" in (info.value.hint or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["builder.toml"]  # no folder made


def test_the_environment_takes_the_same_types_as_text(tmp_path: Path) -> None:
    for variable, value in [("BUILDER_COPY_STREAMS", "2.5"), ("BUILDER_WORKERS", "true"), ("BUILDER_WORKERS", "0")]:
        with pytest.raises(ConfigError, match=f"environment variable {variable}: .*expected a whole number >= 1"):
            load_config(tmp_path, {variable: value})
    cfg = load_config(tmp_path, {"BUILDER_COPY_STREAMS": "3", "BUILDER_REGISTRY_RETRIES": "0"})
    assert cfg.copy_streams == 3 and cfg.registry_retries == 0
    (tmp_path / "builder.toml").write_text('workers = 3\nstate_dir = "st"\ninsecure_registries = ["a:1"]\n')
    cfg = load_config(tmp_path, {})
    assert cfg.workers == 3 and cfg.state_dir == tmp_path / "st" and cfg.insecure_registries == ("a:1",)
    # an empty path is "not set": the default, never a None state folder
    assert load_config(tmp_path, {"BUILDER_STATE_DIR": ""}).state_dir == tmp_path / ".builder"


def test_key_password_in_builder_toml_says_where_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "builder.toml").write_text('key_password = "hunter2"\n')
    with pytest.raises(ConfigError, match=r"`key_password` is not read from builder\.toml") as info:
        load_config(tmp_path, {})
    assert "BUILDER_KEY_PASSWORD" in (info.value.hint or "") and "hunter2" not in info.value.message


def test_every_builder_toml_key_named_in_the_source_is_one_it_takes() -> None:
    """A hint naming "builder.toml key_password" sent users to a key builder.toml refuses: every
    `builder.toml KEY` the code names (messages, hints, docstrings) is a key the file takes."""
    import dataclasses
    import re

    from builder.config import Config

    takes = {f.name for f in dataclasses.fields(Config)} - {"root", "key_password"}
    package = Path(__file__).resolve().parents[2] / "builder"
    named = {
        (str(path.relative_to(package)), key)
        for path in package.rglob("*.py")
        for key in re.findall(r"builder\.toml`*\s+`*([a-z]+_[a-z_]+|key)\b", path.read_text())
    }
    assert named and {(where, key) for where, key in named if key not in takes} == set()


@pytest.mark.parametrize("name", ["bases_lock", "mirror_map", "ledger", "key", "check_key"])
def test_a_file_setting_naming_a_folder_is_refused_naming_it(cli: Cli, tmp_path: Path, name: str) -> None:
    """`mkdir bases.lock.json` (or BUILDER_MIRROR_MAP naming a folder) was an IsADirectoryError
    traceback where the file is read: every file setting is checked as the folder settings are."""
    (tmp_path / "a-folder").mkdir()
    env = {f"BUILDER_{name.upper()}": str(tmp_path / "a-folder")}
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, env)
    assert f"BUILDER_{name.upper()}" in info.value.message and "is a folder, not a file" in info.value.message
    (tmp_path / "builder.toml").write_text(f'{name} = "a-folder"\n')
    with pytest.raises(ConfigError, match=f"`{name}`: .*a-folder is a folder"):
        load_config(tmp_path, {})
    if name == "bases_lock":  # the default location too, as a new user meets it
        (tmp_path / "builder.toml").unlink()
        (tmp_path / "bases.lock.json").mkdir()
        out = cli("build", "--dry-run", code=2, cwd=tmp_path)
        assert "bases.lock.json is a folder" in out.stderr and "Traceback" not in out.stderr
