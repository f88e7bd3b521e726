"""Failure kinds where the GPU stack's *integration* is wrong: the engine's CDI switch, the container toolkit's
configuration (ldconfig path, device cgroups for rootless / nested containers), driver libraries baked into the
image, the Kubernetes node runtime, Apptainer's GPU library binding, Slurm GRES requests, a GPU request naming a
device the host does not have, NVML refused by the container's permissions (SELinux, rootless, MIG), and a container
that never received the host's driver libraries although the driver is new enough.

Sources of the facts (docs/diagnosis.md lists every kind with its recorded messages):
Docker CDI (``"features": {"cdi": true}``): https://docs.docker.com/reference/cli/dockerd/#enable-cdi-devices;
toolkit configuration (``ldconfig``, ``no-cgroups``) and rootless setup:
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html;
Kubernetes device plugin prerequisites (nvidia as the default runtime or a RuntimeClass):
https://github.com/NVIDIA/k8s-device-plugin#prerequisites; Apptainer ``--nv``/``--rocm``:
https://apptainer.org/docs/user/latest/gpu.html; Slurm GRES: https://slurm.schedmd.com/gres.html; an unknown device
is a request for more GPUs than the host has (https://github.com/NVIDIA/nvidia-docker/issues/1283) or a pre-470 MIG
name (https://github.com/NVIDIA/nvidia-container-toolkit/issues/203); NVML's Insufficient Permissions under SELinux
(``setsebool -P container_use_devices 1``: https://github.com/NVIDIA/nvidia-container-toolkit/issues/33, relabelling:
https://github.com/NVIDIA/nvidia-docker/issues/676) and on MIG devices
(https://github.com/NVIDIA/nvidia-container-toolkit/issues/842).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from builder.checks.diagnosis.model import FailureRule, captured, patterns

if TYPE_CHECKING:
    from builder.checks.diagnosis.model import Context


def facts_engine(text: str, ctx: Context) -> dict[str, Any]:
    """The engine named by the context or the text (docker / podman / kubernetes / apptainer / slurm)."""
    facts: dict[str, Any] = {}
    engine = ctx.engine or _engine_in_text(text)
    if engine:
        facts["engine"] = engine
    return facts


def _engine_in_text(text: str) -> str | None:
    for name, pattern in (
        ("kubernetes", r"\bkubectl\b|\bkubelet\b|device[- ]plugin|k8s|default-scheduler|\bFailedScheduling\b"),
        ("apptainer", r"\bapptainer\b|\bsingularity\b"),
        ("slurm", r"\bsrun\b|\bsbatch\b|\bsalloc\b|\bslurm"),
        ("podman", r"\bpodman\b"),
        ("docker", r"\bdocker\b|Error response from daemon"),
    ):
        if re.search(pattern, text, re.I):
            return name
    return None


def facts_ldconfig(text: str, _ctx: Context) -> dict[str, Any]:
    facts = captured(
        text,
        {
            "ldconfig": r"(?:ldcache error: (?:open failed:|process)|could not start)\s+(/[\w/.]*ldconfig[\w.]*)",
            "exit_code": r"failed with error code:\s*(\d+)",
        },
    )
    request = re.search(r"(--gpus[= ]\S+|--runtime[= ]nvidia\b|--device[= ]nvidia\.com/gpu=\S+)", text)
    if request:
        facts["gpu_request"] = request.group(1)
    if facts.get("exit_code") == "127" or ("no such file" in text.lower() and "ldconfig" in facts):
        facts["meaning"] = "the ldconfig path set in the toolkit configuration does not exist on this host"
    return facts


def facts_library(text: str, _ctx: Context) -> dict[str, Any]:
    return captured(text, {"library": r"file creation failed: \S*/((?:lib)?(?:nvidia|cuda)[\w.-]*\.so[\w.]*)"})


def facts_gres(text: str, _ctx: Context) -> dict[str, Any]:
    return captured(text, {"request": r"(--gres[= ]\S+|--gpus(?:-per-\w+)?[= ]\S+)"})


#: what each symptom needs from NVIDIA_DRIVER_CAPABILITIES, most specific first. The toolkit injects only the
#: driver libraries of the listed capabilities; unset or empty means ``utility,compute``
#: (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html#driver-capabilities):
#: video = libnvcuvid / libnvidia-encode, utility = nvidia-smi / libnvidia-ml,
#: compute = libcuda / libnvidia-ptxjitcompiler, graphics = libGLX_nvidia / libEGL_nvidia / libnvidia-glcore.
_CAPABILITY_SYMPTOMS: tuple[tuple[str, str], ...] = (
    ("video", r"libnvidia-encode|libnvcuvid|\bnvenc\b|\bcuvid\b"),
    ("graphics", r"libGLX_nvidia|libEGL_nvidia|libnvidia-glcore|libnvidia-eglcore"),
    (
        "utility",
        r"\bnvidia-smi\b\\*\"?:? (?:command )?not found|executable file not found.{0,20}nvidia-smi|"
        r"exec:? \\*\"nvidia-smi|exec nvidia-smi failed|libnvidia-ml\.so",
    ),
    (
        "compute",
        r"libcuda\.so|no NVIDIA driver on your system|NVIDIA Driver was not detected|"
        r"CUDA driver initialization failed|could not load libcuda",
    ),
)


def driver_capabilities(text: str, ctx: Context) -> str | None:
    """NVIDIA_DRIVER_CAPABILITIES as the context or the text (``env``, ``-e``, a compose file, a JSON dump) gives
    it: ``"compute,utility"``; None when neither names it."""
    if ctx.driver_capabilities is not None:
        return ctx.driver_capabilities
    m = re.search(r"NVIDIA_DRIVER_CAPABILITIES[\"']?\s*[=:]\s*[\"']?([\w,]*)", text)
    return m.group(1) if m else None


def missing_capability(text: str, ctx: Context) -> dict[str, Any]:
    """``{"driver_capabilities": value, "missing_capability": cap}`` when a symptom in ``text`` needs a driver
    capability that the known NVIDIA_DRIVER_CAPABILITIES lacks; ``{}`` when the value is unknown, includes
    ``all`` or what the symptom needs (naming the variable is no failure: a healthy container lists it too)."""
    caps = driver_capabilities(text, ctx)
    if caps is None:
        return {}
    have = {c.strip().lower() for c in caps.split(",") if c.strip()} or {"utility", "compute"}
    if "all" in have:
        return {}
    for cap, symptom in _CAPABILITY_SYMPTOMS:
        if cap not in have and re.search(symptom, text, re.I):
            return {"driver_capabilities": caps, "missing_capability": cap}
    return {}


def facts_capabilities(text: str, ctx: Context) -> dict[str, Any]:
    """The capability the symptom needs (``video`` for NVENC/NVDEC libraries) and the known value."""
    found = missing_capability(text, ctx)
    if found:
        return found
    for cap, symptom in _CAPABILITY_SYMPTOMS:
        if re.search(symptom, text, re.I):
            caps = driver_capabilities(text, ctx)
            return {"missing_capability": cap} | ({"driver_capabilities": caps} if caps is not None else {})
    return {}


def facts_host_libs(text: str, _ctx: Context) -> dict[str, Any]:
    """The kernel module's version (``NVRM version`` / TensorFlow's ``kernel reported version``), the host and the
    LD_LIBRARY_PATH the process searched."""
    found = captured(
        text,
        {
            "kernel_module_version": r"(?:Kernel Module\s+|kernel reported version is:?\s*)(\d{3}\.\d+(?:\.\d+)?)",
            "hostname": r"\] hostname: (\S+)",
            "ld_library_path": r"LD_LIBRARY_PATH: ?([^\s]*)",
        },
    )
    return {k: v for k, v in found.items() if v}


def facts_not_injected(text: str, ctx: Context) -> dict[str, Any]:
    """Why the driver is not the cause: the driver's version and the CUDA the image needs (read from the text:
    ``NVRM version``, ``Driver Version``, the reporter's words; and the context)."""
    facts: dict[str, Any] = {}
    devices = sorted(set(re.findall(r"--device[= ](/dev/nvidia[\w-]*)", text)))
    if devices:
        facts["raw_devices"] = devices
    if ctx.driver_version:
        facts["driver_version"] = ctx.driver_version
    return facts


def facts_unschedulable(text: str, ctx: Context) -> dict[str, Any]:
    """``nodes`` (how many the scheduler considered), ``insufficient_gpu`` (how many lacked a free GPU) and the
    other reasons it gave (``node(s) didn't match node selector`` ...), and the engine."""
    facts = facts_engine(text, ctx)
    m = re.search(r"0/(\d+) nodes are available: ([^\n]*)", text)
    if m:
        facts["nodes"] = int(m.group(1))
        reasons = [r.strip().rstrip(".") for r in m.group(2).split(",") if r.strip()]
        facts["reasons"] = reasons
    g = re.search(r"(\d+) Insufficient ((?:nvidia|amd)\.com/gpu)", text)
    if g:
        facts["insufficient_gpu"], facts["resource"] = int(g.group(1)), g.group(2)
    return facts


def facts_unknown_device(text: str, ctx: Context) -> dict[str, Any]:
    """``device``: what the request named (``1``, ``MIG-GPU-<uuid>/1/0``, ``/var/run/nvidia-container-devices``),
    ``meaning`` when its form says why, and the engine."""
    facts = facts_engine(text, ctx)
    m = re.search(r"device error: (\S+?): unknown device", text)
    if not m:
        return facts
    device = facts["device"] = m.group(1)
    if device.startswith("/var/run/nvidia-container-devices"):
        facts["meaning"] = (
            "the device list was passed as volume mounts, which this toolkit is not configured to accept "
            "(accept-nvidia-visible-devices-as-volume-mounts)"
        )
    elif re.fullmatch(r"MIG-GPU-[0-9a-f-]+/\d+/\d+", device):
        facts["meaning"] = "a MIG device named in the form of drivers before 470; newer drivers name it MIG-<uuid>"
    elif device.isdigit():
        facts["meaning"] = f"GPU index {device}: the host has fewer GPUs (indices start at 0)"
    return facts


def facts_nvml_permissions(text: str, ctx: Context) -> dict[str, Any]:
    """The engine, and ``cause_hint`` when the text names it: ``selinux`` (SELinux / setsebool / restorecon),
    ``rootless`` (rootless engine or no-cgroups), ``mig`` (a MIG device or profile)."""
    facts = facts_engine(text, ctx)
    for hint, pattern in (
        ("selinux", r"SELinux|setsebool|restorecon|getenforce"),
        ("rootless", r"rootless|no-cgroups|--userns"),
        ("mig", r"\bMIG\b|MIG-[0-9a-f]{8}|\b\dg\.\d+gb\b"),
    ):
        if re.search(pattern, text, re.I if hint != "mig" else 0):
            facts["cause_hint"] = hint
            break
    return facts


RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "cdi-not-enabled",
        "container-engine",
        "container-engine",
        "the engine was asked for a CDI device (--device vendor.com/gpu=...) but its CDI support is switched off: "
        '`could not select device driver "cdi"` is Docker\'s feature flag, not a missing toolkit',
        'in the engine: enable CDI in /etc/docker/daemon.json (`"features": {"cdi": true}`) and restart dockerd '
        "(Docker 25-27; default from Docker 28), generate the spec with `nvidia-ctk cdi generate`, or request the "
        "GPU with `--gpus all` instead of a CDI name",
        patterns(r"could not select device driver \\?\"cdi\\?\""),
        facts_engine,
    ),
    FailureRule(
        "toolkit-ldconfig-failed",
        "container-toolkit",
        "container-toolkit",
        "the NVIDIA hook could not refresh the container's ld cache: the `ldconfig` path in the toolkit's "
        "config.toml does not exist on this host (Ubuntu ships /sbin/ldconfig.real, Debian/RHEL /sbin/ldconfig), "
        "or it failed - the GPU was requested, yet the driver libraries it mounted are not found",
        'on the host: set `ldconfig = "@/sbin/ldconfig"` (Debian, RHEL, Fedora) or `"@/sbin/ldconfig.real"` '
        "(Ubuntu) in /etc/nvidia-container-runtime/config.toml, whichever exists (`ls -l /sbin/ldconfig*`); "
        "inside the container `ldconfig -p | grep -E 'libcuda|libnvidia-ml'` shows whether the cache lists them "
        "(running `ldconfig` there confirms it); on WSL the libraries are under /usr/lib/wsl/lib",
        patterns(
            r"ldcache error: open failed: \S*ldconfig",
            r"ldcache error: process \S*ldconfig\S* (?:failed|terminated)",
            r"could not start \S*ldconfig",
        ),
        facts_ldconfig,
    ),
    FailureRule(
        "device-cgroup-denied",
        "container-toolkit",
        "container-toolkit",
        "the NVIDIA hook may not set the container's device cgroup rules: a rootless engine or a container "
        "nested in another (LXC, a CI runner) cannot add device filters (cgroup v2 eBPF) or write devices.allow",
        "for rootless engines: set `no-cgroups = true` under [nvidia-container-cli] in "
        "/etc/nvidia-container-runtime/config.toml (or use CDI), so the engine, not the hook, grants the devices; "
        "in nested containers allow the GPU device majors in the outer container (lxc.cgroup2.devices.allow)",
        patterns(
            r"bpf_prog_query\(BPF_CGROUP_DEVICE\) failed",
            r"unable to find any existing device filters attached to the cgroup",
            r"failed to add device rules",
            r"devices\.allow:\s*permission denied",
        ),
        facts_engine,
    ),
    FailureRule(
        "driver-libs-in-image",
        "image-user-space",
        "container-toolkit",
        "the image carries NVIDIA driver user-space libraries (libnvidia-ml, libcuda, ...) where the hook mounts the "
        "host's: the hook refuses to overwrite them (`file exists`), and where it does not they shadow the host driver",
        "in the image: remove the driver packages (libnvidia-compute-*, libnvidia-ml*, nvidia-utils-*, cuda-drivers) "
        "from the Dockerfile - build on nvidia/cuda base images and let the runtime inject the host's driver",
        patterns(r"mount error: file creation failed: \S*/(?:lib)?(?:nvidia|cuda)[\w.-]*\.so[\w.]*: file exists"),
        facts_library,
    ),
    FailureRule(
        "k8s-runtime-not-configured",
        "container-engine",
        "container-engine",
        "the Kubernetes device plugin runs without the NVIDIA driver libraries: on this node the container runtime "
        "(containerd / CRI-O) does not use the NVIDIA runtime for the plugin's pod",
        "on the node: make nvidia the default runtime (`nvidia-ctk runtime configure --runtime=containerd "
        "--set-as-default` and restart containerd), or create a RuntimeClass `nvidia` and deploy the plugin with "
        "`runtimeClassName: nvidia` (GPU pods too); check with `kubectl describe node` for nvidia.com/gpu",
        patterns(
            r"Incompatible strategy detected",
            r"did you configure the NVIDIA Container Toolkit\?",
            r"did you set the docker default runtime to",
            r"invalid device discovery strategy",
            # a RuntimeClass whose handler containerd does not know (https://github.com/NVIDIA/gpu-operator/issues/730)
            r"no runtime for \\?\"?nvidia\\?\"? is configured",
        ),
        facts_engine,
    ),
    FailureRule(
        "apptainer-gpu-libs-missing",
        "kernel-driver",
        "container-engine",
        "Apptainer/Singularity --nv (or --rocm) found none of the host's GPU driver libraries to bind: the driver's "
        "user-space is not installed or not in the ld cache (Jetson/Tegra boards keep it elsewhere)",
        "on the host: check `nvidia-smi` and `ldconfig -p | grep libnvidia-ml` (ROCm: `ldconfig -p | grep "
        "libamdhip64`); run `ldconfig` after installing the driver, or use `--nvccli` (nvidia-container-cli); on "
        "Jetson list the Tegra libraries in nvliblist.conf",
        patterns(r"Could not find any (?:nv|rocm) (?:files|libraries) on this host"),
        facts_engine,
    ),
    FailureRule(
        "slurm-gres-invalid",
        "run-options",
        "run-options",
        "Slurm refused the job's GPU request: the --gres/--gpus specification does not match the cluster's GRES "
        "configuration (type name required, GresTypes/gres.conf not set, or the node has no such GRES)",
        "in the job script: request GPUs the way this cluster defines them (`scontrol show node <node> | grep Gres`; "
        "e.g. `--gres=gpu:a100:1`, or `--gpus=1` only where the select plugin supports it); cluster admins: "
        "GresTypes=gpu in slurm.conf and a matching gres.conf",
        patterns(
            r"Invalid generic resource \(gres\) specification",
            r"Gres format wrong",
            r"Requested GRES option unsupported",
        ),
        facts_gres,
    ),
    FailureRule(
        "k8s-gpu-unschedulable",
        "container-engine",
        "container-engine",
        "the Kubernetes scheduler found no node with a free GPU of the resource requested ('Insufficient "
        "nvidia.com/gpu'): no node advertises it (the device plugin is not running or finds no GPU), the advertised "
        "GPUs are all allocated, or the pod's selectors/taints rule the GPU nodes out",
        "in the cluster: `kubectl describe node` - Capacity/Allocatable must list nvidia.com/gpu (amd.com/gpu); if "
        "absent, read the device plugin's logs (a node runtime without the NVIDIA runtime is "
        "k8s-runtime-not-configured); if present, free or add GPUs, request no more than one node has, and check "
        "the pod's nodeSelector and tolerations",
        patterns(r"\d+ Insufficient (?:nvidia\.com|amd\.com)/gpu"),
        facts_unschedulable,
    ),
    FailureRule(
        "gpu-device-unknown",
        "run-options",
        "container-toolkit",
        "the GPU request names a device the host does not have: an index past the last GPU (`--gpus N` asks for N "
        "GPUs, `device=N` for index N), an old-style MIG name (`MIG-GPU-<uuid>/gi/ci`, replaced by `MIG-<uuid>` "
        "since driver 470), an index kept from another allocation, or a device list the toolkit is not set up to read",
        "in the run options: request GPUs that exist as `nvidia-smi -L` lists them (indices 0..count-1, `GPU-<uuid>`, "
        "`MIG-<uuid>`), e.g. `--gpus all` or `--gpus '\"device=0\"'`; under Slurm/enroot leave "
        "NVIDIA_VISIBLE_DEVICES to the GRES allocation; in Kubernetes the device plugin's deviceListStrategy "
        "(volume-mounts) must match the toolkit's accept-nvidia-visible-devices-as-volume-mounts",
        patterns(r"nvidia-container-cli(?:\.real)?: device error: \S+?: unknown device"),
        facts_unknown_device,
    ),
    FailureRule(
        "nvml-insufficient-permissions",
        "container-engine",
        "image-user-space",
        "NVML answered 'Insufficient Permissions': the container's process may not use the GPU device nodes the "
        "toolkit gave it - SELinux denies containers the devices (Fedora/RHEL), a rootless engine maps them to a user "
        "without access, or, with a MIG device, the query needs the parent GPU, which a MIG container may not read",
        "on the host: with SELinux enforcing allow containers the devices (`setsebool -P container_use_devices 1`, "
        "or relabel: `nvidia-container-cli -k list | restorecon -v -f -`); rootless podman: use the CDI spec "
        "(`nvidia-ctk cdi generate`) and check the device nodes' owners; a MIG device: query the MIG device's own "
        "handle (memory of the parent GPU is not readable inside the container) - `--privileged` only hides it",
        patterns(
            r"Failed to initialize NVML: Insufficient Permissions",
            r"nvml error: insufficient permissions",
            r"NVMLError_NoPermission",
            r"NVML_ERROR_NO_PERMISSION",
        ),
        facts_nvml_permissions,
    ),
)

#: a driver library missing on the host itself (no container): what the kernel module has no user-space for
HOST_LIBS_MISSING = FailureRule(
    "driver-libs-missing-on-host",
    "kernel-driver",
    "image-user-space",
    "the process runs on the host (no container), and the NVIDIA kernel module is there, but the driver's user-space "
    "libraries (libcuda.so.1, libnvidia-ml.so.1) are not installed for it or not on the loader's path - or are of "
    "another driver version than the module",
    "on the host: install the user-space part of exactly the kernel module's driver version (the .run installer's "
    "libraries, or libnvidia-compute-<branch> / nvidia-driver-cuda), then run `ldconfig`; `ldconfig -p | grep "
    "libcuda.so.1` must list it (a libcuda under /usr/local/cuda/lib64/stubs is a build stub, not the driver)",
    (),  # never matched by text alone: a missing library with no container, see builder.checks.diagnosis.matching
    facts_host_libs,
)

#: the kind :func:`~builder.checks.diagnosis.matching.diagnose` names when the facts contradict "driver too old"
NOT_INJECTED = FailureRule(
    "driver-libs-not-injected",
    "run-options",
    "image-user-space",
    "the container never received the host's driver libraries (started with raw --device nodes, without the NVIDIA "
    "runtime, or the runtime did not mount them): a missing libcuda, or 'insufficient driver' from the CUDA runtime "
    "although the host driver supports the image's CUDA",
    "in the run options: request the GPU through the runtime (`--gpus all`, `--runtime=nvidia`, or a CDI device "
    "`--device nvidia.com/gpu=all`) instead of passing /dev/nvidia* nodes; inside, `ldconfig -p | grep libcuda` "
    "must show the host driver's libcuda",
    (),  # never matched by text alone: reached by cross-checking "driver too old" (builder.checks.diagnosis.crosscheck)
    # or by a missing driver library next to raw /dev/nvidia* nodes (builder.checks.diagnosis.matching)
    facts_not_injected,
)


__all__ = [
    "HOST_LIBS_MISSING",
    "NOT_INJECTED",
    "RULES",
    "driver_capabilities",
    "facts_capabilities",
    "facts_engine",
    "missing_capability",
]
