"""Rendered Dockerfiles read as BuildKit reads them, for the layer-sharing test and benchmark."""

from __future__ import annotations


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions (continuation lines ending in ``\\`` joined, comments and blank lines
    dropped; https://docs.docker.com/reference/dockerfile/#format)."""
    out: list[str] = []
    pending = ""
    for line in dockerfile.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            out.append(pending.strip())
            pending = ""
    return out
