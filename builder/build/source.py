"""Facts about the build's source: the git commit and its time (for provenance and ``SOURCE_DATE_EPOCH``).

``SOURCE_DATE_EPOCH``: https://reproducible-builds.org/specs/source-date-epoch/ (BuildKit passes it
through: https://docs.docker.com/build/ci/github-actions/reproducible-builds/).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit(root: Path) -> str | None:
    """``git rev-parse HEAD`` of ``root`` (None outside a git work tree)."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def git_commit_time(root: Path) -> int | None:
    """Commit time of HEAD in seconds since the epoch (for ``SOURCE_DATE_EPOCH``), or None."""
    proc = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=False
    )
    text = proc.stdout.strip()
    return int(text) if proc.returncode == 0 and text.isdigit() else None
