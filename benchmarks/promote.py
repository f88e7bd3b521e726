"""Promotion of a 512 MiB image into a stage held in another repository of the same registry,
against ``skopeo copy`` and ``docker pull && docker tag && docker push`` of the same image, all
run by this script; then a batch of 100 variants promoted at once.

Targets (issue 8): ``ms`` under 100 on loopback at any image size; ``batch100_s`` under 5
(issue 19: under 3).

- ``ms``: median over runs of ``builder.promote.promote_many`` of one target with ``confirm``
  (what ``builder promote --confirm`` runs: plan and apply under the stage lock) with a fresh
  registry client, into a new destination repository each run: resolve the source, read and
  verify the source's signatures and attestations against the policy's keys, evaluate the policy
  (``signature`` by the build key), take the stage lock, check the pointer, cross-repository mount
  every blob, PUT the manifest by digest, copy ``.sig``/``.att`` and referrers, sign and attach the
  ``promotion/v1`` record, PUT the stage tag, re-read it, append the ledger row. Policy loading
  and process start-up are not in the figure (once per process).
- ``skopeo_ms``: ``skopeo copy --preserve-digests`` of the same digest into a new repository.
- ``docker_ms``: ``docker pull REF@digest && docker tag && docker push`` into a new repository
  (containerd image store; the local image is removed before and after).
- ``batch100_s``: ``promote_many`` of 100 small signed variants (16 threads) into a new repository.

Source image: ``bench/promote-src:<variant>`` - 4 uncompressed tar layers, each one file of random
bytes (a real image docker can pull), pushed and signed once, reused by later runs.

- ``requests``: registry requests of one promotion (median over the runs; retries and auth
  round trips would count too).

Ends with one line:
``benchmark=promote size_mib=512 ms=.. skopeo_ms=.. docker_ms=.. ratio_skopeo=.. batch100_s=.. batch_cpu_s=..
batch_requests=.. requests=.. batch_registry_cpu_s=.. batch_cpu_floor_s=..`` (``batch_cpu_s``: this
process's CPU time during the batch, which does not move with the machine's load;
``batch_requests``: registry requests per promotion of the batch; ``batch_registry_cpu_s``: the
registry process's CPU time during the batch (``/proc/PID/stat``, the process ``status.py``'s
``registry_pid`` finds: ``BUILDER_REGISTRY_PID``, else the one ``scripts/setup`` started; ``nan``
when unknown); ``batch_cpu_floor_s``: (builder + registry CPU) / CPU count, the least wall time
the batch can take on this machine when the two share its cores, as on a development machine)
(``--quick``: 16 MiB, 2 runs; the batch is still 100 variants; ``--requests``: the batch's requests
per promotion listed by method, path and status before the last line).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.errors import BuilderError
from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import PromotionContext, Target, promote_many
from builder.registry import OCI_MANIFEST, RegistryClient, canonical_json, client_for, sha256_digest
from builder.signing.keys import load_signer, write_key_pair
from builder.signing.sign import sign_image
from tests.projects import build_key_policy

if TYPE_CHECKING:
    from builder.registry.response import Response
    from builder.signing.signer import Signer

LAYERS = 4
SRC_REPO = "bench/promote-src"
TAR = "application/vnd.oci.image.layer.v1.tar"


def tar_of(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def push_image(client: RegistryClient, repo: str, tag: str, layers: list[bytes]) -> str:
    descs = []
    for blob in layers:
        digest = sha256_digest(blob)
        if not client.blob_exists(repo, digest):
            client.put_blob(repo, blob, digest)
        descs.append({"mediaType": TAR, "digest": digest, "size": len(blob)})
    cfg = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {"io.builder.variant": tag}},
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        }
    )
    client.put_blob(repo, cfg)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(cfg),
                "size": len(cfg),
            },
            "layers": descs,
        }
    )
    return client.put_manifest(repo, tag, manifest, OCI_MANIFEST)


def ensure_big(client: RegistryClient, variant: str, size_mib: int) -> str:
    existing = client.try_resolve(SRC_REPO, variant)
    if existing is not None:
        return existing
    per = size_mib * 1024 * 1024 // LAYERS
    layers = [tar_of(f"data{i}.bin", os.urandom(per)) for i in range(LAYERS)]
    return push_image(client, SRC_REPO, variant, layers)


def write_fixed_key_pair(directory: Path) -> tuple[Path, Path]:
    """The fixed benchmark key (private key file, public key file) written into ``directory``: an
    image's .sig keeps one signature however often a benchmark signs it (status.py and
    promote_cli.py use it too)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key, pub, _ = write_key_pair(directory, ec.derive_private_key(20261130, ec.SECP256R1()), None)
    return key, pub


def write_policy(path: Path, pub: Path, dest_prefix: str) -> Path:
    path.write_text(
        build_key_policy(
            pub,
            f"""\
            rel:
              from: build
              repository: "{dest_prefix}/{{repository}}"
              require:
                signature: {{signers: [build]}}
              rollback: {{allowed: [build]}}
            """,
        )
    )
    return path


class Clients:
    """registry host -> one plain-HTTP client each (the loopback registry), kept to count requests.
    ``kinds``: when given, each request the clients send through ``RegistryClient.request`` is
    counted there by (method, path with digests, tags and upload ids named by kind, status)."""

    def __init__(self, kinds: Counter[tuple[str, str, str]] | None = None) -> None:
        self.cache: dict[str, RegistryClient] = {}
        self.kinds = kinds

    def __call__(self, registry: str) -> RegistryClient:
        fresh = registry not in self.cache
        client = client_for(registry, insecure=lambda _registry: True, cache=self.cache)
        if fresh and self.kinds is not None:
            count_kinds(client, self.kinds)
        return client


def request_kind(path: str) -> str:
    """``/v2/<repo>/manifests/sha256-<hex>.sig`` -> ``/v2/<repo>/manifests/<digest>.sig``: the
    digests, upload session ids and query strings of a request path named by kind."""
    path = re.sub(r"^https?://[^/]+", "", path).split("?", 1)[0]
    path = re.sub(r"uploads/[0-9a-f-]{8,}", "uploads/<session>", path)
    path = re.sub(r"sha256[-:][0-9a-f]{64}", "<digest>", path)
    return re.sub(r"p-small-\d+", "<variant>", path)


def count_kinds(client: RegistryClient, kinds: Counter[tuple[str, str, str]]) -> None:
    """Count every request ``client`` sends through ``request`` (what all its operations call;
    auth round trips and retries inside the transport are not seen here, ``requests_sent`` counts
    them) into ``kinds`` by (method, ``request_kind`` of the path, status)."""
    send = client.request
    guard = threading.Lock()

    def counted(method: str, path: str, **kw: Any) -> Response:  # noqa: ANN401 (RegistryClient.request's options)
        try:
            resp = send(method, path, **kw)
        except BuilderError as exc:
            with guard:
                kinds[(method, request_kind(path), str(exc.details.get("status", type(exc).__name__)))] += 1
            raise
        with guard:
            kinds[(method, request_kind(path), str(resp.status_code))] += 1
        return resp

    client.request = counted  # type: ignore[method-assign]


def environment(
    policy: Path, state: Path, registry: str, signer_key: Path, kinds: Counter[tuple[str, str, str]] | None = None
) -> PromotionContext:
    return PromotionContext(
        policy=load_policy(policy),
        registry=registry,
        clients=Clients(kinds),
        lock_dir=state / "locks",
        ledger=open_ledger(state / "ledger.sqlite"),
        signer=load_signer(signer_key, None),
    )


def requests_sent(ctx: PromotionContext) -> int:
    """HTTP requests the context's registry clients sent (each run has its own clients)."""
    clients = ctx.clients
    assert isinstance(clients, Clients)
    return sum(c.requests_sent for c in clients.cache.values())


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return (time.perf_counter() - t) * 1000


def measure_builder(
    setup: RegistryClient, work: Path, state: Path, key: Path, pub: Path, variant: str, digest: str, runs: int
) -> tuple[float, float]:
    """Median ms of a confirmed promotion (plan + apply) over ``runs`` promotions, each into a new
    repository, and the median registry requests each sent (``setup``: the client that pushed the source)."""
    registry = setup.registry
    ours: list[float] = []
    sent: list[int] = []
    for _ in range(runs):
        prefix = f"bench/promote-{uuid.uuid4().hex[:10]}"
        env = environment(write_policy(work / "policy.yaml", pub, prefix), state, registry, key)
        target = Target(variant, SRC_REPO, registry)
        t = time.perf_counter()
        [outcome] = promote_many(env, [target], "rel", confirm=True)  # what `builder promote --confirm` runs
        ours.append((time.perf_counter() - t) * 1000)
        applied = outcome.applied
        assert applied is not None, outcome.to_json()
        sent.append(requests_sent(env))
        dst = f"{prefix}/{SRC_REPO}"
        assert setup.resolve(dst, f"{variant}-rel") == digest
        assert applied.copy is not None and applied.copy.copied == 0, applied.copy
        assert applied.copy.mounted >= LAYERS + 1, applied.copy
    ms = statistics.median(ours)
    reqs = statistics.median(sent)
    print(
        f"builder promote --confirm (promote_many, {LAYERS + 1} mounts): median {ms:.1f} ms "
        f"{[round(x, 1) for x in ours]}, "
        f"{reqs:.0f} registry requests"
    )
    return ms, reqs


def measure_skopeo(skopeo: str, setup: RegistryClient, registry: str, digest: str, runs: int) -> float:
    """Median ms of ``skopeo copy --preserve-digests`` into a new repository over ``runs`` copies."""
    theirs: list[float] = []
    for _ in range(runs):
        dst = f"bench/skopeo-{uuid.uuid4().hex[:10]}"
        theirs.append(
            timed(
                [
                    skopeo,
                    "copy",
                    "--quiet",
                    "--src-tls-verify=false",
                    "--dest-tls-verify=false",
                    "--preserve-digests",
                    f"docker://{registry}/{SRC_REPO}@{digest}",
                    f"docker://{registry}/{dst}:c",
                ]
            )
        )
        assert setup.resolve(dst, "c") == digest
    skopeo_ms = statistics.median(theirs)
    print(f"skopeo copy: median {skopeo_ms:.1f} ms {[round(x, 1) for x in theirs]}")
    return skopeo_ms


def measure_docker(docker: str, registry: str, digest: str) -> float:
    """ms of ``docker pull && docker tag && docker push`` into a new repository (local image removed
    before and after)."""
    src_ref = f"{registry}/{SRC_REPO}@{digest}"
    dst_ref = f"{registry}/bench/docker-{uuid.uuid4().hex[:10]}:c"
    subprocess.run([docker, "image", "rm", "-f", src_ref], capture_output=True)
    try:
        docker_ms = timed([docker, "pull", "-q", src_ref])
        docker_ms += timed([docker, "tag", src_ref, dst_ref])
        docker_ms += timed([docker, "push", "-q", dst_ref])
    finally:
        subprocess.run([docker, "image", "rm", "-f", dst_ref, src_ref], capture_output=True)
    print(f"docker pull && tag && push: {docker_ms:.1f} ms")
    return docker_ms


def registry_cpu(registry: str) -> float:
    """CPU seconds the process serving ``registry`` on this machine has used so far; NaN when it is
    not known (``status.registry_pid``) or there is no ``/proc``."""
    from registry_stream import process_cpu
    from status import registry_pid  # not at import: status.py imports this module

    pid = registry_pid(registry)
    return process_cpu(pid) if pid is not None else float("nan")


def measure_batch(
    setup: RegistryClient, work: Path, state: Path, key: Path, pub: Path, signer: Signer, batch: int, *, kinds: bool
) -> tuple[float, float, float, float]:
    """Seconds, CPU seconds of this process, registry requests per promotion and CPU seconds of the
    registry process (NaN: not known) of one ``promote_many`` (16 threads) of ``batch`` small signed
    variants. ``kinds``: also print the requests per promotion by method, path and status."""
    registry = setup.registry
    targets = []
    t0 = time.perf_counter()
    for i in range(batch):
        v = f"p-small-{i:03d}"
        d = setup.try_resolve(SRC_REPO, v) or push_image(setup, SRC_REPO, v, [tar_of("v.txt", v.encode())])
        sign_image(setup, SRC_REPO, d, signer, lock_dir=state / "locks")
        targets.append(Target(v, SRC_REPO, registry))
    print(f"{batch} small variants ready in {time.perf_counter() - t0:.1f} s")
    prefix = f"bench/batch-{uuid.uuid4().hex[:10]}"
    counted: Counter[tuple[str, str, str]] | None = Counter() if kinds else None
    env = environment(write_policy(work / "policy.yaml", pub, prefix), state, registry, key, counted)
    reg_cpu = registry_cpu(registry)
    t, cpu = time.perf_counter(), time.process_time()
    outcomes = promote_many(env, targets, "rel", confirm=True, workers=16)
    batch_s, batch_cpu = time.perf_counter() - t, time.process_time() - cpu
    reg_cpu = registry_cpu(registry) - reg_cpu
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].to_json()
    if counted is not None:
        print(f"requests per promotion of the batch by kind ({prefix} = <dst>):")
        for (method, path, status), n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {n / batch:6.2f}  {method:<6} {status:<4} {path.replace(prefix, '<dst>')}")
    print(
        f"promote_many of {batch} variants (16 threads): {batch_s:.2f} s, CPU {batch_cpu:.2f} s, "
        f"{requests_sent(env) / batch:.2f} registry requests each, registry CPU {reg_cpu:.2f} s"
    )
    return batch_s, batch_cpu, requests_sent(env) / batch, reg_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="16 MiB, 2 runs (what CI runs)")
    parser.add_argument(
        "--requests",
        action="store_true",
        help="also list the batch's requests per promotion by method, path and status",
    )
    args = parser.parse_args()
    size = 16 if args.quick else args.size_mib
    runs = 2 if args.quick else args.runs
    registry = os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")
    work = Path(tempfile.mkdtemp(prefix="bench-promote-"))
    state = work / "state"
    key, pub = write_fixed_key_pair(state / "keys")
    signer = load_signer(key, None)
    setup = RegistryClient(registry, insecure=True)

    variant = f"p-{size}mib"
    t0 = time.perf_counter()
    digest = ensure_big(setup, variant, size)
    sign_image(setup, SRC_REPO, digest, signer, lock_dir=state / "locks")
    print(f"source {registry}/{SRC_REPO}:{variant} = {digest} ({size} MiB, ready in {time.perf_counter() - t0:.1f} s)")

    ms, reqs = measure_builder(setup, work, state, key, pub, variant, digest, runs)
    skopeo = shutil.which("skopeo")
    docker = shutil.which("docker")
    if skopeo is None or docker is None:
        print("skopeo and docker are needed for the reference figures", file=sys.stderr)
        sys.exit(2)
    # a batch of small variants, each its own signed image; before docker's figure, whose image
    # removal deletes files: on ext4 without a journal (this development VM's root) every file the
    # registry creates in the minute after a deletion scans the recently deleted inodes
    # (`recently_deleted` in https://github.com/torvalds/linux/blob/master/fs/ext4/ialloc.c)
    batch_s, batch_cpu, batch_requests, batch_reg_cpu = measure_batch(
        setup, work, state, key, pub, signer, args.batch, kinds=args.requests
    )
    skopeo_ms = measure_skopeo(skopeo, setup, registry, digest, max(1, runs // 2))
    docker_ms = measure_docker(docker, registry, digest)
    shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)")
    print(
        f"benchmark=promote size_mib={size} ms={ms:.1f} skopeo_ms={skopeo_ms:.1f} docker_ms={docker_ms:.1f} "
        f"ratio_skopeo={skopeo_ms / ms:.1f} batch{args.batch}_s={batch_s:.2f} batch_cpu_s={batch_cpu:.2f} "
        f"batch_requests={batch_requests:.2f} requests={reqs:.0f} batch_registry_cpu_s={batch_reg_cpu:.2f} "
        f"batch_cpu_floor_s={(batch_cpu + batch_reg_cpu) / (os.cpu_count() or 1):.2f}"
    )


if __name__ == "__main__":
    main()
