"""SIGTERM and SIGHUP stop builder the way Ctrl-C does (issue 14, build item 1).

``python -m builder ...`` runs as a real subprocess; the test waits until the work under test is
really running (a ``docker buildx build`` executing a step that sleeps, a check container that
the engine reports running, a promotion whose registry request is held open), sends the signal
and asserts: exit 143 (SIGTERM) or 129 (SIGHUP), ``interrupted by SIG...`` on stderr, no
process builder started is left (its descendants are recorded while it runs: the docker client
and the buildx plugin under it), no check container left, and a consistent state (no content
tag for an interrupted build; a stage pointer that is either the old or the new digest).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.integration

SIGNALS = [pytest.param(signal.SIGTERM, 143, id="SIGTERM"), pytest.param(signal.SIGHUP, 129, id="SIGHUP")]

#: how long a wait for a condition may take before the test fails (a bound, not a timing)
PATIENCE = 600.0


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state letter, command line) of every process (from /proc)."""
    table: dict[int, tuple[int, str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # exited while we read
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), fields[0], cmdline)
    return table


def _descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every living (non-zombie) descendant of ``pid``."""
    table = _proc_table()
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state, cmd) in table.items():
            if ppid == parent and child not in found and state != "Z":
                found[child] = cmd
                frontier.append(child)
    return found


def _alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of ``pids`` still running the same command (a reused pid runs something else)."""
    table = _proc_table()
    return {p: cmd for p, cmd in pids.items() if p in table and table[p][1] != "Z" and table[p][2] == cmd}


class Builder:
    """``python -m builder ARGS`` as a real process (its own session: the signal reaches builder
    only, as from CI's runner or ``timeout``), with every descendant seen while it ran."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "builder", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.seen: dict[int, str] = {}
        self.containers: list[str] = []
        _STARTED.append(self)

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        """Poll ``condition`` (recording descendants) until true; fail if builder exits first."""
        deadline = time.monotonic() + PATIENCE
        while not condition():
            self.seen.update(_descendants(self.proc.pid))
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"builder exited {self.proc.returncode} before {what}:\n{out[-2000:]}\n{err[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"no {what} within {PATIENCE:.0f} s")
            time.sleep(0.2)
        self.seen.update(_descendants(self.proc.pid))

    def child(self, fragment: str) -> str | None:
        """The command line of a descendant containing ``fragment`` (None: none now)."""
        self.seen.update(_descendants(self.proc.pid))
        return next((cmd for cmd in _descendants(self.proc.pid).values() if fragment in cmd), None)

    def interrupt(self, sig: signal.Signals) -> tuple[int, str, str]:
        """Send ``sig`` to builder alone; return (exit status, stdout, stderr)."""
        self.seen.update(_descendants(self.proc.pid))
        assert self.seen, "builder had started no child to stop"
        self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"builder did not exit after {sig.name}")
        return self.proc.returncode, out, err

    def kill(self) -> None:
        """Leave nothing behind when a test fails: builder, what it started, its containers."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in _alive(self.seen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.communicate()
        if self.containers:
            subprocess.run(["docker", "rm", "-f", *self.containers], capture_output=True, check=False, timeout=120)


_STARTED: list[Builder] = []


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
    while _STARTED:
        _STARTED.pop().kill()


def _assert_stopped(b: Builder, code: int, out: str, err: str, sig: signal.Signals, expected: int) -> None:
    assert code == expected, f"exit {code}\n{out[-2000:]}\n{err[-3000:]}"
    assert f"interrupted by {sig.name}" in err, err[-3000:]
    # every child (docker client, buildx plugin, docker run) stopped before builder exited
    assert _alive(b.seen) == {}, f"left running: {_alive(b.seen)}"


# --------------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------------


#: a family whose last step sleeps (``marker`` makes the step new, so BuildKit really runs it)
TEMPLATE = """\
{{% extends "_common/Dockerfile.base.j2" %}}
{{% block cmd %}}
RUN echo {marker} && sleep 900
CMD ["python", "-c", "print(1)"]
{{% endblock %}}
"""

VARIANTS = ("slow-cpu-py3.11-debian12", "slow2-cpu-py3.11-debian12")


@pytest.fixture
def slow_project(tmp_path: Path, unique_repo: str, registry_address: str, mirror_base: str) -> Iterator[Path]:
    """A project with two one-variant matrices whose builds sleep in their last step."""
    p = tmp_path / "proj"
    (p / "matrices").mkdir(parents=True)
    (p / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", p / "images" / "_common")
    marker = f"builder-signal-test-{uuid.uuid4().hex[:12]}"
    for family in ("slow", "slow2"):
        (p / "images" / family).mkdir()
        (p / "images" / family / "Dockerfile.j2").write_text(TEMPLATE.format(marker=marker))
        (p / "matrices" / f"{family}.yaml").write_text(cpu_matrix(family, unique_repo))
    (p / "builder.toml").write_text(f'registry = "{registry_address}"\nstate_dir = "state"\n')
    (p / "marker").write_text(marker)
    state = p / "state"
    state.mkdir()
    shutil.copy(ROOT / ".builder" / "mirror.json", state / "mirror.json")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
            cwd=p,
            check=True,
            capture_output=True,
        )
    yield p


def _buildkit_step_running(marker: str) -> bool:
    """BuildKit runs the step ``echo MARKER && sleep 900`` now (its shell is a process here)."""
    return any(marker in cmd and "sleep 900" in cmd for _, _, cmd in _proc_table().values())


@pytest.mark.parametrize(("sig", "expected"), SIGNALS)
def test_signal_during_build(
    sig: signal.Signals, expected: int, slow_project: Path, docker_engine: str, unique_repo: str
) -> None:
    marker = (slow_project / "marker").read_text()
    # one worker: the first variant builds, the second waits in the queue and must never start
    b = Builder("build", "--workers", "1", cwd=slow_project)
    b.wait_for("docker buildx build running the sleeping step", lambda: _buildkit_step_running(marker))
    assert b.child("buildx") is not None
    code, out, err = b.interrupt(sig)
    _assert_stopped(b, code, out, err, sig, expected)
    assert "2 of 2 variants not built" in err
    # BuildKit cancels the solve when its client goes away: the sleeping step stops too
    deadline = time.monotonic() + PATIENCE
    while _buildkit_step_running(marker):
        assert time.monotonic() < deadline, "the BuildKit step kept running"
        time.sleep(0.5)
    # no content tag was written for an image that was never verified: both still to build
    plan = subprocess.run(
        [sys.executable, "-m", "builder", "build", "--dry-run", "--json"],
        cwd=slow_project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert plan.returncode == 0, plan.stderr
    assert sorted((p["variant"], p["action"]) for p in json.loads(plan.stdout)["plan"]) == [
        (v, "build") for v in VARIANTS
    ]


# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sleeper(
    registry_address: str, docker_engine: str, mirror_base: str, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A CPU image whose python sleeps (as PID 1 of the check container, which ignores SIGTERM)."""
    ref = f"{registry_address}/test/signals-{uuid.uuid4().hex[:10]}:sleeper"
    ctx = tmp_path_factory.mktemp("sleeper")
    (ctx / "Dockerfile").write_text(
        f"FROM {mirror_base}\n"
        "RUN mkdir -p /opt/venv/bin && printf '#!/bin/sh\\nexec sleep 900\\n' > /opt/venv/bin/python3 "
        "&& chmod +x /opt/venv/bin/python3\n"
        'LABEL io.builder.accelerator="cpu" io.builder.framework="none"\n'
    )
    subprocess.run(
        ["docker", "buildx", "build", "--push", "-t", ref, str(ctx)], check=True, capture_output=True, timeout=900
    )
    return ref


def _containers(name: str, *flags: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", *flags, "-q", "--filter", f"name=^{name}$"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.split()


@pytest.mark.parametrize(("sig", "expected"), SIGNALS)
def test_signal_during_check(sig: signal.Signals, expected: int, sleeper: str) -> None:
    b = Builder("check", sleeper, "--mode", "cpu", "--no-attest", "--timeout", "900", "--json", cwd=ROOT)
    names: list[str] = []

    def container_running() -> bool:
        run = b.child(" run --rm ")
        if run is None:
            return False
        names[:] = [run.split("--name ", 1)[1].split()[0]]
        b.containers[:] = names
        return bool(_containers(names[0]))

    b.wait_for("a running check container", container_running)
    assert names[0].startswith("builder-check-")
    code, out, err = b.interrupt(sig)
    _assert_stopped(b, code, out, err, sig, expected)
    assert _containers(names[0], "-a") == [], f"{names[0]} left behind"
    error = json.loads(out)["error"]  # --json: one error document on stdout
    assert (error["kind"], error["exit_code"]) == ("interrupted", expected)


# --------------------------------------------------------------------------------------------
# promote
# --------------------------------------------------------------------------------------------


class HoldingProxy:
    """A pass-through HTTP proxy to the real registry that, once armed, holds the first write of
    a stage tag (``PUT /v2/REPO/manifests/*-dev``) until released, then drops that connection
    without an answer (the registry never sees the write). Speaks plain HTTP/1.1 as the registry."""

    def __init__(self, upstream: str) -> None:
        import http.client
        import http.server
        import threading

        host, port = upstream.rsplit(":", 1)
        self.armed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if (
                    self.command == "PUT"
                    and "/manifests/" in self.path
                    and self.path.endswith("-dev")
                    and proxy.armed.is_set()
                    and not proxy.held.is_set()
                ):
                    proxy.held.set()
                    proxy.release.wait()
                    self.close_connection = True
                    return
                conn = http.client.HTTPConnection(host, int(port), timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the test reads no access log."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(registry_address: str) -> Iterator[HoldingProxy]:
    p = HoldingProxy(registry_address)
    yield p
    p.close()


PYTHONS = ("3.11", "3.12", "3.13")


@pytest.fixture
def promote_project(tmp_path: Path, proxy: HoldingProxy, unique_repo: str) -> tuple[Path, dict[str, str]]:
    """A project whose registry is the proxy, with one pushed image per variant (3 variants)."""
    from builder.registry import RegistryClient
    from tests.integration.test_promote_support import make_keys, push_image, write_policy

    root = tmp_path / "project"
    (root / "matrices").mkdir(parents=True)
    (root / "policies").mkdir()
    keys = make_keys(root / "state")
    write_policy(root / "policies" / "default.yaml", keys)
    (root / "builder.toml").write_text(
        f'registry = "{proxy.address}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\n'
    )
    pythons = ", ".join(f'"{v}"' for v in PYTHONS)
    (root / "matrices" / "jax.yaml").write_text(
        f"family: jax\nrepository: {unique_repo}\naxes:\n  accelerator: [{{kind: cpu}}]\n"
        f'  framework: {{name: jax, versions: ["0.7"]}}\n  python: [{pythons}]\n'
        '  os: [ubuntu24.04]\npackages:\n  cpu: ["jax=={framework_version}.*"]\n'
        'base:\n  default: "mirror:debian:bookworm"\n'
    )
    client = RegistryClient(proxy.address, insecure=True)
    digests = {}
    for py in PYTHONS:
        variant = f"jax0.7-cpu-py{py}-ubuntu24.04"
        digests[variant] = push_image(client, unique_repo, variant, content=f"signals {variant}".encode())
    return root, digests


def _builder(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "builder", *args],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(project)},
        capture_output=True,
        text=True,
        check=False,
        timeout=PATIENCE,
    )


@pytest.mark.parametrize(
    ("sig", "expected", "workers"),
    [
        pytest.param(signal.SIGTERM, 143, "1", id="SIGTERM-sequential"),
        pytest.param(signal.SIGHUP, 129, "3", id="SIGHUP-parallel"),
    ],
)
def test_signal_during_promote(
    sig: signal.Signals,
    expected: int,
    workers: str,
    promote_project: tuple[Path, dict[str, str]],
    proxy: HoldingProxy,
    unique_repo: str,
) -> None:
    project, digests = promote_project
    proxy.armed.set()
    b = Builder("promote", "--select", "jax*", "--to", "dev", "--confirm", "--workers", workers, cwd=project)
    b.wait_for("a stage tag write held by the proxy", proxy.held.is_set)
    b.proc.send_signal(sig)
    proxy.release.set()  # the held write is dropped unanswered: it never reaches the registry
    out, err = b.proc.communicate(timeout=PATIENCE)
    assert b.proc.returncode == expected, f"exit {b.proc.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    assert f"interrupted by {sig.name}" in err, err[-3000:]
    assert re.search(rf"[0-{len(digests)}] of {len(digests)} promotions not done", err), err[-3000:]
    assert _alive(b.seen) == {}
    # every stage pointer is the old one (none: `resolve` exits 8) or the new digest (exit 0)
    promoted = 0
    for variant, digest in digests.items():
        r = _builder(project, "resolve", variant, "--stage", "dev")
        assert r.returncode in (0, 8), r.stderr
        if r.returncode == 0:
            assert r.stdout.strip() == f"{proxy.address}/{unique_repo}@{digest}"
            promoted += 1
    if workers == "1":  # interrupted in the held write itself: it never landed (in parallel,
        assert promoted < len(digests)  # the worker's client may retry the dropped write)
    status = _builder(project, "status", "--json")
    assert status.returncode == 0, status.stderr
    # nothing is left locked or half-done: the same command finishes the job
    again = _builder(project, "promote", "--select", "jax*", "--to", "dev", "--confirm")
    assert again.returncode == 0, again.stderr[-3000:]
    for variant, digest in digests.items():
        r = _builder(project, "resolve", variant, "--stage", "dev")
        assert (r.returncode, r.stdout.strip()) == (0, f"{proxy.address}/{unique_repo}@{digest}"), r.stderr
