"""``status`` over many variants (issue 19: 1,000 variants under 3 s, <= 3 registry requests per
variant) against ``cosign verify --key`` of the same images, all run by this script.

Variants: ``bench/status-v2:s-<nnnn>`` (``--repo``) on the loopback registry, each a small image of its own,
signed with the fixed benchmark key of ``benchmarks/promote.py`` and promoted into stage ``dev``
of the same repository (a trusted ``promotion/v1`` record each). Every other variant is in the
stage, so half the rows are empty pointers, as in a real matrix where not every variant is
promoted. Made once and reused by later runs (whatever is already there is not made again).

- ``status_cold_s``: median over rounds of ``builder.promote.status`` of every variant in ``dev``
  with fresh registry clients and an empty verdict cache (``builder.promote.verdict_cache``; policy
  loading and start-up are not in the figure): each row's pointer, its trusted record, its verified
  signatures and attestation types, every layer read and checked.
- ``status_s`` (warm): the same status again over the cache the cold run filled (what every run
  after the first on a machine does): pointers and ``.sig``/``.att`` manifests are read again (tags
  move), layers verified before are not.
- ``requests_per_variant`` (warm) and ``cold_requests_per_variant``: the registry requests of one
  such status divided by the variants; ``cpu_s``/``cold_cpu_s``: the process's CPU time of it
  (``time.process_time``: all threads; load-independent, unlike the wall time).
- ``registry_cpu_s``/``cold_registry_cpu_s``: the registry process's own CPU time during the same
  call (``/proc/PID/stat``; the process named by ``BUILDER_REGISTRY_PID``, else the one
  ``scripts/setup`` started, ``<state dir>/registry.pid``, when it serves the default
  ``127.0.0.1:5000``; ``nan`` when neither is known). On one machine the registry and builder share
  the cores: ``(cpu + registry cpu) / cores`` is the least wall time the call can take, printed as
  ``bound``. A ``GET`` of a blob costs CNCF distribution about three times a manifest request (its
  storage reader allocates a 4 MiB buffer per blob read: ``fileReaderBufferSize``,
  https://github.com/distribution/distribution/blob/main/registry/storage/filereader.go), which is
  what the cold run's record blobs cost the registry.
- ``cosign_ms``: median of ``cosign verify --key`` of one promoted image (the signature check alone,
  one image); ``cosign_all_s``: that times the promoted variants (what checking each image's
  signature with cosign would take), and ``ratio``: ``cosign_all_s / status_s``.

Ends with one line:
``benchmark=status variants=.. status_s=.. requests_per_variant=.. cpu_s=.. status_cold_s=..
cold_requests_per_variant=.. cold_cpu_s=.. cosign_ms=.. cosign_all_s=.. ratio=.. ratio_cold=..
registry_cpu_s=.. cold_registry_cpu_s=..``
(``ratio``: ``cosign_all_s / status_s``, warm; ``ratio_cold``: the same for the cold run)
(``--quick``: 100 variants, 2 rounds; ``--workers N``: ``status`` 's row threads, default its own).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import promote as bench_promote  # the fixed key, the image helpers and the client factory
from registry_stream import process_cpu  # CPU seconds of a process, from /proc

from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import PromotionContext, Target, promote_many, status
from builder.registry import RegistryClient
from builder.signing.keys import load_signer
from builder.signing.sign import sign_image
from tests.projects import build_key_policy

#: records written since #19 (S2) carry their DSSE envelope in the layer's descriptor (no blob read):
#: a new repository, so the variants an earlier version made (records without it) are not reused;
#: ``--repo bench/status-src`` measures those (a record's blob read per promoted row)
REPO = "bench/status-v2"
DEFAULT_REGISTRY = "127.0.0.1:5000"  # what scripts/setup starts (state dir: registry.pid)


def registry_pid(registry: str) -> int | None:
    """The process id of the registry serving ``registry`` on this machine, for its CPU time:
    ``BUILDER_REGISTRY_PID``, else (for the default ``127.0.0.1:5000``) the ``registry.pid`` that
    ``scripts/setup`` writes into the state dir (``BUILDER_STATE_DIR``, default ``.builder``) while
    that process is a registry; None when not known."""
    given = os.environ.get("BUILDER_REGISTRY_PID", "")
    if given.isdigit():
        return int(given)
    if registry != DEFAULT_REGISTRY:
        return None
    state = Path(os.environ.get("BUILDER_STATE_DIR") or Path(__file__).resolve().parents[1] / ".builder")
    try:
        pid = int((state / "registry.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"registry" in cmdline else None


def write_policy(path: Path, pub: Path) -> Path:
    path.write_text(
        build_key_policy(
            pub,
            """\
            dev:
              from: build
              require:
                signature: {signers: [build]}
              rollback: {allowed: [build]}
            """,
        )
    )
    return path


def context(
    policy: Path, state: Path, registry: str, key: Path, cache: Path | None = None
) -> tuple[PromotionContext, bench_promote.Clients]:
    clients = bench_promote.Clients()
    ctx = PromotionContext(
        policy=load_policy(policy),
        registry=registry,
        clients=clients,
        lock_dir=state / "locks",
        ledger=open_ledger(state / "ledger.sqlite"),
        signer=load_signer(key, None),
        cache_dir=cache,
        seen_dir=cache / "seen" if cache is not None else None,  # as <state_dir>/seen: written cold, read warm
    )
    return ctx, clients


def measure(
    policy: Path,
    work: Path,
    registry: str,
    key: Path,
    cache: Path,
    targets: list[Target],
    promoted: int,
    *,
    workers: int | None = None,
    pid: int | None = None,
) -> tuple[float, float, int, float]:
    """One ``status`` of ``targets`` in dev over the verdict cache ``cache`` (``workers``: its row
    threads, None: its default): wall s, CPU s, requests, and the CPU s of the registry process
    ``pid`` meanwhile (NaN when None)."""
    ctx, clients = context(policy, work, registry, key, cache)
    threads = {} if workers is None else {"workers": workers}
    before = process_cpu(pid) if pid is not None else float("nan")
    t, c = time.perf_counter(), time.process_time()
    rows = status(ctx, targets, ["dev"], **threads)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    served = (process_cpu(pid) if pid is not None else float("nan")) - before
    assert sum(1 for r in rows if r.digest and r.signatures >= 1 and r.action == "promote") == promoted
    return wall, cpu, sum(c.requests_sent for c in clients.cache.values()), served


def prepare(setup: RegistryClient, ctx: PromotionContext, n: int, key: Path, repo: str) -> list[Target]:
    """The ``n`` variants, made (pushed, signed, every other one promoted to dev) where missing."""
    have = set(setup.list_tags(repo))
    signer = load_signer(key, None)
    targets = [Target(f"s-{i:04d}", repo, setup.registry) for i in range(n)]
    t0 = time.perf_counter()
    for t in targets:
        if t.variant not in have:
            d = bench_promote.push_image(setup, repo, t.variant, [bench_promote.tar_of("v.txt", t.variant.encode())])
            sign_image(setup, repo, d, signer, lock_dir=ctx.lock_dir)
    todo = [t for i, t in enumerate(targets) if i % 2 == 0 and f"{t.variant}-dev" not in have]
    if todo:
        failed = [o for o in promote_many(ctx, todo, "dev", confirm=True) if not o.ok]
        assert not failed, failed[0].to_json()
    print(f"{n} variants ready in {time.perf_counter() - t0:.1f} s ({len(todo)} promoted now)")
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100 variants, 2 rounds")
    parser.add_argument("--workers", type=int, default=None, help="status's row threads (default: its own)")
    parser.add_argument("--repo", default=REPO, help=f"the variants' repository (default {REPO})")
    args = parser.parse_args()
    n, rounds = (100, 2) if args.quick else (args.variants, args.rounds)
    cosign = shutil.which("cosign")
    if cosign is None:
        sys.exit("cosign is not installed: cannot measure the reference")
    registry = os.environ.get("BUILDER_REGISTRY", DEFAULT_REGISTRY)
    pid = registry_pid(registry)
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        work = Path(tmp)
        key, pub = bench_promote.write_fixed_key_pair(work / "keys")
        policy = write_policy(work / "policy.yaml", pub)
        setup = RegistryClient(registry, insecure=True)
        ctx, _ = context(policy, work, registry, key)
        targets = prepare(setup, ctx, n, key, args.repo)
        promoted = sum(1 for i in range(n) if i % 2 == 0)
        cold: list[tuple[float, float, int, float]] = []
        warm: list[tuple[float, float, int, float]] = []
        theirs: list[float] = []
        first = f"{registry}/{args.repo}:{targets[0].variant}-dev"
        verify = [cosign, "verify", "--key", str(pub), "--insecure-ignore-tlog", "--allow-insecure-registry"]
        verify += ["--allow-http-registry", "--output", "text", first]
        for i in range(rounds):
            cache = work / f"cache-{i}"  # empty: the cold run fills it, the warm run reads it
            for runs in (cold, warm):
                runs.append(
                    measure(policy, work, registry, key, cache, targets, promoted, workers=args.workers, pid=pid)
                )
            t = time.perf_counter()
            proc = subprocess.run(verify, capture_output=True, text=True, env={**os.environ, "COSIGN_YES": "true"})
            theirs.append((time.perf_counter() - t) * 1000)
            if proc.returncode != 0:
                sys.exit(f"cosign verify failed: {proc.stderr[-1500:]}")
        med = {
            name: [statistics.median(r[k] for r in runs) for k in range(4)]
            for name, runs in (("cold", cold), ("warm", warm))
        }
        cosign_ms = statistics.median(theirs)
        cosign_all = cosign_ms * promoted / 1000
        for name, runs in (("cold", cold), ("warm", warm)):
            wall, cpu, sent, served = med[name]
            each = [round(r[0], 2) for r in runs]
            how = "empty verdict cache" if name == "cold" else "the cold run's verdict cache"
            print(f"builder status of {n} variants ({promoted} in dev), {name} ({how}): median {wall:.2f} s {each}")
            print(f"  CPU {cpu:.2f} s, {sent / n:.2f} registry requests per variant ({sent:.0f} in all)")
            if pid is not None:
                cores = os.cpu_count() or 1
                print(
                    f"  registry process CPU {served:.2f} s ({served / sent * 1000:.2f} ms per request); bound: "
                    f"(builder + registry CPU) / {cores} cores = {(cpu + served) / cores:.2f} s"
                )
        print(f"cosign verify of one image: median {cosign_ms:.0f} ms; x {promoted} promoted = {cosign_all:.1f} s")
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} CPUs, load average {load} (1/5/15 min)")
        (cold_s, cold_cpu, cold_sent, cold_reg), (warm_s, warm_cpu, warm_sent, warm_reg) = med["cold"], med["warm"]
        print(
            f"benchmark=status variants={n} status_s={warm_s:.2f} requests_per_variant={warm_sent / n:.2f} "
            f"cpu_s={warm_cpu:.2f} status_cold_s={cold_s:.2f} cold_requests_per_variant={cold_sent / n:.2f} "
            f"cold_cpu_s={cold_cpu:.2f} cosign_ms={cosign_ms:.0f} cosign_all_s={cosign_all:.1f} "
            f"ratio={cosign_all / warm_s:.1f} ratio_cold={cosign_all / cold_s:.1f} registry_cpu_s={warm_reg:.2f} "
            f"cold_registry_cpu_s={cold_reg:.2f}"
        )


if __name__ == "__main__":
    main()
