"""A registry request that keeps being retried is said, one line per retry once it has taken
``builder.lockfile.NOTICE_AFTER_S`` seconds (here 0, so every retry counts as past it: no timing
is asserted), against a real HTTP server on loopback answering 503 before it answers; the command
line prints the notice on stderr."""

from __future__ import annotations

import http.server
import threading
from typing import TYPE_CHECKING

import pytest

from builder.registry import RegistryClient
from tests.conftest import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Cli

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def busy_registry() -> Iterator[tuple[str, list[str]]]:
    """``127.0.0.1:PORT`` answering the first two HEADs 503 (Retry-After 0), then 200 with a digest."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_HEAD(self) -> None:
            seen.append(self.path)
            busy = len(seen) <= 2
            self.send_response(503 if busy else 200)
            self.send_header("Content-Length", "0")
            self.send_header("Retry-After" if busy else "Docker-Content-Digest", "0" if busy else DIGEST)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_each_retry_past_the_notice_time_is_said(
    busy_registry: tuple[str, list[str]], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    address, seen = busy_registry
    monkeypatch.setattr("builder.lockfile.NOTICE_AFTER_S", 0.0)
    with caplog.at_level("WARNING", logger="builder.registry.backoff"):
        assert RegistryClient(address, insecure=True, retries=3, backoff=0.001).resolve("demo/jax", "t") == DIGEST
    notes = [r.getMessage() for r in caplog.records if r.name == "builder.registry.backoff"]
    assert len(seen) == 3 and len(notes) == 2, notes
    assert notes[0].startswith(f"registry {address}: HEAD {address}/demo/jax:t answered HTTP 503; retry 1 of 3 in ")
    assert "retry 2 of 3" in notes[1] and "registry_retries" in notes[1]


def test_the_command_line_prints_the_notice(
    cli: Cli, busy_registry: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, _ = busy_registry
    monkeypatch.setattr("builder.lockfile.NOTICE_AFTER_S", 0.0)
    env = {"BUILDER_REGISTRY": address, "BUILDER_REGISTRY_BACKOFF_MS": "1"}
    out = cli(
        "resolve", "jax0.7-cpu-py3.11-debian12", "--stage", "staging", "--no-verify", code=None, cwd=ROOT, env=env
    )
    assert out.code == 0 and DIGEST in out.stdout, out.stderr
    assert "answered HTTP 503; retry 1 of 4 in " in " ".join(out.stderr.split()), out.stderr
