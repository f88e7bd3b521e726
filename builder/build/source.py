"""Facts about the build's source: the git commit and its time (for provenance and ``SOURCE_DATE_EPOCH``).

``SOURCE_DATE_EPOCH``: https://reproducible-builds.org/specs/source-date-epoch/ (BuildKit passes it
through: https://docs.docker.com/build/ci/github-actions/reproducible-builds/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder import process

if TYPE_CHECKING:
    from pathlib import Path


def _git(root: Path, *args: str) -> str | None:
    """stdout of ``git -C root ARGS`` (stripped), None when git fails or is not installed."""
    try:
        proc = process.run(["git", "-C", str(root), *args], timeout=60)
    except FileNotFoundError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_commit(root: Path) -> str | None:
    """``git rev-parse HEAD`` of ``root`` (None outside a git work tree or without git)."""
    return _git(root, "rev-parse", "HEAD") or None


def git_commit_time(root: Path) -> int | None:
    """Commit time of HEAD in seconds since the epoch (for ``SOURCE_DATE_EPOCH``), or None."""
    text = _git(root, "log", "-1", "--format=%ct") or ""
    return int(text) if text.isdigit() else None


def git_remote_url(root: Path, remote: str = "origin") -> str | None:
    """``git remote get-url REMOTE`` of ``root`` as written (None without that remote or git)."""
    return _git(root, "remote", "get-url", remote) or None
