"""The in-container probe: a stdlib-only program shipped with builder and run by the checked
image's own Python (``python3 - < probe.py``; it is sent on standard input, so it works with a
remote engine). It prints ONE JSON document (``builder-probe/1``) on stdout and exits 0 when every
step passed, 1 otherwise.

Steps (each with ``ok``, ``seconds``, ``detail``, ``error``):

* ``python``: interpreter version and path.
* ``nvidia-smi`` / ``rocm-smi`` + ``rocminfo`` (GPU modes): the management tool answers and lists
  GPUs (``rocm-smi`` working proves nothing about compute access, so ``rocminfo`` also runs).
* ``framework-import``: torch / jax / tensorflow (``--framework``; ``auto`` tries them in turn).
* ``devices``: the framework sees at least one GPU (``torch.cuda.is_available()`` returning False
  with only a warning FAILS here; the warning text is kept for the diagnosis).
* ``compute``: a small matrix product on each device, compared with the CPU result.
* ``arch-coverage``: each GPU's compute capability (``sm_90``) / gfx target is in the framework's
  compiled architecture list (``torch.cuda.get_arch_list()``); a PTX entry ``compute_XY`` with
  XY <= the GPU's capability also covers it (JIT).

Modes: ``nvidia``, ``amd``, ``cpu``, ``auto`` (device nodes /dev/nvidiactl, /dev/kfd decide).
Runs on Python >= 3.6; no third-party imports outside the framework being probed.
"""

# ruff: noqa: UP031  (%-formatting kept: the probe runs under old interpreters in images)
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

SCHEMA = "builder-probe/1"
TAIL = 4000


def _tail(text: str, n: int = TAIL) -> str:
    return text if len(text) <= n else "..." + text[-n:]


class Probe:
    def __init__(self, mode: str, framework: str) -> None:
        self.mode = mode
        self.framework = framework
        self.steps: list[dict[str, Any]] = []
        self.gpus: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.fw: Any = None
        self.fw_name: str | None = None

    def step(self, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        start = time.monotonic()
        rec: dict[str, Any] = {"name": name, "ok": False, "seconds": 0.0, "detail": {}, "error": None}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                detail = fn()
            msgs = [str(w.message) for w in caught]
            if msgs:
                self.warnings.extend(msgs)
                detail.setdefault("warnings", msgs)
            rec["detail"] = detail
            rec["ok"] = bool(detail.pop("_ok", True))
            if not rec["ok"]:
                rec["error"] = detail.pop("_error", "failed")
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"
            rec["detail"]["traceback"] = _tail(traceback.format_exc(), 2000)
        rec["seconds"] = round(time.monotonic() - start, 4)
        self.steps.append(rec)
        return rec


def run(argv: list[str], timeout: float = 60.0) -> dict[str, Any]:
    exe = shutil.which(argv[0])
    if exe is None:
        return {"exit_code": 127, "stdout": "", "stderr": f"{argv[0]}: command not found"}
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"exit_code": 124, "stdout": "", "stderr": f"{argv[0]}: timed out after {timeout}s"}
    return {
        "exit_code": p.returncode,
        "stdout": p.stdout.decode("utf-8", "replace"),
        "stderr": p.stderr.decode("utf-8", "replace"),
    }


def detect_mode() -> str:
    if os.path.exists("/dev/nvidiactl") or os.environ.get("NVIDIA_VISIBLE_DEVICES") not in (None, "", "void", "none"):
        return "nvidia"
    if os.path.exists("/dev/kfd"):
        return "amd"
    return "cpu"


# ----------------------------------------------------------------------------------------------
# management tools
# ----------------------------------------------------------------------------------------------


def step_nvidia_smi(probe: Probe) -> dict[str, Any]:
    q = run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,pci.bus_id,memory.total,driver_version,compute_cap,mig.mode.current",
            "--format=csv,noheader",
        ]
    )
    if q["exit_code"] != 0 and "compute_cap" in q["stdout"] + q["stderr"]:
        q = run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,pci.bus_id,memory.total,driver_version,mig.mode.current",
                "--format=csv,noheader",
            ]
        )
    listing = run(["nvidia-smi", "-L"])
    detail: dict[str, Any] = {
        "exit_code": q["exit_code"],
        "stdout": _tail(q["stdout"]),
        "stderr": _tail(q["stderr"]),
        "list": _tail(listing["stdout"] + listing["stderr"]),
    }
    if q["exit_code"] == 0:
        for line in q["stdout"].splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 5:
                gpu = {"index": parts[0], "name": parts[1], "bus_id": parts[2], "memory": parts[3], "driver": parts[4]}
                if len(parts) >= 7:
                    gpu["compute_cap"] = parts[5]
                    gpu["mig_mode"] = parts[6]
                probe.gpus.append(gpu)
        detail["mig_devices"] = [x.strip() for x in listing["stdout"].splitlines() if x.strip().startswith("MIG")]
        detail["gpu_count"] = len(probe.gpus)
        if not probe.gpus:
            detail["_ok"] = False
            detail["_error"] = "nvidia-smi listed no GPU"
    else:
        detail["_ok"] = False
        detail["_error"] = (q["stderr"] or q["stdout"]).strip()[-500:] or "nvidia-smi exit %d" % q["exit_code"]
    return detail


def step_rocm_smi() -> dict[str, Any]:
    r = run(["rocm-smi", "--showproductname"])
    if r["exit_code"] == 127:
        r = run(["amd-smi", "list"])
    detail: dict[str, Any] = {"exit_code": r["exit_code"], "stdout": _tail(r["stdout"]), "stderr": _tail(r["stderr"])}
    if r["exit_code"] != 0:
        detail["_ok"] = False
        detail["_error"] = (r["stderr"] or r["stdout"]).strip()[-500:] or "rocm-smi exit %d" % r["exit_code"]
    return detail


def step_rocminfo(probe: Probe) -> dict[str, Any]:
    r = run(["rocminfo"])
    out = r["stdout"] + r["stderr"]
    targets = []
    for block in out.split("*******"):
        if "Device Type:" in block and "GPU" in block.split("Device Type:", 1)[1].splitlines()[0]:
            for line in block.splitlines():
                s = line.strip()
                if s.startswith("Name:") and "gfx" in s:
                    targets.append(s.split(":", 1)[1].strip())
                    break
    detail: dict[str, Any] = {"exit_code": r["exit_code"], "gfx_targets": targets, "output": _tail(out, 2000)}
    for i, t in enumerate(targets):
        if i < len(probe.gpus):
            probe.gpus[i]["gfx_target"] = t
        else:
            probe.gpus.append({"index": str(i), "gfx_target": t})
    if r["exit_code"] != 0 or not targets:
        detail["_ok"] = False
        detail["_error"] = out.strip()[-500:] or "rocminfo found no GPU agent"
    return detail


# ----------------------------------------------------------------------------------------------
# frameworks
# ----------------------------------------------------------------------------------------------


def step_import(probe: Probe) -> dict[str, Any]:
    names = ["torch", "jax", "tensorflow"] if probe.framework == "auto" else [probe.framework]
    errors = {}
    for name in names:
        if name == "none":
            return {"framework": "none"}
        try:
            mod = __import__(name)
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        probe.fw, probe.fw_name = mod, name
        detail: dict[str, Any] = {"framework": name, "version": getattr(mod, "__version__", None)}
        if name == "torch":
            detail["cuda"] = getattr(mod.version, "cuda", None)
            detail["hip"] = getattr(mod.version, "hip", None)
        return detail
    if probe.framework == "auto":
        return {"framework": "none", "tried": errors}
    return {"_ok": False, "_error": errors.get(probe.framework, "import failed"), "tried": errors}


def step_devices(probe: Probe) -> dict[str, Any]:
    name = probe.fw_name
    if name == "torch":
        torch = probe.fw
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
        devices = []
        hip = getattr(torch.version, "hip", None)
        for i in range(count):
            props = torch.cuda.get_device_properties(i)
            cap = torch.cuda.get_device_capability(i)
            devices.append(
                {
                    "index": i,
                    "name": torch.cuda.get_device_name(i),
                    "capability": "%d.%d" % cap,
                    "gcn_arch": getattr(props, "gcnArchName", None) if hip else None,
                    "memory_mib": int(props.total_memory // (1024 * 1024)),
                    "multiprocessors": getattr(props, "multi_processor_count", None),
                }
            )
        detail: dict[str, Any] = {"is_available": available, "device_count": count, "devices": devices}
        if not available or count == 0:
            detail["_ok"] = False
            detail["_error"] = "torch.cuda.is_available() is False: the framework sees no GPU"
        return detail
    if name == "jax":
        jax = probe.fw
        devs = [d for d in jax.devices() if d.platform in ("gpu", "cuda", "rocm")]
        detail = {"devices": [str(d) for d in devs], "device_count": len(devs), "backend": jax.default_backend()}
        if not devs:
            detail["_ok"] = False
            detail["_error"] = f"jax sees no GPU (backend {jax.default_backend()})"
        return detail
    if name == "tensorflow":
        tf = probe.fw
        devs = tf.config.list_physical_devices("GPU")
        detail = {"devices": [d.name for d in devs], "device_count": len(devs)}
        if not devs:
            detail["_ok"] = False
            detail["_error"] = "tensorflow sees no GPU"
        return detail
    return {"_ok": False, "_error": "no framework to ask for GPUs (nvidia-smi alone is not enough)"}


def step_compute(probe: Probe) -> dict[str, Any]:
    name = probe.fw_name
    gpu = probe.mode in ("nvidia", "amd")
    if name == "torch":
        torch = probe.fw
        torch.manual_seed(0)
        a = torch.randn(256, 256, dtype=torch.float32)
        b = torch.randn(256, 256, dtype=torch.float32)
        ref = a @ b
        results = []
        ok = True
        targets = ["cuda:%d" % i for i in range(torch.cuda.device_count())] if gpu else ["cpu"]
        for dev in targets:
            t0 = time.monotonic()
            out = (a.to(dev) @ b.to(dev)).to("cpu")
            if dev != "cpu":
                torch.cuda.synchronize(dev)
            err = float((out - ref).abs().max())
            good = err < 1e-2 * float(ref.abs().max())
            ok = ok and good
            results.append(
                {"device": dev, "max_abs_error": err, "ok": good, "seconds": round(time.monotonic() - t0, 4)}
            )
        detail: dict[str, Any] = {"results": results}
        if not results:
            ok = False
        if not ok:
            detail["_ok"] = False
            detail["_error"] = "matrix product wrong or not run on every device"
        return detail
    if name == "jax":
        jax = probe.fw
        import jax.numpy as jnp  # type: ignore[import-not-found]

        devs = [d for d in jax.devices() if (d.platform != "cpu") == gpu] or jax.devices()
        results = []
        for d in devs:
            x = jax.device_put(jnp.arange(256.0 * 256).reshape(256, 256) / 65536.0, d)
            y = float(jnp.dot(x, x).sum())
            results.append({"device": str(d), "sum": y})
        return {"results": results}
    if name == "tensorflow":
        tf = probe.fw
        devs = ["/GPU:%d" % i for i in range(len(tf.config.list_physical_devices("GPU")))] if gpu else ["/CPU:0"]
        results = []
        for d in devs:
            with tf.device(d):
                x = tf.random.uniform((256, 256))
                y = float(tf.reduce_sum(tf.matmul(x, x)))
            results.append({"device": d, "sum": y})
        return {"results": results}
    if gpu:
        return {"_ok": False, "_error": "no framework: cannot run a computation on the GPU"}
    # CPU without a framework: a small pure-Python matrix product
    n = 48
    a2 = [[(i * n + j) % 7 / 7.0 for j in range(n)] for i in range(n)]
    t0 = time.monotonic()
    c = [[sum(a2[i][k] * a2[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    return {
        "results": [
            {
                "device": "cpu (pure python)",
                "trace": round(sum(c[i][i] for i in range(n)), 6),
                "seconds": round(time.monotonic() - t0, 4),
            }
        ]
    }


def _covered(sm: str, archs: list[str]) -> bool:
    if sm in archs:
        return True
    try:
        want = int(sm.split("_", 1)[1])
    except (IndexError, ValueError):
        return False
    for a in archs:
        if a.startswith("compute_"):
            try:
                if int(a.split("_", 1)[1]) <= want:
                    return True
            except ValueError:
                continue
    return False


def step_arch(probe: Probe) -> dict[str, Any]:
    if probe.fw_name != "torch":
        return {"skipped": "arch list is read from torch only"}
    torch = probe.fw
    archs = list(torch.cuda.get_arch_list())
    rows = []
    ok = True
    # torch >= 2.6 also fills gcnArchName on CUDA builds (with the device name): only ROCm builds
    # (torch.version.hip set) report a gfx target there - seen on the H200 recording.
    hip = getattr(torch.version, "hip", None)
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gcn = getattr(props, "gcnArchName", None) if hip else None
        if gcn:
            target = gcn.split(":", 1)[0]
            covered = target in [a.split(":", 1)[0] for a in archs]
        else:
            cap = torch.cuda.get_device_capability(i)
            target = "sm_%d%d" % cap
            covered = _covered(target, archs)
        ok = ok and covered
        rows.append({"device": i, "target": target, "covered": covered})
    detail: dict[str, Any] = {"arch_list": archs, "devices": rows}
    if not ok:
        detail["_ok"] = False
        missing = [r["target"] for r in rows if not r["covered"]]
        detail["_error"] = "GPU architecture {} is not in the framework's compiled list {}".format(
            ",".join(missing),
            " ".join(archs),
        )
    return detail


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    mode, framework = "auto", "auto"
    i = 0
    while i < len(args):
        if args[i] == "--mode" and i + 1 < len(args):
            mode, i = args[i + 1], i + 2
        elif args[i] == "--framework" and i + 1 < len(args):
            framework, i = args[i + 1], i + 2
        else:
            i += 1
    if mode == "auto":
        mode = detect_mode()
    probe = Probe(mode, framework)
    probe.step("python", lambda: {"version": platform.python_version(), "executable": sys.executable})
    if mode == "nvidia":
        probe.step("nvidia-smi", lambda: step_nvidia_smi(probe))
    elif mode == "amd":
        probe.step("rocm-smi", step_rocm_smi)
        probe.step("rocminfo", lambda: step_rocminfo(probe))
    imp = probe.step("framework-import", lambda: step_import(probe))
    if imp["ok"] and probe.fw_name:
        if mode in ("nvidia", "amd"):
            dev = probe.step("devices", lambda: step_devices(probe))
            if dev["ok"]:
                probe.step("compute", lambda: step_compute(probe))
                probe.step("arch-coverage", lambda: step_arch(probe))
        else:
            probe.step("compute", lambda: step_compute(probe))
    elif imp["ok"]:
        if mode in ("nvidia", "amd"):
            probe.step("devices", lambda: step_devices(probe))
        else:
            probe.step("compute", lambda: step_compute(probe))
    ok = all(s["ok"] for s in probe.steps)
    doc = {
        "schema": SCHEMA,
        "mode": mode,
        "framework": probe.fw_name or "none",
        "ok": ok,
        "steps": probe.steps,
        "gpus": probe.gpus,
        "warnings": probe.warnings,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("NVIDIA_", "CUDA_", "HIP_", "ROCR_", "HSA_"))},
    }
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
