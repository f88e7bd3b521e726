"""What one registry request costs builder's client, against the floor (issue 19, "fewer requests").

Sends N manifest HEADs (``Accept`` as ``RegistryClient.resolve`` sends it) and N small blob GETs
(1 KiB, body read) to the registry (BUILDER_REGISTRY, default 127.0.0.1:5000), side by side in the
same run, interleaved for several rounds (each client first in turn, after an untimed warm-up
round of one request each):

- builder: ``RegistryClient.resolve`` and ``RegistryClient.request("GET", blob)`` on one client
  (its keep-alive pool), in a worker process: client CPU (user + system of the process, imports
  excluded) and wall time;
- http.client: the same requests on one ``http.client.HTTPConnection`` (the floor of Python HTTP:
  no pool, no headers object, no retries; ``TCP_NODELAY`` set as urllib3 and curl set it), in a
  worker process the same way;
- urllib3: the same requests on one ``urllib3.HTTPConnectionPool`` (``urlopen`` with the path,
  retries off): the library builder's transport used for every registry before #19 round 8 and
  now only through a proxy; a registry reached directly is spoken to with ``http.client``
  (builder/registry/connections.py), so ``ratio_httpclient`` is what builder's own layer
  (pool, retries, auth, errors, redirects) adds to its floor;
- curl: one ``curl`` process for the N URLs (``curl -s -I URL URL ...`` for the HEADs, then one
  for the GETs; ``--config`` lists the URLs), CPU from ``getrusage(RUSAGE_CHILDREN)``;
- ``--baseline DIR``: builder's client imported from another checkout (e.g. ``git archive`` of the
  requests-based transport) as a fourth column.

Prints, per client, CPU ms per request and requests per second (medians over the rounds), and the
ratios ``cpu_ratio_*`` = builder CPU per request / that peer's. Wall-clock figures move with the
machine's load; CPU per request is the figure to compare. The last line:
``benchmark=registry_requests n=.. builder_cpu_ms=.. httpclient_cpu_ms=.. urllib3_cpu_ms=..
curl_cpu_ms=.. ratio_httpclient=.. ratio_urllib3=.. ratio_curl=.. builder_rps=.. ...`` (plus
``baseline_cpu_ms=.. ratio_baseline=..`` with ``--baseline``). ``--quick``: N=50, one round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCEPT = (
    "application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json,"
    "application/vnd.docker.distribution.manifest.list.v2+json,"
    "application/vnd.docker.distribution.manifest.v2+json"
)


def _registry() -> str:
    return os.environ.get("BUILDER_REGISTRY", "127.0.0.1:5000")


def setup(registry: str, root: Path) -> tuple[str, str, str]:
    """Push a 1 KiB blob and a manifest naming it; returns (repository, tag, blob digest)."""
    sys.path.insert(0, str(root))
    from builder.registry import RegistryClient

    client = RegistryClient(registry, insecure=True)
    repo = f"bench/requests-{uuid.uuid4().hex[:8]}"
    blob = os.urandom(1024)
    digest = client.put_blob(repo, blob)
    config = b"{}"
    config_digest = client.put_blob(repo, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": digest, "size": len(blob)}],
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    client.put_manifest(repo, "bench", raw, "application/vnd.oci.image.manifest.v1+json")
    return repo, "bench", digest


def worker(kind: str, registry: str, repo: str, tag: str, digest: str, n: int) -> dict[str, float]:
    """Run the 2N requests in this process with ``kind``'s client; CPU and wall seconds."""
    if kind == "httpclient":
        import http.client
        import socket

        conn = http.client.HTTPConnection(registry)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as urllib3 and curl do

        def head() -> None:
            conn.request("HEAD", f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
            r = conn.getresponse()
            r.read()
            assert r.status == 200 and r.getheader("Docker-Content-Digest"), r.status

        def get() -> None:
            conn.request("GET", f"/v2/{repo}/blobs/{digest}")
            r = conn.getresponse()
            assert len(r.read()) == 1024 and r.status == 200

    elif kind == "urllib3":
        import urllib3

        host, _, port = registry.rpartition(":")
        pool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1)

        def head() -> None:
            r = pool.urlopen("HEAD", f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT}, retries=False)
            assert r.status == 200 and r.headers.get("Docker-Content-Digest"), r.status

        def get() -> None:
            r = pool.urlopen("GET", f"/v2/{repo}/blobs/{digest}", retries=False)
            assert len(r.data) == 1024 and r.status == 200

    else:
        from builder.registry import RegistryClient

        client = RegistryClient(registry, insecure=True)

        def head() -> None:
            assert client.resolve(repo, tag).startswith("sha256:")

        def get() -> None:
            body = client.request("GET", f"/v2/{repo}/blobs/{digest}", ref=f"{repo}@{digest}").content
            assert len(body) == 1024

    head()  # the connection opened (and, for builder, the environment resolved) before timing
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        head()
    for _ in range(n):
        get()
    return {"cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - t0}


def run_worker(kind: str, root: Path, registry: str, repo: str, tag: str, digest: str, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--registry", registry, "--n", str(n), repo, tag, digest],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_curl(registry: str, repo: str, tag: str, digest: str, n: int) -> dict[str, float]:
    """One curl process for the N HEADs, one for the N GETs; their CPU and wall seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        heads, gets = Path(tmp, "heads"), Path(tmp, "gets")
        url_m = f"http://{registry}/v2/{repo}/manifests/{tag}"
        url_b = f"http://{registry}/v2/{repo}/blobs/{digest}"
        heads.write_text(f'header = "Accept: {ACCEPT}"\nhead\n' + f'url = "{url_m}"\noutput = "/dev/null"\n' * n)
        gets.write_text(f'url = "{url_b}"\noutput = "/dev/null"\n' * n)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        for cfg in (heads, gets):
            subprocess.run(["curl", "-sf", "--config", str(cfg)], check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="N=50, one round (a smoke run)")
    ap.add_argument("--n", type=int, default=1000, help="manifest HEADs and as many blob GETs per client and round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians are printed)")
    ap.add_argument("--registry", default=_registry(), help="host:port of a plain-HTTP registry")
    ap.add_argument("--baseline", type=Path, help="another checkout whose builder client is measured too")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        repo, tag, digest = a.args
        print(json.dumps(worker(a.worker, a.registry, repo, tag, digest, a.n)))
        return
    n, rounds = (50, 1) if a.quick else (a.n, a.rounds)
    repo, tag, digest = setup(a.registry, ROOT)
    kinds: dict[str, object] = {"builder": ROOT, "httpclient": ROOT, "urllib3": ROOT}
    if a.baseline is not None:
        kinds["baseline"] = a.baseline.resolve()
    if shutil.which("curl"):
        kinds["curl"] = None
    got: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    run_worker("httpclient", ROOT, a.registry, repo, tag, digest, 1)  # the registry warmed up, untimed
    names = list(kinds)
    for r in range(rounds):
        for kind in names[r % len(names) :] + names[: r % len(names)]:  # each client first in turn
            root = kinds[kind]
            if kind == "curl":
                got[kind].append(run_curl(a.registry, repo, tag, digest, n))
            else:
                worker_kind = "builder" if kind == "baseline" else kind
                got[kind].append(run_worker(worker_kind, Path(str(root)), a.registry, repo, tag, digest, n))
    reqs = 2 * n
    cpu_ms = {k: statistics.median(r["cpu_s"] for r in v) * 1000 / reqs for k, v in got.items()}
    rps = {k: reqs / statistics.median(r["wall_s"] for r in v) for k, v in got.items()}
    print(f"{n} manifest HEADs + {n} blob GETs (1 KiB) per client, {rounds} round(s), registry {a.registry}")
    for k in kinds:
        print(f"  {k:<11} {cpu_ms[k]:7.3f} CPU ms/request {rps[k]:8.0f} requests/s")
    figures = {"n": str(n)}
    for k in kinds:
        figures[f"{k}_cpu_ms"] = f"{cpu_ms[k]:.3f}"
    for k in kinds:
        if k != "builder":
            figures[f"ratio_{k}"] = f"{cpu_ms['builder'] / cpu_ms[k]:.2f}"
    for k in kinds:
        figures[f"{k}_rps"] = f"{rps[k]:.0f}"
    print("benchmark=registry_requests " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
