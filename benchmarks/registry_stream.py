"""Cross-registry copy of one image (every blob streamed from one registry to another), builder
against oras, skopeo, crane (when installed) and a curl upload floor, interleaved round by round.

Targets (issue 19, "Must show"): throughput >= 0.9x ``oras cp`` in the same run; builder's peak
memory <= 128 MiB for a 512 MiB image (4 x 128 MiB layers), a 2 GiB image (4 x 512 MiB) and
16 x 48 MiB layers.

Each copy runs in a fresh process into a **fresh destination registry** (a new CNCF distribution
process with empty storage on its own port, started before the clock and stopped after), so no
tool can mount or skip a blob another run left behind (skopeo remembers blob locations per
registry in its blob-info cache). The source is one more registry process, filled once.

- ``builder``: ``python -c`` running ``builder.registry.copy_image`` between two
  ``RegistryClient``s (the blob copy every cross-registry promotion uses:
  ``RegistryClient.copy_blob_from``, ``copy_streams`` at once); it imports
  ``builder.promote.apply`` as ``builder promote`` does, so its time and memory include the
  promotion's modules (not the policy evaluation, signing and record of a full promotion), and
  skips the interpreter's closing garbage collection as builder's console entry point does
  (``builder.cli.main``). It reports its CPU split: start-up (interpreter and imports) and the copy.
- ``b@N`` (with ``--streams N,..``): builder again with ``copy_streams`` N (blobs streamed at once).
- ``oras``: ``oras cp --from-plain-http --to-plain-http SRC@digest DST:copied``.
- ``skopeo``: ``skopeo copy --preserve-digests`` (TLS verification off for loopback).
- ``crane``: ``crane copy --insecure`` (skipped when not installed).
- ``curl``: the upload floor: every layer file already on disk, ``POST`` + ``PUT -T FILE`` (streamed from the file)
  per blob, all blobs at once (one curl per blob), no download at all.

Wall time, peak resident memory (GNU ``time`` ``%M`` of each process), CPU time (user + system)
and the destination registry's CPU time during the copy (``/proc``) per run; medians per tool;
ratios against oras; and the CPU hashlib's sha256 takes for the image's bytes here (builder checks
the digest of every byte it streams; oras leaves that to the registry: its user CPU stays near
zero). On a 2-core machine the client and both registries share the cores, so these CPU figures,
unlike wall time, say where a copy's time goes whatever else runs. Every copy is verified: the
destination tag resolves to the source digest.

Ends with one line per image and a summary line:
``benchmark=registry-stream image=512MiB builder_mibs=.. builder_rss_mib=.. builder_cpu_s=..
builder_startup_cpu_s=.. builder_copy_cpu_s=.. sha256_cpu_s=.. oras_mibs=.. oras_cpu_s=.. ratio_oras=..``
(``--quick``: a 16 MiB image, 1 round).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.registry import OCI_MANIFEST, RegistryClient, canonical_json
from tests.registries import free_port, wait_for_port

if TYPE_CHECKING:
    from collections.abc import Iterator

MIB = 1024 * 1024
#: image name -> (layers, MiB per layer)
IMAGES = {"512MiB": (4, 128), "2GiB": (4, 512), "16x48MiB": (16, 48)}
QUICK = {"16MiB": (4, 4)}

BUILDER_CHILD = """
import atexit, gc, sys, time
atexit.register(gc.freeze)  # no closing garbage collection, as builder's console entry point
import builder.promote.apply  # what `builder promote` imports besides the registry client
from builder.registry import CopyStats, RegistryClient, copy_image
imported = time.process_time()
src_host, dst_host, repo, digest, streams = sys.argv[1:6]
src = RegistryClient(src_host, insecure=True)
dst = RegistryClient(dst_host, insecure=True, **({"copy_streams": int(streams)} if streams != "0" else {}))
stats = CopyStats()
copy_image(src, repo, digest, dst, repo, tag="copied", stats=stats)
assert stats.copied >= 1, stats
print(f"cpu-split {imported:.3f} {time.process_time() - imported:.3f}", file=sys.stderr)
"""


#: ``127.0.0.1:PORT`` -> process id of each registry :func:`registry` runs (for its CPU time)
REGISTRY_PIDS: dict[str, int] = {}


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux ``/proc/PID/stat`` fields
    14 and 15, in clock ticks: https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html); NaN
    where there is no ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def registry(root: Path) -> Iterator[str]:
    """A CNCF distribution process with empty storage under ``root``; yields ``127.0.0.1:PORT``
    (its process id in :data:`REGISTRY_PIDS` while it runs)."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        sys.exit("docker-registry is not installed: run `bash scripts/setup`")
    port = free_port()
    root.mkdir(parents=True)
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        try:
            wait_for_port(port, proc)
        except RuntimeError as exc:
            sys.exit(f"registry under {root} did not start: {exc}")
        REGISTRY_PIDS[f"127.0.0.1:{port}"] = proc.pid
        yield f"127.0.0.1:{port}"
    finally:
        REGISTRY_PIDS.pop(f"127.0.0.1:{port}", None)
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def make_layers(directory: Path, layers: int, mib: int) -> list[Path]:
    """``layers`` files of ``mib`` MiB of random bytes (written in 8 MiB pieces)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(layers):
        path = directory / f"layer{i}"
        with path.open("wb") as f:
            for _ in range(0, mib, 8):
                f.write(os.urandom(min(8, mib) * MIB))
        paths.append(path)
    return paths


def file_digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        while piece := f.read(8 * MIB):
            h.update(piece)
    return "sha256:" + h.hexdigest()


def push_source(client: RegistryClient, repo: str, paths: list[Path]) -> tuple[str, list[tuple[Path, str]]]:
    """Push the layer files (streamed from disk) and a config; returns the manifest digest and
    (file, digest) of every layer."""
    descs, blobs = [], []
    for path in paths:
        digest = file_digest(path)
        with path.open("rb") as f:
            client.put_blob(repo, f, digest)
        descs.append(
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest, "size": path.stat().st_size}
        )
        blobs.append((path, digest))
    cfg = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        }
    )
    cfg_digest = client.put_blob(repo, cfg)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest, "size": len(cfg)},
            "layers": descs,
        }
    )
    return client.put_manifest(repo, "source", manifest, OCI_MANIFEST), blobs


@dataclasses.dataclass(frozen=True)
class Run:
    """One copy by one tool: wall seconds, peak RSS MiB (the largest process), user and system CPU
    seconds (all its processes), the destination registry's CPU seconds during the copy, and for
    builder the CPU of its start-up (interpreter and imports) and of the copy itself (NaN for peers)."""

    wall: float
    rss: float
    user: float
    system: float
    registry_cpu: float
    startup_cpu: float = float("nan")
    copy_cpu: float = float("nan")

    @property
    def cpu(self) -> float:
        return self.user + self.system


def measured(cmds: list[list[str]], scratch: Path) -> tuple[float, float, float, float, str]:
    """Run ``cmds`` at once; (wall seconds, peak RSS MiB of the largest, user and system CPU
    seconds of all, the last line the first command wrote on stderr).
    Each runs under GNU ``time`` (``%M``: the command's own peak RSS in KiB; ``ru_maxrss`` of a
    child forked from this Python would include this process's pages: Linux keeps the larger
    high-water mark across ``exec``)."""
    outs = [scratch / f"time-{i}" for i in range(len(cmds))]
    t = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["/usr/bin/time", "-o", str(out), "-f", "%M %U %S", *c], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for c, out in zip(cmds, outs, strict=True)
    ]
    errs = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - t
    rss, user_s, system_s = 0.0, 0.0, 0.0
    for cmd, p, err, out in zip(cmds, procs, errs, outs, strict=True):
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode(errors='replace')[-2000:]}")
        kib, user, system = out.read_text().split()[-3:]
        rss = max(rss, int(kib) / 1024)
        user_s += float(user)
        system_s += float(system)
    last = (errs[0].decode(errors="replace").strip().splitlines() or [""])[-1]
    return wall, rss, user_s, system_s, last


def copy_run(cmds: list[list[str]], scratch: Path, dst: str) -> Run:
    """:func:`measured` of one tool's copy into ``dst``, with the destination registry's CPU
    during it and builder's start-up / copy CPU split (its ``cpu-split`` line)."""
    before = process_cpu(REGISTRY_PIDS[dst])
    wall, rss, user, system, last = measured(cmds, scratch)
    reg = process_cpu(REGISTRY_PIDS[dst]) - before
    if last.startswith("cpu-split "):
        startup, copy = (float(x) for x in last.split()[1:3])
        return Run(wall, rss, user, system, reg, startup, copy)
    return Run(wall, rss, user, system, reg)


def sha256_seconds(mib: int) -> float:
    """CPU seconds hashlib's sha256 takes for ``mib`` MiB here (1 MiB updates): the digest check
    builder makes of every streamed byte, a floor under its copy CPU that a client trusting the
    registry's own check (oras: its user CPU stays near zero) does not pay."""
    import hashlib

    buf = bytes(MIB)
    h = hashlib.sha256()
    t = time.process_time()
    for _ in range(mib):
        h.update(buf)
    return time.process_time() - t


def tool_commands(
    tool: str, src: str, dst: str, repo: str, digest: str, blobs: list[tuple[Path, str]]
) -> list[list[str]]:
    if tool == "builder" or tool.startswith("b@"):  # b@N: builder with copy_streams N
        streams = tool.removeprefix("b@") if tool != "builder" else "0"
        return [[sys.executable, "-c", BUILDER_CHILD, src, dst, repo, digest, streams]]
    if tool == "oras":
        return [
            ["oras", "cp", "--from-plain-http", "--to-plain-http", f"{src}/{repo}@{digest}", f"{dst}/{repo}:copied"]
        ]
    if tool == "skopeo":
        return [
            [
                "skopeo", "copy", "--quiet", "--preserve-digests", "--src-tls-verify=false", "--dest-tls-verify=false",
                f"docker://{src}/{repo}@{digest}", f"docker://{dst}/{repo}:copied",
            ]
        ]  # fmt: skip
    if tool == "crane":
        return [["crane", "copy", "--insecure", f"{src}/{repo}@{digest}", f"{dst}/{repo}:copied"]]
    # curl: the upload floor, one process per blob: POST a session, PUT the file with ?digest=
    script = (
        'loc=$(curl -sf -D - -o /dev/null -X POST "http://$1/v2/$2/blobs/uploads/" | tr -d "\\r" '
        "| sed -n 's/^[Ll]ocation: //p'); "
        '[ -n "$loc" ] || exit 1; '
        'case "$loc" in *\\?*) sep="&";; *) sep="?";; esac; '
        'curl -sf -o /dev/null -X PUT -H "Content-Type: application/octet-stream" '
        '-T "$3" "${loc}${sep}digest=$4"'
    )
    return [["bash", "-c", script, "curl", dst, repo, str(path), d] for path, d in blobs]


def row(tool: str, size_mib: int, run: Run) -> str:
    """One result as text (80 columns): throughput, wall time, peak RSS, CPU time (user + system),
    the destination registry's CPU time; for builder, its start-up and copy CPU."""
    text = f"{tool:7}{size_mib / run.wall:6.1f} MiB/s {run.wall:5.2f} s rss {run.rss:3.0f} MiB"
    return text + f" cpu {run.cpu:4.2f} ({run.user:4.2f}+{run.system:4.2f}) reg {run.registry_cpu:4.2f}"


def split_row(run: Run) -> str:
    """builder's CPU split: start-up (interpreter, imports) and the copy; empty for a peer."""
    if run.startup_cpu != run.startup_cpu:  # NaN: a peer
        return ""
    return f"\n{'':7}builder cpu: start-up {run.startup_cpu:.2f} s + copy {run.copy_cpu:.2f} s"


def median_run(runs: list[Run]) -> Run:
    """Field by field medians of ``runs``."""
    return Run(*(statistics.median(getattr(r, f.name) for r in runs) for f in dataclasses.fields(Run)))


def arguments(argv: list[str] | None) -> tuple[dict[str, tuple[int, int]], int, list[str]]:
    """The images to copy (name -> (layers, MiB each)), the rounds and the tools to run (builder,
    ``b@N`` for each ``--streams`` value, the installed peers, curl); a usage error (exit 2)
    names a wrong ``--images`` or ``--streams`` value."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median of each tool)")
    parser.add_argument("--images", default=",".join(IMAGES), help=f"comma-separated, of {', '.join(IMAGES)}")
    parser.add_argument("--quick", action="store_true", help="a 16 MiB image, 1 round (CI keeps the script working)")
    parser.add_argument(
        "--streams",
        default="",
        help="also run builder with these copy_streams values (comma-separated, e.g. 2,6; rows b@N): "
        "how many blobs at once suits this machine (builder's setting copy_streams, default 4)",
    )
    args = parser.parse_args(argv)
    unknown = [k for k in args.images.split(",") if k not in IMAGES]
    if unknown and not args.quick:
        parser.error(f"--images: unknown {', '.join(unknown)}; choose from {', '.join(IMAGES)}")
    streams = [n.strip() for n in args.streams.split(",") if n.strip()]
    if not all(n.isdigit() and int(n) > 0 for n in streams):
        parser.error(f"--streams takes positive whole numbers separated by commas, not {args.streams!r}")
    images = QUICK if args.quick else {k: IMAGES[k] for k in args.images.split(",")}
    tools = ["builder", "oras", "skopeo", "crane", "curl"]
    tools = [t for t in tools if t in ("builder", "curl") or shutil.which(t)]
    tools[1:1] = [f"b@{int(n)}" for n in streams]
    return images, 1 if args.quick else args.rounds, tools


def main(argv: list[str] | None = None) -> None:
    images, rounds, tools = arguments(argv)
    missing = sorted({"oras", "skopeo", "crane"} - set(tools))
    if missing:
        print(f"not installed, not measured: {', '.join(missing)}")
    print(f"load average before: {os.getloadavg()[0]:.1f}; cpus {os.cpu_count()}")
    summary = []
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        base = Path(tmp)
        with registry(base / "src") as src:
            setup = RegistryClient(src, insecure=True)
            for name, (layers, mib) in images.items():
                repo = f"bench/stream-{name.lower()}"
                paths = make_layers(base / "files" / name, layers, mib)
                digest, blobs = push_source(setup, repo, paths)
                size = layers * mib
                print(f"\n{name}: {layers} x {mib} MiB, {src}/{repo}@{digest}")
                sha256_s = sha256_seconds(size)
                results: dict[str, list[Run]] = {t: [] for t in tools}
                for r in range(rounds):
                    order = tools[r % len(tools) :] + tools[: r % len(tools)]  # interleaved, rotated
                    for tool in order:
                        with registry(base / f"dst-{tool}-{r}") as dst:
                            run = copy_run(tool_commands(tool, src, dst, repo, digest, blobs), base, dst)
                            if tool != "curl":
                                got = RegistryClient(dst, insecure=True).resolve(repo, "copied")
                                assert got == digest, f"{tool} copied {got}, expected {digest}"
                        results[tool].append(run)
                        print(f"  r{r + 1} {row(tool, size, run)}{split_row(run)}")
                med = {t: median_run(v) for t, v in results.items()}
                print(f"  medians of {rounds} round(s), x oras's throughput; sha256 of {size} MiB: {sha256_s:.2f} s")
                for t, m in med.items():
                    ratio = med["oras"].wall / m.wall if "oras" in med else float("nan")
                    print(f"  {row(t, size, m)} x{ratio:.2f}{split_row(m)}")
                b = med["builder"]
                line = f"benchmark=registry-stream image={name} builder_mibs={size / b.wall:.0f}"
                line += f" builder_rss_mib={b.rss:.0f} builder_cpu_s={b.cpu:.2f}"
                line += f" builder_startup_cpu_s={b.startup_cpu:.2f} builder_copy_cpu_s={b.copy_cpu:.2f}"
                line += f" sha256_cpu_s={sha256_s:.2f} builder_registry_cpu_s={b.registry_cpu:.2f}"
                for t in tools[1:]:
                    key = t.replace("b@", "builder_s")  # b@2: builder_s2_...
                    line += f" {key}_mibs={size / med[t].wall:.0f} {key}_rss_mib={med[t].rss:.0f}"
                    if t.startswith("b@"):
                        line += f" {key}_cpu_s={med[t].cpu:.2f}"
                if "oras" in med:
                    o = med["oras"]
                    line += f" oras_cpu_s={o.cpu:.2f} oras_user_cpu_s={o.user:.2f}"
                    line += f" oras_registry_cpu_s={o.registry_cpu:.2f}"
                    line += f" ratio_oras={o.wall / b.wall:.2f}"
                summary.append(line)
                shutil.rmtree(base / "files" / name)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
