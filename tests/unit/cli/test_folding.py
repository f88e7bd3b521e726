"""Lines of prose at 80 columns are folded at spaces (references, digests and paths stay whole words):
`builder compat check` printed reasons up to 267 characters and `builder check --static` detail lines
up to 112, which a terminal folds mid-word. The verdicts are builder.compat's, on the demo fleet's
real driver and GPU names (fleets/demo.yaml)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from builder.cli import check as check_cli
from builder.cli.terminal import fold

if TYPE_CHECKING:
    import pytest

    from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[3]
REQUIRE = "cuda>=12.8 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551"


def _fits(text: str, width: int = 80) -> None:
    """Every line within ``width`` unless it is one word (a path, a reference); the closing error
    and hint (builder.cli's shared error printer, for every command) are not this test's."""
    prose = text.split("\nerror: ", maxsplit=1)[0]
    for line in prose.splitlines():
        assert len(line) <= width or len(line.split()) == 1, text


def test_compat_check_reasons_fold_at_80_and_keep_every_word(cli: Cli) -> None:
    args = ("compat", "check", "--driver", "550.144.03", "--gpu", "NVIDIA GeForce RTX 4090", "--image-cuda", "12.8.1")
    human = cli(*args, code=11, env={"COLUMNS": "80"}).stderr
    _fits(human)
    reasons = cli(*args, "--json", code=11).json()["reasons"]
    assert len(max(reasons, key=len)) > 80  # the case this test is about
    for reason in reasons:
        assert reason in " ".join(human.split()), reason  # folded at spaces: nothing lost or split


def test_compat_fleet_folds_at_80(cli: Cli) -> None:
    fleet = ("compat", "fleet", "demo", "--require", REQUIRE, "--arch-list", "sm_80,sm_90,sm_120")
    _fits(cli(*fleet, code=11, env={"COLUMNS": "80"}, cwd=ROOT).stderr)


def test_check_static_detail_lines_fold_at_80(monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.checks.host.reading import load_host
    from builder.checks.image import ImageFacts
    from builder.checks.static import StaticCheck
    from builder.compat import ImageSpec
    from builder.compat.fleets import check_fleet_file

    spec = ImageSpec(None, REQUIRE, None, None, ImageSpec.parse_archs("sm_80,sm_90,sm_120"))
    verdict = check_fleet_file("demo", spec, fleets_dir=ROOT / "fleets", load_host=load_host)
    digest = "sha256:" + "c3" * 32
    image = ImageFacts("127.0.0.1:5000/demo/torch", digest, digest, "linux/amd64", "cuda", require_cuda=REQUIRE)
    out = io.StringIO()
    monkeypatch.setattr(check_cli, "console", lambda: Console(file=out, width=80, no_color=True, soft_wrap=True))
    check_cli._print_static(StaticCheck(f"127.0.0.1:5000/demo/torch@{digest}", image, verdict))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) > 40, text
    _fits(text)
    for cluster, cv in verdict.clusters:
        for reason in cv.verdict.reasons if verdict.applies(cluster.name) else ():
            assert reason in " ".join(text.split()), reason


def test_fold_keeps_long_words_whole_and_indents_what_follows() -> None:
    ref = "127.0.0.1:5000/demo/jax@sha256:" + "ab" * 32
    lines = fold(f"- pull {ref} and verify it with the key", 40, indent="  ").splitlines()
    assert lines[0] == "  - pull" and lines[1] == f"    {ref}" and all(len(x) <= 40 for x in lines[2:]), lines
    assert fold("short", 40, indent="  ") == "  short"
