"""Transient registry faults: every registry call of builder goes through tests/faultproxy.py, a
real HTTP proxy in front of the real registry that answers 500 for a while, 429 with
Retry-After, loses answers (the registry acted, the client hears nothing) or drops connections
before forwarding. With retries, a registry copy, ``builder promote`` of many variants sharing
a layer into a new repository and ``builder sign`` complete without user action; without retries
(or beyond their budget) the error is the registry's, with its exit code.

Retry counts and backoff are kept small through ``RegistryClient(retries=, backoff=,
max_delay=)`` and ``BUILDER_REGISTRY_RETRIES`` / ``BUILDER_REGISTRY_BACKOFF_MS`` /
``BUILDER_REGISTRY_MAX_DELAY_MS``; the tests never sleep.
"""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.build.plan import BuildOptions
from builder.build.run import build_variants
from builder.errors import NotFoundError, RegistryError, RegistryUnavailableError
from builder.registry import CopyStats, RegistryClient, copy_image, verify_complete
from builder.registry.auth import Authenticator
from builder.registry.transport import Transport
from tests.faultproxy import Fault, FaultProxy
from tests.integration.test_promote_support import make_keys, push_image, tar_layer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from builder.models import RenderedImage
    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

VARIANTS = 100  # images sharing one layer (the issue: promote 100 variants through faults)
RETRIES = 8
BACKOFF_MS = 10
MAX_DELAY_MS = 200

#: fault kind -> a rule injecting it into a ``share`` of requests, ``count`` times at most
#: (a fresh rule per test: rules count their hits); 500s for 0.3 s after the first request
FAULTS: dict[str, Callable[[float, int], Fault]] = {
    "500-for-a-while": lambda _share, _count: Fault("status", status=500, seconds=0.3),
    "429-retry-after": lambda share, count: Fault("status", status=429, retry_after="1", share=share, count=count),
    "lost-responses": lambda share, count: Fault("lose", share=share, count=count),
    "dropped-connections": lambda share, count: Fault("drop", share=share, count=count),
}


@pytest.fixture
def proxy(registry_address: str) -> Iterator[FaultProxy]:
    with FaultProxy(registry_address) as p:
        yield p


def faulty_client(proxy: FaultProxy, retries: int = RETRIES) -> RegistryClient:
    return RegistryClient(
        proxy.address, insecure=True, retries=retries, backoff=BACKOFF_MS / 1000, max_delay=MAX_DELAY_MS / 1000
    )


@pytest.fixture(scope="module")
def variants(registry_address: str) -> tuple[str, list[tuple[str, str]]]:
    """``VARIANTS`` small images in one new repository, each a shared layer plus its own:
    (repository, [(variant id, digest)])."""
    client = RegistryClient(registry_address, insecure=True)
    repo = f"test/faults-{uuid.uuid4().hex[:10]}"
    shared = tar_layer({"shared.bin": os.urandom(4096)})
    out = []
    for i in range(VARIANTS):
        vid = f"jax0.7-cpu-py3.11-debian12-v{i:03d}"
        own = tar_layer({"own.txt": f"variant {i}".encode()})
        out.append((vid, push_image(client, repo, vid, layers=[shared, own])))
    return repo, out


# -- the client ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_registry_copy_completes_through_each_fault(
    kind: str, proxy: FaultProxy, variants: tuple[str, list[tuple[str, str]]], registry_address: str
) -> None:
    repo, images = variants
    dest = f"test/faults-copy-{uuid.uuid4().hex[:10]}"
    client = faulty_client(proxy)
    proxy.add(FAULTS[kind](0.2, 40))
    stats = CopyStats()
    for vid, digest in images[:12]:
        assert copy_image(client, repo, digest, client, dest, tag=vid, stats=stats) == digest
    assert proxy.injected() > 0  # the faults happened
    direct = RegistryClient(registry_address, insecure=True)
    for vid, digest in images[:12]:
        assert direct.resolve(dest, vid) == digest
        assert verify_complete(direct, dest, digest) == []


@pytest.mark.parametrize("kind", ["lost-responses", "dropped-connections", "500-for-a-while"])
def test_blob_uploads_survive_each_fault(kind: str, proxy: FaultProxy, registry_address: str, unique_repo: str) -> None:
    client = faulty_client(proxy)
    proxy.add(
        Fault("lose", method="PUT", path="/blobs/uploads/", count=3)
        if kind == "lost-responses"
        else Fault("drop", method="PUT", path="/blobs/uploads/", count=3)
        if kind == "dropped-connections"
        else Fault("status", status=500, method="PUT", path="/blobs/uploads/", seconds=0.3)
    )
    data = os.urandom(200_000)
    digest = client.put_blob(unique_repo, data)
    assert proxy.injected() >= 1
    assert RegistryClient(registry_address, insecure=True).get_blob(unique_repo, digest) == data


def test_a_lost_upload_answer_is_rechecked_not_reported_as_not_found(proxy: FaultProxy, unique_repo: str) -> None:
    # the registry stored the blob; the retried PUT finds its session spent (404 BLOB_UPLOAD_UNKNOWN)
    client = faulty_client(proxy)
    proxy.add(Fault("lose", method="PUT", path="/blobs/uploads/", count=1))
    data = os.urandom(1000)
    digest = client.put_blob(unique_repo, data)
    outcomes = [(s.method, s.outcome, s.status) for s in proxy.seen]
    assert ("PUT", "lose", 201) in outcomes  # stored upstream, answer lost
    assert ("HEAD", "forwarded", 200) in outcomes  # re-checked with a HEAD of the blob
    assert client.get_blob(unique_repo, digest) == data


def test_a_mount_that_did_not_stick_is_repaired(
    proxy: FaultProxy, variants: tuple[str, list[tuple[str, str]]], registry_address: str
) -> None:
    # the proxy answers 201 Created to mounts without forwarding them: the manifest PUT gets
    # MANIFEST_BLOB_UNKNOWN, the missing blobs are copied, the PUT repeated
    repo, images = variants
    dest = f"test/faults-mount-{uuid.uuid4().hex[:10]}"
    client = faulty_client(proxy)
    proxy.add(Fault("status", status=201, method="POST", path="mount=", count=2))
    vid, digest = images[0]
    stats = CopyStats()
    copy_image(client, repo, digest, client, dest, tag=vid, stats=stats)
    assert stats.copied >= 1
    assert any(s.method == "PUT" and "/manifests/" in s.path and s.status == 400 for s in proxy.seen)
    assert verify_complete(RegistryClient(registry_address, insecure=True), dest, digest) == []


def test_without_retries_the_error_is_the_registrys(
    proxy: FaultProxy, variants: tuple[str, list[tuple[str, str]]]
) -> None:
    repo, images = variants
    _vid, digest = images[0]
    client = faulty_client(proxy, retries=0)
    proxy.add(Fault("status", status=503, count=1))
    with pytest.raises(RegistryUnavailableError) as err:  # unavailable (5), said on the first attempt
        client.get_manifest(repo, digest)
    assert err.value.exit_code == 5 and "HTTP 503" in err.value.message and "on 1 attempt" in err.value.message
    proxy.add(Fault("drop", count=1))
    with pytest.raises(RegistryUnavailableError) as gone:
        client.get_manifest(repo, digest)
    assert gone.value.exit_code == 5
    proxy.add(Fault("lose", count=1))
    with pytest.raises(RegistryUnavailableError) as lost:  # a lost answer is not "not found"
        client.resolve(repo, digest)
    assert lost.value.exit_code == 5


def test_beyond_the_retry_budget_the_error_names_the_status(
    proxy: FaultProxy, variants: tuple[str, list[tuple[str, str]]]
) -> None:
    repo, images = variants
    client = faulty_client(proxy, retries=3)
    proxy.add(Fault("status", status=429, retry_after="1"))
    with pytest.raises(RegistryUnavailableError) as err:
        client.resolve(repo, images[0][1])
    assert err.value.exit_code == 5 and "HTTP 429" in err.value.message and "rate-limits" in err.value.message
    assert "4 attempts over " in err.value.message and "registry_retries" in err.value.hint
    assert proxy.injected("status") == 4  # the first attempt and 3 retries


def test_retry_after_is_honoured_and_capped() -> None:
    t = Transport("127.0.0.1:1", Authenticator("127.0.0.1:1", None), backoff=0.01, max_delay=5.0)
    assert t.delay(1, "3") == 3.0  # the registry's Retry-After wins over a shorter backoff
    assert t.delay(1, "120") == 5.0  # capped
    assert 0.01 <= t.delay(1, None) <= 0.0125  # backoff with up to 25 % jitter
    assert 0.08 <= t.delay(4, None) <= 0.1  # doubled per attempt
    assert t.delay(1, "Wed, 21 Oct 2015 07:28:00 GMT") <= 0.0125  # an HTTP date is not honoured


# -- the commands ----------------------------------------------------------------------------


def _project(root: Path, registry: str, dest_prefix: str) -> Path:
    root.mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "matrices").mkdir()
    keys = make_keys(root / "state")
    (root / "policies" / "default.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            keys:
              build:
                - file: {keys.pub("build")}
              promoters:
                - file: {keys.pub("build")}
            promoters: [promoters]
            stages:
              dev:
                from: build
                repository: "{dest_prefix}/{{repository}}"
                require:
                  unconditional: dev takes every build
            """
        )
    )
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\nkey = "{keys.key("build")}"\n')
    return root


def _env(project: Path, retries: int = RETRIES) -> dict[str, str]:
    return {
        "HOME": str(project),
        "BUILDER_REGISTRY_RETRIES": str(retries),
        "BUILDER_REGISTRY_BACKOFF_MS": str(BACKOFF_MS),
        "BUILDER_REGISTRY_MAX_DELAY_MS": str(MAX_DELAY_MS),
    }


def _promote(cli: Cli, project: Path, proxy: FaultProxy, refs: list[str], code: int, retries: int) -> CliResult:
    return cli(
        "promote", *refs, "--to", "dev", "--confirm", "--json", code=code, env=_env(project, retries), cwd=project
    )


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_promote_of_many_variants_completes_through_each_fault(
    kind: str,
    cli: Cli,
    tmp_path: Path,
    proxy: FaultProxy,
    variants: tuple[str, list[tuple[str, str]]],
    registry_address: str,
) -> None:
    repo, images = variants
    prefix = f"faults-{uuid.uuid4().hex[:8]}"
    project = _project(tmp_path / "p", proxy.address, prefix)
    refs = [f"{proxy.address}/{repo}:{vid}" for vid, _ in images]
    proxy.add(FAULTS[kind](0.2, 60))
    out = _promote(cli, project, proxy, refs, 0, RETRIES).json()
    assert proxy.injected() > 0
    assert len(out["results"]) == VARIANTS and all(r["applied"] for r in out["results"])
    direct = RegistryClient(registry_address, insecure=True)
    for vid, digest in images:
        assert direct.resolve(f"{prefix}/{repo}", f"{vid}-dev") == digest
        assert verify_complete(direct, f"{prefix}/{repo}", digest) == []


@pytest.mark.parametrize(("fault", "code"), [(Fault("status", status=500), 7), (Fault("drop"), 5)])
def test_promote_without_retries_fails_with_the_registrys_error(
    fault: Fault,
    code: int,
    cli: Cli,
    tmp_path: Path,
    proxy: FaultProxy,
    variants: tuple[str, list[tuple[str, str]]],
) -> None:
    repo, images = variants
    project = _project(tmp_path / "p", proxy.address, f"faults-{uuid.uuid4().hex[:8]}")
    proxy.add(fault)
    result = _promote(cli, project, proxy, [f"{proxy.address}/{repo}:{images[0][0]}"], code, 0)
    err = result.json()["error"]
    assert proxy.address in err["message"]
    assert ("HTTP 500" in err["message"]) if code == 7 else ("not reachable" in err["message"])


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_sign_completes_through_each_fault(
    kind: str,
    cli: Cli,
    tmp_path: Path,
    proxy: FaultProxy,
    variants: tuple[str, list[tuple[str, str]]],
    registry_address: str,
) -> None:
    repo, images = variants
    project = _project(tmp_path / "p", proxy.address, "unused")
    key = project / "state" / "keys" / "build" / "builder.key"
    vid, digest = images[sorted(FAULTS).index(kind)]
    proxy.add(FAULTS[kind](1.0, 3))  # the first three requests fail
    out = cli("sign", f"{proxy.address}/{repo}:{vid}", "--key", str(key), "--json", env=_env(project), cwd=project)
    assert digest in out.stdout
    assert proxy.injected() > 0
    verified = cli(
        "verify",
        f"{registry_address}/{repo}@{digest}",
        "--key",
        str(project / "state" / "keys" / "build" / "builder.pub"),
        "--json",
        env=_env(project),
        cwd=project,
    )
    assert verified.code == 0


# -- the build's push (BuildKit pushes itself, through the proxy) -----------------------------


def _rendered(repo: str, mirror_base: str) -> RenderedImage:
    from tests.integration.test_build import make_rendered

    return make_rendered(
        "tiny-faults", repo, mirror_base, f"COPY hello.txt /hello.txt\nRUN echo {uuid.uuid4().hex} > /which"
    )


def test_build_pushes_again_after_a_transient_push_failure(
    docker_engine: str, mirror_base: str, proxy: FaultProxy, unique_repo: str, tmp_path: Path, registry_address: str
) -> None:
    rendered = _rendered(unique_repo, mirror_base)
    # the pending tag's manifest PUT answers 503 four times: BuildKit (0.2x) sends it once and
    # retries it three times itself, so its push fails; builder runs the build again, which pushes
    proxy.add(Fault("status", status=503, method="PUT", path="/manifests/pending-", count=4))
    options = BuildOptions(registry=proxy.address, state_dir=tmp_path / "s", source_date_epoch=0, push_attempts=3)
    run = build_variants([rendered], options, client=faulty_client(proxy))
    built = run.results[0]
    assert built.status == "built", built.error
    log = Path(built.log_path or "").read_text()
    assert proxy.injected("status") == 4
    assert "pushing again, run 2 of 3" in log and "HTTP 503" in log
    assert verify_complete(RegistryClient(registry_address, insecure=True), unique_repo, built.digest) == []


@pytest.mark.parametrize(
    ("fault", "kind", "text"),
    [
        (
            Fault("status", status=503, method="HEAD", path="/blobs/"),
            RegistryError,
            "answered HTTP 503 during the push",
        ),
        (Fault("drop", method="HEAD", path="/blobs/"), RegistryUnavailableError, "not reachable during the push"),
    ],
)
def test_a_push_failing_beyond_its_attempts_is_the_registrys_error(
    fault: Fault,
    kind: type[RegistryError | RegistryUnavailableError],
    text: str,
    docker_engine: str,
    mirror_base: str,
    proxy: FaultProxy,
    unique_repo: str,
    tmp_path: Path,
) -> None:
    rendered = _rendered(unique_repo, mirror_base)
    proxy.add(fault)
    options = BuildOptions(registry=proxy.address, state_dir=tmp_path / "s", source_date_epoch=0, push_attempts=2)
    try:
        run = build_variants([rendered], options, client=faulty_client(proxy))
    except RegistryUnavailableError as exc:  # every variant failed for the registry: raised as such
        assert kind is RegistryUnavailableError and text in exc.message
        assert "Docker daemon is not reachable" not in exc.message
        return
    built = run.results[0]
    assert built.status == "failed" and (built.error or "").startswith(f"{kind.kind}: ")
    assert text in (built.error or "") and proxy.address in (built.error or "")
    assert "Docker daemon is not reachable" not in (built.error or "")
    assert "pushing again, run 2 of 2" in Path(built.log_path or "").read_text()


def test_a_lost_delete_answer_is_success_not_not_found(
    proxy: FaultProxy, registry_address: str, unique_repo: str
) -> None:
    direct = RegistryClient(registry_address, insecure=True)
    digest = push_image(direct, unique_repo, "gone", content=b"to delete")
    client = faulty_client(proxy)
    proxy.add(Fault("lose", method="DELETE", count=1))
    client.delete_manifest(unique_repo, digest)  # deleted upstream; the retry's 404 is success
    assert [(s.method, s.outcome, s.status) for s in proxy.seen] == [
        ("DELETE", "lose", 202),
        ("DELETE", "forwarded", 404),
    ]
    assert direct.try_resolve(unique_repo, digest) is None
    with pytest.raises(NotFoundError):  # without a lost answer, a 404 is still "not found"
        client.delete_manifest(unique_repo, digest)
