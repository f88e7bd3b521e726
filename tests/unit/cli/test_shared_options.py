"""Options defined once behave the same in every command that takes them (issue: `--fleet`
took a name in one command and only a file in another)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from builder.cli import COMMANDS, cli
from tests.conftest import ROOT, Cli

#: each command that takes --fleet, with the other arguments it needs to get as far as parsing
FLEET_COMMANDS = {
    "check": ["127.0.0.1:5000/demo/jax:tag", "--static"],
    "resolve": ["jax0.7-cpu-py3.11-debian12", "--stage", "dev"],
    "run": [],
    "fleet audit": [],
    "diff": ["127.0.0.1:5000/demo/jax:a", "127.0.0.1:5000/demo/jax:b"],
}


def _commands_with(option: str) -> set[str]:
    ctx = click.Context(cli)
    found = set()
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        subs = cmd.commands.values() if isinstance(cmd, click.Group) else [cmd]
        for sub in subs:
            if any(option in p.opts for p in sub.params):
                found.add(name if sub is cmd else f"{name} {sub.name}")
    return found


def test_the_fleet_table_covers_every_command_with_fleet() -> None:
    assert _commands_with("--fleet") == set(FLEET_COMMANDS)


@pytest.mark.parametrize("command", sorted(FLEET_COMMANDS))
def test_fleet_takes_a_name_and_names_the_known_fleets_when_wrong(cli: Cli, command: str) -> None:
    out = cli(*command.split(), *FLEET_COMMANDS[command], "--fleet", "nosuch", "--json", code=8, cwd=ROOT)
    error = out.json()["error"]
    assert "no fleet named 'nosuch'" in error["message"] and "demo" in error["message"], error


@pytest.mark.parametrize("command", sorted(FLEET_COMMANDS))
def test_fleet_resolves_a_name_to_the_file_in_the_fleets_directory(command: str) -> None:
    from builder.cli._common import AppContext

    name, *sub = command.split()
    ctx = click.Context(cli, obj=AppContext(root_option=str(ROOT)))
    cmd = cli.get_command(ctx, name)
    if sub and isinstance(cmd, click.Group):  # `fleet audit`
        cmd = cmd.commands[sub[0]]
    assert cmd is not None
    fleet = next(p for p in cmd.params if "--fleet" in p.opts)
    with click.Context(cmd, parent=ctx, obj=ctx.obj) as sub_ctx:
        assert fleet.process_value(sub_ctx, "demo") == ROOT / "fleets" / "demo.yaml"


def test_every_registry_command_takes_docker_config() -> None:
    registry_commands = {
        "sign", "verify", "attest", "approve", "check", "build", "promote", "rollback", "status",
        "history", "resolve", "run", "bases update", "doctor",
    }  # fmt: skip
    assert registry_commands <= _commands_with("--docker-config")


#: every option that names a digest, with the command line that gets it as far as parsing
DIGEST_OPTIONS = {
    "--expect-previous": ["promote", "jax0.7-cpu-py3.11-debian12", "--to", "staging"],
    "--to": ["rollback", "jax0.7-cpu-py3.11-debian12", "--stage", "prod"],
}


@pytest.mark.parametrize("option", sorted(DIGEST_OPTIONS))
@pytest.mark.parametrize("value", ["garbage", "sha256:abc", "SHA256:" + "a" * 64, "a" * 64, "sha512:" + "a" * 128])
def test_a_digest_option_refuses_what_is_not_a_digest_before_any_plan(cli: Cli, option: str, value: str) -> None:
    # issue: `promote --expect-previous garbage` planned (exit 0) and with --confirm said the stage
    # "changed since the plan was made: expected garbage" (32); `rollback --to garbage` said exit 2
    out = cli(*DIGEST_OPTIONS[option], option, value, "--json", code=2, cwd=ROOT)
    err = out.json()["error"]
    assert err["kind"] == "usage" and option in err["message"] and repr(value) in err["message"]


def test_only_expect_previous_takes_none_and_both_show_the_shape_in_help(cli: Cli) -> None:
    promote = cli("promote", "--help", cwd=ROOT).stdout
    rollback = cli("rollback", "--help", cwd=ROOT).stdout
    assert "--expect-previous DIGEST|none" in promote and "--to DIGEST " in rollback
    err = cli("rollback", "v", "--stage", "prod", "--to", "none", "--json", code=2, cwd=ROOT).json()["error"]
    assert "'none' is not a digest" in err["message"]


def _public_good_trusted_root() -> Path:
    """The public-good trusted_root.json sigstore-python ships (a real file of the format)."""
    import sigstore

    found = sorted(Path(sigstore.__file__).parent.glob("_store/*sigstore.dev*/trusted_root.json"))
    assert found, "sigstore-python ships its public-good trusted root"
    return found[0]


@pytest.mark.parametrize("spelling", ["--trust-config", "--trust-root"])
@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1}', "no mediaType"),
        ("not json", "not JSON"),
        ("[1]", "not an object"),
        ('{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}', "bundle"),
    ],
)
def test_a_trust_file_that_is_not_a_trusted_root_is_refused_even_when_unused(
    cli: Cli, tmp_path: Path, spelling: str, text: str, why: str
) -> None:
    # issue: `resolve --trust-root garbage.json` exited 0 (the policy has no keyless identity, so
    # the file was never read) while `verify --trust-config` refused the same file (exit 2)
    bad = tmp_path / "garbage.json"
    bad.write_text(text)
    for command in (["resolve", "jax0.7-cpu-py3.11-debian12", "--stage", "dev"], ["status"]):
        err = cli(*command, spelling, str(bad), "--json", code=2, cwd=ROOT).json()["error"]
        assert err["kind"] == "config" and str(bad) in err["message"] and why in err["message"], err


def test_the_trust_option_has_one_name_and_takes_a_real_trusted_root(cli: Cli, tmp_path: Path) -> None:
    from builder.signing.keyless.trust import check_trust_file

    check_trust_file(_public_good_trusted_root())  # the real format passes the cheap check
    assert _commands_with("--trust-root") == _commands_with("--trust-config") - {"attest", "build", "sign", "verify"}
    for command in ("promote", "resolve", "rollback"):
        text = cli(command, "--help", cwd=ROOT).stdout
        assert "--trust-config" in text and "--trust-root" not in text  # the old name is a hidden alias
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    out = cli("resolve", "v", "--stage", "dev", "--trust-root", str(bad), "--trust-config", str(bad), code=2, cwd=ROOT)
    assert "Traceback" not in out.stderr
