"""Fuzz (hypothesis) over every input file kind (matrix, policy, fleet, builder.toml, saved host
tool output for ``hostinfo --from``) and reference/variant arguments: whatever the bytes, builder
ends with a documented exit code other than 1 (a bug) and never prints a traceback (#20 item 6). Inputs are generated
from mutations of the real files in this repository plus arbitrary text and YAML-ish structure
(aliases, deep nesting, control characters, odd scalars). No registry is reached: a proxy that
refuses connections stands in for the network, so a reference that parses ends in exit 5."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "exit-codes.md").read_text()
DOCUMENTED = {int(c) for c in re.findall(r"^\| (\d+) \|", DOC, re.MULTILINE)} - {1}
#: No registry is reached: remote hosts go to a dead proxy; registries on this machine (never
#: proxied, as Go's ProxyFromEnvironment) are sent to the closed discard port through registry_endpoints.
OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
    "BUILDER_REGISTRY": "127.0.0.1:9",
    "BUILDER_REGISTRY_ENDPOINTS": "127.0.0.1:5000=127.0.0.1:9,localhost=127.0.0.1:9,[::1]=127.0.0.1:9",
}
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None
)

SEEDS = {
    "matrix": (ROOT / "matrices" / "demo.yaml").read_text(),
    "policy": (ROOT / "policies" / "default.yaml").read_text(),
    "fleet": (ROOT / "fleets" / "demo.yaml").read_text(),
    "host": (ROOT / "tests" / "data" / "nvidia-smi" / "nvidia-smi-01.txt").read_text(),
}

yaml_scalars = st.one_of(
    st.text(max_size=20),
    st.integers(),
    st.floats(allow_nan=True),
    st.sampled_from(
        ["~", "null", "yes", "no", ".inf", "0x1F", "1e400", "&a x", "*a", "!!binary AA", "{", "[", "'", '"']
    ),
)


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> str:
    """The seed file with a few lines replaced, duplicated, cut or spliced with odd text."""
    lines = seed.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["replace", "value", "cut", "dup", "indent", "control"]))
        if op == "replace":
            lines[i] = draw(st.text(max_size=40))
        elif op == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(yaml_scalars)}"
        elif op == "cut":
            lines = lines[:i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "indent":
            lines[i] = " " * draw(st.integers(0, 9)) + lines[i].lstrip()
        else:
            lines[i] += draw(st.sampled_from(["\x1b[31m", "\r", "\x00", "\u202e", "\nRUN id", "\t"]))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n---\n", "\n...\n"]))


def documents(kind: str) -> st.SearchStrategy[str]:
    return st.one_of(
        mutated(SEEDS[kind]),
        st.text(max_size=200),
        st.recursive(
            yaml_scalars.map(str), lambda c: st.lists(c, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
        ),
        st.just("a: &a [*a, *a]\nb: *a\n"),
        st.just("- " * 500 + "x"),
    )


def _ok(code: int, err: str) -> None:
    assert code in DOCUMENTED, f"exit {code} is not a documented code\n{err}"
    assert "Traceback" not in err, err


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("matrix", ("matrix", "list", "--matrix", "{f}")),
        ("matrix", ("render", "--matrix", "{f}", "--check")),
        ("policy", ("policy", "validate", "{f}")),
        ("policy", ("status", "--policy", "{f}")),
        ("fleet", ("compat", "fleet", "{f}", "--cuda", "12.8")),
        ("fleet", ("check", "--static", "127.0.0.1:5000/demo/jax:x", "--fleet", "{f}")),
        ("host", ("hostinfo", "--from", "{f}")),
    ],
)
def test_every_input_file_kind_ends_in_a_documented_exit_code(
    cli: Cli, tmp_path: Path, kind: str, args: tuple[str, ...]
) -> None:
    @FUZZ
    @given(text=documents(kind))
    def run(text: str) -> None:
        f = tmp_path / f"{kind}.yaml"
        f.write_bytes(text.encode("utf-8", "surrogatepass"))
        out = cli(*[a.replace("{f}", str(f)) for a in args], code=None, cwd=ROOT, env=OFFLINE)
        _ok(out.code, out.stderr)

    run()


@FUZZ
@given(text=st.text(max_size=300))
def test_builder_toml_ends_in_a_documented_exit_code(cli: Cli, tmp_path: Path, text: str) -> None:
    project = tmp_path / "p"
    project.mkdir(exist_ok=True)
    (project / "builder.toml").write_text(text)
    out = cli("-C", str(project), "matrix", "list", code=None, env=OFFLINE)
    _ok(out.code, out.stderr)


references = st.one_of(
    st.text(max_size=80),
    st.from_regex(r"[a-z0-9.:/@_-]{1,60}", fullmatch=True),
    st.builds(
        lambda r, t, d: f"{r}/{t}{d}",
        st.sampled_from(["127.0.0.1:5000/demo/jax", "localhost/x", "..", "a..b:1/x", "[::1]/x", ""]),
        st.sampled_from([":tag", ":", ":../x", ":a\nb", "", ":" + "t" * 200]),
        st.sampled_from(["", "@sha256:" + "a" * 64, "@sha256:zz", "@", "@md5:x"]),
    ),
)


@pytest.mark.parametrize(
    "args",
    [
        ("resolve", "{r}", "--stage", "dev"),
        ("promote", "{r}", "--to", "dev"),
        ("history", "{r}"),
        ("rollback", "dev", "{r}", "--to", "{r}"),
        ("verify", "{r}"),
        ("approve", "{r}", "--stage", "prod"),
    ],
)
def test_reference_arguments_end_in_a_documented_exit_code(cli: Cli, args: tuple[str, ...]) -> None:
    @FUZZ
    @given(ref=references)
    def run(ref: str) -> None:
        out = cli(*[a.replace("{r}", ref) for a in args], code=None, cwd=ROOT, env=OFFLINE)
        _ok(out.code, out.stderr)

    run()
