"""A file that is not UTF-8 text is a clear error with the documented code, never a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("matrix", "list", "--matrix", "{f}"), 2, "cannot be read as UTF-8 text"),
        (("policy", "validate", "{f}"), 30, "is not UTF-8 text"),
        (("compat", "fleet", "{f}", "--cuda", "12.8"), 2, "not UTF-8 text"),
    ],
)
def test_binary_file(cli: Cli, tmp_path: Path, args: tuple[str, ...], code: int, words: str) -> None:
    f = tmp_path / "binary.yaml"
    f.write_bytes(b"\xff\xfe\x00not text")
    out = cli(*(a.format(f=f) for a in args), "--json", code=code, cwd=tmp_path)
    error = out.json()["error"]
    assert words in error["message"] and str(f) in error["message"], error
    assert "Traceback" not in out.stderr
