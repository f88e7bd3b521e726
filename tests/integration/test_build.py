"""Builds on the real engine and registry: push, no-op reruns, selective rebuilds, write-once
content tags, a killed build, unpinned inputs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.build.plan import BuildOptions
from builder.build.results import raise_for_failures
from builder.build.run import build_variants
from builder.build.tags import publish_content_tag
from builder.errors import TagConflictError, UnpinnedBaseError
from builder.models import Accelerator, BaseImage, Framework, RenderedImage, Variant
from builder.registry import RegistryClient, platform_names, verify_complete

ROOT = Path(__file__).resolve().parents[2]


def make_rendered(vid: str, repo: str, mirror_base: str, body: str, *, unpinned: tuple[str, ...] = ()) -> RenderedImage:
    """A RenderedImage as builder.render produces it (ARG BASE_IMAGE / FROM ${BASE_IMAGE})."""
    digest = mirror_base.split("@", 1)[1]
    base = BaseImage("mirror:debian:bookworm", digest, mirror_base)
    variant = Variant(
        id=vid,
        matrix="tiny",
        family="tiny",
        repository=repo,
        accelerator=Accelerator("cpu"),
        framework=Framework("none", "0"),
        python="3.11",
        os="debian12",
        platform="linux/amd64",
        base=base,
    )
    dockerfile = f"ARG BASE_IMAGE=debian:bookworm\nFROM ${{BASE_IMAGE}}\n{body}\n"
    context = (("hello.txt", f"hello from {vid}\n".encode()),)
    h = hashlib.sha256(json.dumps([vid, dockerfile, digest, [c[0] for c in context]]).encode()).hexdigest()
    return RenderedImage(
        variant=variant,
        dockerfile=dockerfile,
        context=context,
        content_hash=h,
        labels=(("io.builder.variant", vid), ("io.builder.content-hash", h)),
        build_args=(("BASE_IMAGE", mirror_base),),
        unpinned=unpinned,
    )


@pytest.fixture
def client(registry_address: str) -> RegistryClient:
    return RegistryClient(registry_address, insecure=True)


def _options(registry: str, state: Path, **kw: object) -> BuildOptions:
    return BuildOptions(registry=registry, state_dir=state, workers=2, source_date_epoch=0, **kw)  # type: ignore[arg-type]


def test_build_push_noop_and_selective_rebuild(
    docker_engine: str,
    registry_address: str,
    mirror_base: str,
    unique_repo: str,
    client: RegistryClient,
    tmp_path: Path,
) -> None:
    a = make_rendered("tiny-a", unique_repo, mirror_base, "COPY hello.txt /hello.txt\nRUN echo a > /which")
    b = make_rendered("tiny-b", unique_repo, mirror_base, "COPY hello.txt /hello.txt\nRUN echo b > /which")
    events: list[tuple[str, str]] = []
    hooked: list[str] = []
    run = build_variants(
        [a, b],
        _options(registry_address, tmp_path / "s1"),
        client=client,
        on_progress=lambda v, e, _d: events.append((v, e)),
        on_built=lambda built, rendered: hooked.append(f"{rendered.variant.id}@{built.digest}"),
    )
    assert [r.status for r in run.results] == ["built", "built"], [r.error for r in run.results]
    for r, rendered in zip(run.results, (a, b), strict=True):
        assert r.reference == f"{registry_address}/{unique_repo}"
        assert client.resolve(unique_repo, rendered.content_tag) == r.digest  # digest the registry returns
        assert client.resolve(unique_repo, rendered.variant.id) == r.digest  # moving variant tag
        assert verify_complete(client, unique_repo, r.digest) == []
        assert r.platforms == ("linux/amd64",)
        assert r.log_path and "exporting" in Path(r.log_path).read_text().lower()
    assert sorted(hooked) == sorted(f"{r.variant_id}@{r.digest}" for r in run.results)
    assert ("tiny-a", "building") in events and ("tiny-b", "built") in events
    index = client.get_manifest(unique_repo, run.results[0].digest)
    if index.is_index:  # buildx with the containerd store writes an index + attestation manifest
        assert platform_names(index) == ("linux/amd64",)

    # no-op from an empty state directory: registry look-ups only, nothing built, no logs written
    fresh = tmp_path / "fresh"
    again = build_variants([a, b], _options(registry_address, fresh), client=client, engine_ping=_no_engine)
    assert [r.status for r in again.results] == ["up-to-date", "up-to-date"]
    assert [r.digest for r in again.results] == [r.digest for r in run.results]
    assert not (fresh / "logs").exists()

    # change one template: only that variant is rebuilt
    a2 = make_rendered("tiny-a", unique_repo, mirror_base, "COPY hello.txt /hello.txt\nRUN echo a2 > /which")
    third = build_variants([a2, b], _options(registry_address, tmp_path / "s3"), client=client)
    assert [r.status for r in third.results] == ["built", "up-to-date"]
    assert third.results[0].digest != run.results[0].digest
    assert client.resolve(unique_repo, "tiny-a") == third.results[0].digest  # variant tag moved
    assert client.resolve(unique_repo, a.content_tag) == run.results[0].digest  # old content tag kept

    # revert the change in a checkout that did not push the first image (no push record, no key to
    # check a signature by): the variant tag is not moved back to a digest it cannot vouch for
    refused = build_variants([a, b], _options(registry_address, tmp_path / "s4"), client=client, engine_ping=_no_engine)
    assert [r.status for r in refused.results] == ["failed", "up-to-date"]
    error = refused.results[0].error or ""
    assert error.startswith("tag-conflict:") and "did not push" in error, error
    assert client.resolve(unique_repo, "tiny-a") == third.results[0].digest

    # revert the change where the first image was pushed: nothing is built, the variant tag goes back
    events.clear()
    reverted = build_variants(
        [a, b],
        _options(registry_address, tmp_path / "s1"),
        client=client,
        engine_ping=_no_engine,
        on_progress=lambda v, e, _d: events.append((v, e)),
    )
    assert [r.status for r in reverted.results] == ["up-to-date", "up-to-date"]
    assert ("tiny-a", "retagged") in events and ("tiny-b", "retagged") not in events
    assert client.resolve(unique_repo, "tiny-a") == run.results[0].digest


def _no_engine() -> None:
    raise AssertionError("a no-op run must not touch the engine")


def test_content_tag_collision_with_other_digest_is_refused(
    docker_engine: str,
    registry_address: str,
    mirror_base: str,
    unique_repo: str,
    client: RegistryClient,
    tmp_path: Path,
) -> None:
    r = make_rendered("tiny-rand", unique_repo, mirror_base, "RUN head -c 32 /dev/urandom > /random")
    first = build_variants([r], _options(registry_address, tmp_path / "a"), client=client)
    assert first.results[0].status == "built"
    original = first.results[0].digest
    # same inputs rebuilt without cache: a different image (random bytes); the tag must not move
    second = build_variants([r], _options(registry_address, tmp_path / "b", rebuild=True, no_cache=True), client=client)
    res = second.results[0]
    assert res.status == "failed"
    assert res.error is not None and res.error.startswith("tag-conflict:")
    assert res.digest and res.digest != original
    assert client.resolve(unique_repo, r.content_tag) == original
    assert "FAILED" in Path(res.log_path or "").read_text()
    # the primitive itself: refuses, names both digests
    with pytest.raises(TagConflictError) as err:
        publish_content_tag(client, unique_repo, r.content_tag, res.digest)
    assert original in err.value.message and res.digest in err.value.message
    assert publish_content_tag(client, unique_repo, r.content_tag, original) is False  # same digest: fine


def test_unpinned_inputs_are_left_out_and_listed(
    registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path
) -> None:
    """An unpinned variant is never built: nothing else to build means no engine is needed, and the
    run lists it (exit 13 with the run's summary)."""
    r = make_rendered("tiny-u", unique_repo, mirror_base, "RUN true", unpinned=("base x is not pinned",))
    client = RegistryClient(registry_address, insecure=True)
    run = build_variants([r], _options(registry_address, tmp_path), client=client, engine_ping=_no_engine)
    assert run.results == () and [u.variant.id for u in run.unpinned] == ["tiny-u"]
    assert client.try_resolve(unique_repo, r.content_tag) is None
    with pytest.raises(UnpinnedBaseError) as err:
        raise_for_failures(run)
    assert "tiny-u: base x is not pinned" in err.value.message
    assert err.value.details["summary"]["unpinned"] == [{"variant": "tiny-u", "reasons": ["base x is not pinned"]}]


KILL_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.integration.test_build import make_rendered
from builder.build.plan import BuildOptions
from builder.build.run import build_variants
from builder.registry import RegistryClient
r = make_rendered("tiny-slow", {repo!r}, {base!r}, {body!r})
run = build_variants([r], BuildOptions(registry={reg!r}, state_dir=Path({state!r}), source_date_epoch=0),
                     client=RegistryClient({reg!r}, insecure=True))
print(json.dumps([[x.status, x.error] for x in run.results]))
"""


def test_killed_build_leaves_no_content_tag(
    docker_engine: str,
    registry_address: str,
    mirror_base: str,
    unique_repo: str,
    client: RegistryClient,
    tmp_path: Path,
) -> None:
    from tests.integration.test_build import make_rendered as mk

    script = tmp_path / "slow.py"
    state = tmp_path / "state"
    body = f"RUN echo {unique_repo} > /uncached && sleep 6 && echo done > /done"  # never in BuildKit's cache
    script.write_text(
        KILL_SCRIPT.format(
            root=str(ROOT), repo=unique_repo, base=mirror_base, reg=registry_address, state=str(state), body=body
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, cwd=ROOT)
    log = state / "logs" / "tiny-slow.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and "sleep 6" in log.read_text()):
        time.sleep(0.2)
    assert log.exists(), "the build never started"
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGKILL)  # kill the whole build (builder and its buildx child)
    proc.wait(timeout=10)
    content_tag = mk("tiny-slow", unique_repo, mirror_base, body).content_tag
    time.sleep(1.0)
    assert client.try_resolve(unique_repo, content_tag) is None
    # BuildKit runs the killed client's step on (its RUN process is visible here) and a rerun
    # started meanwhile attaches to that same vertex while its cancellation is under way: wait for
    # it to end, so the rerun is a rerun (what attaches to a dying vertex is BuildKit's behaviour)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and subprocess.run(["pgrep", "-f", f"echo {unique_repo} "]).returncode == 0:
        time.sleep(0.2)
    # a rerun completes and then the content tag names a complete image (when it reuses the killed
    # build's cache record and BuildKit's export finds that snapshot gone, builder builds it again
    # without the cache: test_a_stale_buildkit_cache_is_built_again_without_it)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [(status, error)] = json.loads(done.stdout.strip().splitlines()[-1])
    assert (status, error) == ("built", None), (state / "logs" / "tiny-slow.log").read_text()[-3000:]
    digest = client.resolve(unique_repo, content_tag)
    assert verify_complete(client, unique_repo, digest) == []


def test_a_stale_buildkit_cache_is_built_again_without_it(
    docker_engine: str,
    registry_address: str,
    mirror_base: str,
    unique_repo: str,
    client: RegistryClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BuildKit's cache naming a snapshot it no longer has (what a rerun met after a killed build: the
    output recorded then is replayed by a `docker` in front of the real one for every build that may use
    the cache) is built once more with ``--no-cache`` through the real engine: the variant is built and
    complete, and its log says why. A Dockerfile's own failure is not built twice."""
    import shutil

    recorded = ROOT / "tests" / "data" / "buildkit" / "stale-snapshot-export.txt"
    calls = tmp_path / "builds"
    docker = tmp_path / "docker"
    docker.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" buildx build "*)\n'
        f'  echo "$*" >> "{calls}"\n'
        f'  case " $* " in *" --no-cache "*) ;; *) cat "{recorded}"; exit 1;; esac;;\n'
        "esac\n"
        f'exec "{shutil.which("docker")}" "$@"\n'
    )
    docker.chmod(0o755)
    monkeypatch.setenv("BUILDER_DOCKER", str(docker))
    r = make_rendered("tiny-stale", unique_repo, mirror_base, "RUN echo stale > /which")
    [built] = build_variants([r], _options(registry_address, tmp_path / "a"), client=client).results
    log = Path(built.log_path or "").read_text()
    assert (built.status, built.error) == ("built", None), log[-3000:]
    assert "building again without the cache (--no-cache)" in log
    assert ["--no-cache" in line for line in calls.read_text().splitlines()] == [False, True]
    assert verify_complete(client, unique_repo, client.resolve(unique_repo, r.content_tag)) == []

    monkeypatch.delenv("BUILDER_DOCKER")
    broken = make_rendered("tiny-exit", unique_repo, mirror_base, "RUN exit 3")
    [failed] = build_variants([broken], _options(registry_address, tmp_path / "b"), client=client).results
    assert failed.status == "failed" and failed.error is not None and "exit code: 3" in failed.error
    assert "--no-cache" not in Path(failed.log_path or "").read_text()
