"""builder.cli.check human output helpers: engine errors shown as written, without docker's pull chatter."""

from __future__ import annotations

from builder.cli.check import error_lines, esc

# a real `docker run --gpus all` failure on a host without the toolkit, image not yet pulled
# (docker 26 on the builder CI machine; see tests/integration/test_check.py)
PULLED_THEN_FAILED = """Unable to find image '127.0.0.1:5000/test/checks@sha256:64e1' locally
127.0.0.1:5000/test/checks@sha256:64e1: Pulling from test/checks
5a7b: Pulling fs layer
5a7b: Pull complete
Digest: sha256:64e1
Status: Downloaded newer image for 127.0.0.1:5000/test/checks@sha256:64e1
docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].

Run 'docker run --help' for more information
"""


def test_error_lines_drop_pull_chatter_and_keep_the_error() -> None:
    lines = error_lines(PULLED_THEN_FAILED)
    assert lines == [
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
        "Run 'docker run --help' for more information",
    ]
    assert error_lines("") == []
    assert error_lines("x" * 500) == ["x" * 300]


def test_escape_keeps_brackets() -> None:
    from rich.console import Console

    con = Console(record=True, width=200)
    con.print(f"error: {esc('capabilities: [[gpu]]')}")
    assert "capabilities: [[gpu]]" in con.export_text()
