"""builder.engine.stale_build_cache on real BuildKit output: the failure a killed build leaves in
BuildKit's cache (recorded on this project's CI machine, Docker Engine 26.1.5, docker driver: a rerun
reused the killed build's cache record and its export found the snapshot gone) and the one quoted in
https://github.com/moby/buildkit/issues/1956; and the failures that are the Dockerfile's or the
registry's (recorded here with `docker buildx build --progress plain`), which a build without the cache
would not cure."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.engine import stale_build_cache

DATA = Path(__file__).resolve().parents[1] / "data" / "buildkit"

#: moby/buildkit#1956 (docker buildx bake, overlay2): persisted until a build with --no-cache
MUTABLE_REF = (
    "failed to solve: rpc error: code = Unknown desc = error committing 5yhgjt88cnwecs2gtanqos715: invalid mutable "
    "ref 0xc002a652c0: invalid: executor failed running [/bin/bash -c poetry install --no-root --no-dev -E style]: "
    "stat /var/lib/docker/overlay2/5yhgjt88cnwecs2gtanqos715: no such file or directory"
)


def test_a_snapshot_gone_from_the_cache_is_stale_cache() -> None:
    assert stale_build_cache((DATA / "stale-snapshot-export.txt").read_text())
    assert stale_build_cache(MUTABLE_REF)


@pytest.mark.parametrize("recorded", ["copy-source-missing.txt", "run-exit-3.txt", "base-tag-not-found.txt"])
def test_the_dockerfiles_and_the_registrys_failures_are_not(recorded: str) -> None:
    """A missing COPY source and a missing base tag also end in "not found", a RUN in its exit code."""
    assert not stale_build_cache((DATA / recorded).read_text())


def test_a_run_step_printing_about_snapshots_is_not_stale_cache() -> None:
    """Only BuildKit's own error lines count: a RUN step's output (a backup tool's "snapshot ... not
    found", a path under overlay2) followed by its non-zero exit is the Dockerfile's failure."""
    recorded = (DATA / "run-exit-3.txt").read_text()
    printed = (
        "#5 0.412 zfs: snapshot tank/data@nightly not found\n"
        "#5 0.413 stat /var/lib/docker/overlay2/x: no such file or directory\n"
    )
    assert not stale_build_cache(printed + recorded)
