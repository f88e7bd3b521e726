"""Every external command builder runs (docker, git, uv, credential helpers, nvidia-smi, ...)
goes through this module, so each one is logged before it runs (house style of cibuildwheel:
``builder --debug`` echoes every external command) and fails the same way.

The core never prints: each command is logged on the ``builder.process`` logger at DEBUG level
as ``+ argv`` (shell-quoted); the command line decides whether and where that is shown.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections import deque
from typing import TYPE_CHECKING, Literal, overload

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

LOG = logging.getLogger("builder.process")


def announce(argv: Sequence[str]) -> None:
    """Log ``argv`` as the next external command (``+ docker buildx build ...``)."""
    LOG.debug("+ %s", shlex.join(str(a) for a in argv))


@overload
def run(
    argv: Sequence[str],
    *,
    input: str | None = ...,
    text: Literal[True] = ...,
    timeout: float | None = ...,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    input: bytes | None = ...,
    text: Literal[False],
    timeout: float | None = ...,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    input: str | bytes | None = None,
    text: bool = True,
    timeout: float | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run ``argv`` to completion with stdout and stderr captured; never raises on a non-zero
    exit (the caller classifies it).

    Raises ``FileNotFoundError`` when the program is not installed and
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the child is killed)."""
    argv = [str(a) for a in argv]
    announce(argv)
    return subprocess.run(
        argv,
        input=input,
        capture_output=True,
        text=text,
        timeout=timeout,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        check=False,
    )


def stream(
    argv: Sequence[str],
    *,
    on_line: Callable[[str], None],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    keep: int = 40,
) -> tuple[int, tuple[str, ...]]:
    """Run ``argv`` with stdout and stderr merged, passing each output line (without its newline)
    to ``on_line`` as it arrives; memory stays bounded however long the output.

    Returns ``(exit status, the last `keep` lines)``. Raises ``FileNotFoundError`` when the
    program is not installed. If the caller is interrupted (KeyboardInterrupt, SystemExit from a
    signal handler), the child is terminated before the exception propagates: no orphaned work."""
    argv = [str(a) for a in argv]
    announce(argv)
    tail: deque[str] = deque(maxlen=keep)
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        cwd=cwd,
        env=dict(env) if env is not None else None,
    ) as proc:
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                tail.append(line)
                on_line(line)
            return proc.wait(), tuple(tail)
        except BaseException:
            terminate(proc)
            raise


def terminate(proc: subprocess.Popen[str], grace: float = 10.0) -> None:
    """Stop a child: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
