"""Multi-device checks of JAX in the image: per-process device binding, oversubscription (two ranks on
one device), device ordering, and all-reduce bus bandwidth (busbw) measured through the framework's
collectives (NCCL on NVIDIA GPUs, RCCL on AMD, gloo on the CPU).

Sent on stdin to the image's python by ``builder check``; stdlib + jax only. The launcher (this program
without arguments) starts one process per rank (BUILDER_COLLECTIVE_RANKS, default: one per visible GPU,
2 on a host without GPUs), each bound to one device: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES=<index>
on GPUs, the CPU set of BUILDER_COLLECTIVE_BIND (``0,1``: rank 0 on CPU 0, rank 1 on CPU 1) on the
CPU. BUILDER_COLLECTIVE_BIND=0,0 puts both ranks on device 0 on purpose: the check must say so.

busbw = algbw * 2 (n - 1) / n for an all-reduce over n ranks, algbw = bytes / time: the definition of
nccl-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md#allreduce), so the
number compares with the link bandwidth of the topology. When the image ships nccl-tests' (or
rccl-tests') ``all_reduce_perf``, its output is passed on too (``nccl_tests_output``). Output: one
``builder.collective {...}`` line.
"""

import json
import os
import shutil
import socket
import subprocess
import sys


def visible_gpus():
    """(vendor, [(index, pci bus id, name)]) of the GPUs the container sees, nvidia-smi / rocm-smi order."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,pci.bus_id,name", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        ).stdout
        rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
        return "nvidia", [(int(r[0]), r[1], r[2]) for r in rows if len(r) >= 3 and r[0].isdigit()]
    if os.path.exists("/dev/kfd") and shutil.which("rocm-smi"):
        out = subprocess.run(["rocm-smi", "--showbus", "--csv"], capture_output=True, text=True, check=False).stdout
        rows = [line.split(",") for line in out.splitlines()[1:] if line.startswith("card")]
        return "amd", [(int(r[0][4:]), r[1].strip(), "") for r in rows if len(r) >= 2]
    return "none", []


def launch():
    vendor, gpus = visible_gpus()
    ranks = int(os.environ.get("BUILDER_COLLECTIVE_RANKS") or (len(gpus) if gpus else 2))
    bind = (os.environ.get("BUILDER_COLLECTIVE_BIND") or "").split(",") if os.environ.get("BUILDER_COLLECTIVE_BIND") else None
    if bind is None:
        bind = [str(r) for r in range(ranks)] if gpus else [str(r % (os.cpu_count() or 1)) for r in range(ranks)]
    if len(bind) != ranks:
        return {"ok": False, "error": f"BUILDER_COLLECTIVE_BIND names {len(bind)} devices for {ranks} ranks"}
    if ranks < 2:
        return {"ok": False, "error": f"a collective needs 2 ranks or more, {ranks} visible", "vendor": vendor}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, BUILDER_RANK=str(rank), BUILDER_WORLD=str(ranks), BUILDER_PORT=str(port),
                   BUILDER_BIND=bind[rank], BUILDER_VENDOR=vendor)
        if vendor == "nvidia":
            # CUDA's default order (FASTEST_FIRST) can differ from nvidia-smi's (PCI bus order): bind
            # by bus order so index i is nvidia-smi's GPU i, the one the topology describes
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = bind[rank]
        elif vendor == "amd":
            env["HIP_VISIBLE_DEVICES"] = bind[rank]
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results, errors = [], []
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=float(os.environ.get("BUILDER_COLLECTIVE_TIMEOUT") or 300))
        line = next((ln for ln in out.splitlines() if ln.startswith("{")), None)
        if p.returncode != 0 or line is None:
            errors.append(f"rank {rank} exited {p.returncode}: {err.strip()[-800:]}")
        else:
            results.append(json.loads(line))
    doc = {"ok": not errors, "vendor": vendor, "ranks": ranks, "errors": errors}
    if errors:
        return doc
    results.sort(key=lambda r: r["rank"])
    identities = [r["device"] for r in results]
    shared = sorted({d for d in identities if identities.count(d) > 1})
    order = os.environ.get("CUDA_DEVICE_ORDER") or ("FASTEST_FIRST (default)" if vendor == "nvidia" else None)
    bus_order = [b for _, b, _ in gpus]
    if vendor == "nvidia" and order != "PCI_BUS_ID":
        doc.setdefault("warnings", []).append(
            f"CUDA_DEVICE_ORDER is {order} in the image: CUDA device i may not be nvidia-smi's GPU i; "
            "the ranks were bound with CUDA_DEVICE_ORDER=PCI_BUS_ID"
        )
    doc.update({
        "backend": results[0]["backend"],
        "ranks_detail": [{k: r[k] for k in ("rank", "device", "bind", "cpus", "platform", "kind")} for r in results],
        "oversubscribed": shared,
        "device_order": {"cuda_device_order": order, "bound_by": "PCI_BUS_ID" if vendor == "nvidia" else None,
                         "bus_ids": bus_order, "pci_bus_order": bus_order == sorted(bus_order)},
        "allreduce_correct": all(r["correct"] for r in results),
        "rows": results[0]["rows"],
        "busbw_gbps": max(row["busbw_gbps"] for row in results[0]["rows"]),
    })
    doc["ok"] = doc["allreduce_correct"] and not shared
    perf = shutil.which("all_reduce_perf") if vendor != "none" else None
    if perf:  # the image ships nccl-tests / rccl-tests: its own table, parsed by builder (nccl_tests.py)
        run = subprocess.run([perf, "-b", "8M", "-e", "256M", "-f", "2", "-g", str(ranks)],
                             capture_output=True, text=True, check=False, timeout=600)
        doc["nccl_tests_output"] = (run.stdout + run.stderr)[-20000:]
    return doc


#: the program each rank runs (python -c): this launcher arrives on stdin, so it cannot re-read itself
WORKER = r'''
import json, os, time

SIZES = [int(x) for x in (os.environ.get("BUILDER_COLLECTIVE_SIZES") or "65536,1048576,8388608").split(",")]
ITERS = int(os.environ.get("BUILDER_COLLECTIVE_ITERS") or 5)


def worker():
    rank, world = int(os.environ["BUILDER_RANK"]), int(os.environ["BUILDER_WORLD"])
    vendor, bind = os.environ["BUILDER_VENDOR"], os.environ["BUILDER_BIND"]
    if vendor == "none":
        os.sched_setaffinity(0, {int(bind)})  # per-process binding on the CPU
    import jax

    if vendor == "none":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{os.environ['BUILDER_PORT']}", num_processes=world, process_id=rank)
    import jax.numpy as jnp

    dev = jax.local_devices()[0]
    # what this rank is bound to: the physical GPU (the index it was given), or its CPU set
    device = f"{vendor}:{bind}" if vendor != "none" else "cpu:" + ",".join(map(str, sorted(os.sched_getaffinity(0))))
    n_local = jax.local_device_count()
    reduce = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")
    check = reduce(jnp.full((n_local, 8), float(rank + 1)))
    want = world * (world + 1) / 2
    correct = bool(jnp.all(check == want))
    rows = []
    for size in SIZES:
        x = jnp.ones((n_local, size // 4), dtype=jnp.float32)
        reduce(x).block_until_ready()
        start = time.perf_counter()
        for _ in range(ITERS):
            y = reduce(x)
        y.block_until_ready()
        t = (time.perf_counter() - start) / ITERS
        algbw = size / t / 1e9
        rows.append({"size_bytes": size, "time_us": round(t * 1e6, 2), "algbw_gbps": round(algbw, 4),
                     "busbw_gbps": round(algbw * 2 * (world - 1) / world, 4)})
    backend = {"none": "gloo", "nvidia": "nccl", "amd": "rccl"}[vendor]
    print(json.dumps({"rank": rank, "device": device, "bind": bind, "cpus": sorted(os.sched_getaffinity(0)),
                      "platform": dev.platform, "kind": dev.device_kind, "correct": correct, "rows": rows,
                      "backend": backend}), flush=True)
    jax.distributed.shutdown()


worker()
'''


if __name__ == "__main__":
    print("builder.collective " + json.dumps(launch()), flush=True)
