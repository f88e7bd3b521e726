"""Per-variant dependency locks: ``locks/<variant-id>.txt``, exact versions with hashes.

A lock is produced by ``uv pip compile --generate-hashes`` for the variant's Python version and
platform (``--python-version``, ``--python-platform <arch>-manylinux_<glibc of the OS>``) against
the variant's index (``Variant.index_url``, PyPI when None). Images install it with
``pip install --require-hashes``; its text is part of the content hash, so the same content tag
means the same Python packages.

Each lock starts with a header that records the inputs it was resolved for; ``read_lock``
compares them with the variant now, so a changed package list makes the lock ``stale`` (and the
render ``unpinned``) instead of silently installing old pins.

Variants whose index cannot be reached from this machine (e.g. the PyTorch CUDA/ROCm indexes on
machines that reach only PyPI) stay without a lock: ``builder lock`` reports them as
``unresolved``, ``RenderedImage.unpinned`` names them and builds refuse them
(``UnpinnedBaseError``) until the lock is made where the index is reachable and committed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from builder import process
from builder.compat.distros import OS_GLIBC

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from builder.models import Variant

LOCK_HEADER = "# builder lock"
LockStatus = Literal["locked", "missing", "stale", "not-needed"]


def lock_name(variant: Variant) -> str:
    """The lock file's name in the locks folder: ``<variant-id>.txt``."""
    return f"{variant.id}.txt"


def lock_path(locks_dir: Path, variant: Variant) -> Path:
    """``<locks_dir>/<variant-id>.txt``."""
    return (locks_dir if isinstance(locks_dir, Path) else Path(locks_dir)) / lock_name(variant)


def python_platform(variant: Variant) -> str:
    """uv's ``--python-platform`` for the variant: ``x86_64-manylinux_2_39`` / ``aarch64-manylinux_2_36``."""
    arch = "aarch64" if variant.platform == "linux/arm64" else "x86_64"
    return f"{arch}-manylinux_{OS_GLIBC.get(variant.os, '2_28')}"


def lock_inputs(variant: Variant) -> dict[str, object]:
    """What a lock depends on: packages, Python, platform target, index."""
    return {
        "packages": list(variant.packages),
        "python": variant.python,
        "python_platform": python_platform(variant),
        "index_url": variant.index_url,
    }


def inputs_digest(variant: Variant) -> str:
    """sha256 (hex, 16 chars) of ``lock_inputs``; recorded in the lock header."""
    text = json.dumps(lock_inputs(variant), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def header(variant: Variant) -> str:
    """The deterministic header written above uv's output."""
    inputs = lock_inputs(variant)
    lines = [
        f"{LOCK_HEADER} for {variant.id} (inputs {inputs_digest(variant)}); regenerate with `builder lock`",
        f"# python {inputs['python']}, platform {inputs['python_platform']}, index {variant.index_url or 'PyPI'}",
        "# requirements: " + "; ".join(variant.packages),
    ]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class LockState:
    """A variant's lock as found on disk. ``text`` is the whole file (None when missing)."""

    variant_id: str
    path: Path
    status: LockStatus
    text: str | None
    reason: str = ""


def read_lock(variant: Variant, locks_dir: Path, *, existing: frozenset[str] | None = None) -> LockState:
    """Find and check the variant's lock. ``not-needed`` when the variant has no packages;
    ``stale`` when the header's inputs differ from the variant's now. ``existing``: the file names
    in ``locks_dir`` when the caller already listed it (saves one failed open per missing lock)."""
    name = lock_name(variant)
    path = lock_path(locks_dir, variant)
    if not variant.packages:
        return LockState(variant.id, path, "not-needed", "")
    try:
        if existing is not None and name not in existing:
            raise FileNotFoundError(path)
        text = path.read_text()
    except FileNotFoundError:
        return LockState(
            variant.id,
            path,
            "missing",
            None,
            f"no dependency lock {path.name} (run `builder lock --select {variant.id}` where "
            f"{variant.index_url or 'PyPI'} is reachable, and commit it)",
        )
    first = text.split("\n", 1)[0]
    if f"(inputs {inputs_digest(variant)})" not in first:
        return LockState(
            variant.id,
            path,
            "stale",
            text,
            f"dependency lock {path.name} was resolved for other requirements "
            f"(run `builder lock --select {variant.id}`)",
        )
    return LockState(variant.id, path, "locked", text)


class LockResolveError(Exception):
    """uv could not resolve a variant's requirements (message: uv's stderr tail)."""


def uv_command(variant: Variant, uv: str) -> list[str]:
    """The uv command line that resolves ``variant`` (requirements on stdin, lock on stdout)."""
    cmd = [
        uv,
        "pip",
        "compile",
        "-",
        "--generate-hashes",
        "--no-header",
        "--no-annotate",
        "--quiet",
        "--no-progress",
        "--native-tls",
        "--python-version",
        variant.python,
        "--python-platform",
        python_platform(variant),
    ]
    if variant.index_url:
        cmd += ["--index-url", variant.index_url]
    return cmd


def resolve(
    variant: Variant,
    *,
    uv: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
) -> str:
    """Run uv and return the full lock text (header + pins with hashes). Raises LockResolveError."""
    cmd = uv_command(variant, uv)
    try:
        proc = process.run(cmd, input="\n".join(variant.packages) + "\n", timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise LockResolveError(f"uv timed out after {timeout:.0f} s") from exc
    except FileNotFoundError as exc:
        raise LockResolveError(f"uv not found at {uv}") from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise LockResolveError(tail or f"uv exited {proc.returncode}")
    return header(variant) + proc.stdout


def find_uv() -> str:
    """The ``uv`` to run: the one on ``PATH``, else the one next to this Python (a virtual environment's)."""
    import shutil
    import sys

    return shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


#: what ``builder lock`` did for one variant
LockOutcome = Literal["written", "up-to-date", "not-needed", "unresolved"]


class LockResultDocument(TypedDict):
    """One variant in ``builder lock --json``: its id, what was done (``status``), the lock file, the
    seconds uv took (2 decimals) and, for ``unresolved``, uv's error."""

    id: str
    status: LockOutcome
    path: str
    seconds: float
    error: str | None


#: ``builder lock --json``: one entry per selected variant
LockDocument = list[LockResultDocument]


@dataclasses.dataclass(frozen=True)
class LockResult:
    """Outcome for one variant: ``written`` | ``up-to-date`` | ``not-needed`` | ``unresolved``."""

    variant_id: str
    status: LockOutcome
    path: str
    seconds: float = 0.0
    error: str | None = None

    def to_json(self) -> LockResultDocument:
        return {
            "id": self.variant_id,
            "status": self.status,
            "path": self.path,
            "seconds": round(self.seconds, 2),
            "error": self.error,
        }


def lock_variants(
    variants: Sequence[Variant],
    locks_dir: Path,
    *,
    uv: str,
    env: Mapping[str, str] | None = None,
    upgrade: bool = False,
    timeout: float = 300.0,
) -> tuple[LockResult, ...]:
    """Resolve each variant's lock into ``locks_dir`` (skipping current ones unless ``upgrade``).

    An index that failed once in this run is not retried for other variants (their result says
    so), so unreachable indexes cost one timeout, not one per variant. Never raises for a
    variant that cannot be resolved: it is reported ``unresolved`` and its old lock is kept.
    """
    locks_dir.mkdir(parents=True, exist_ok=True)
    failed_index: dict[str, str] = {}
    results: list[LockResult] = []
    for v in variants:
        state = read_lock(v, locks_dir)
        rel = str(state.path)
        if state.status == "not-needed":
            results.append(LockResult(v.id, "not-needed", rel))
            continue
        if state.status == "locked" and not upgrade:
            results.append(LockResult(v.id, "up-to-date", rel))
            continue
        index = v.index_url or "PyPI"
        if index in failed_index:
            results.append(LockResult(v.id, "unresolved", rel, error=f"{index}: {failed_index[index]}"))
            continue
        start = time.perf_counter()
        try:
            text = resolve(v, uv=uv, env=env, timeout=timeout)
        except LockResolveError as exc:
            msg = str(exc)
            if "connect" in msg.lower() or "dns" in msg.lower() or "timed out" in msg.lower():
                failed_index[index] = msg.splitlines()[-1] if msg else "unreachable"
            results.append(LockResult(v.id, "unresolved", rel, time.perf_counter() - start, msg))
            continue
        state.path.write_text(text)
        results.append(LockResult(v.id, "written", rel, time.perf_counter() - start))
    return tuple(results)
