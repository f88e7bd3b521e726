"""The ``kubernetes`` check runner: one Job per check. builder renders the Job; it does not reach a cluster.

:func:`job_manifest` writes the ``batch/v1`` Job of one check step: GPUs as the vendor's device-plugin
resource limit (``nvidia.com/gpu``, https://github.com/NVIDIA/k8s-device-plugin; ``amd.com/gpu``,
https://github.com/ROCm/k8s-device-plugin), the cluster's ``runtimeClassName`` (e.g. ``nvidia``, the
RuntimeClass the GPU Operator installs), the node chosen by GPU feature discovery's product label
(``nvidia.com/gpu.product``, e.g. ``NVIDIA-H100-80GB-HBM3``:
https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gpu-feature-discovery/README.md;
``amd.com/gpu.product-name`` from AMD's node labeller:
https://github.com/ROCm/k8s-device-plugin/blob/master/cmd/k8s-node-labeller/README.md) plus the
cluster's ``node_selector``, the container kept open on standard input (``stdin: true``,
``stdinOnce: true``) so that the probe is streamed in with ``kubectl attach -i``, no retries
(``backoffLimit: 0``), a deadline (``activeDeadlineSeconds``) and clean-up of the finished Job
(``ttlSecondsAfterFinished``). Job fields: https://kubernetes.io/docs/concepts/workloads/controllers/job/.

The run path (docs/kubernetes.md), for a site that runs it: ``kubectl apply -f job.yaml``; ``kubectl
wait --for=condition=Ready pod -l job-name=NAME``; ``kubectl attach -i -c check job/NAME < probe.py``;
``kubectl wait --for=condition=complete job/NAME``; ``kubectl logs job/NAME`` (the probe's JSON);
``kubectl delete job NAME``. No cluster is reachable from here, so :func:`kubernetes_session` raises
ChecksIncompleteError (exit 23) instead of pretending; ``builder check REF --cluster NAME --manifest`` prints
the Jobs.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, NoReturn

from builder.errors import ChecksIncompleteError, ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from builder.compat.fleet_model import RunnerSettings

#: the device-plugin resource and the GPU feature discovery product label of each vendor (sources above)
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
PRODUCT_LABEL = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.product-name"}

#: a DNS-1123 label (Job names; https://kubernetes.io/docs/concepts/overview/working-with-objects/names/)
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")


def gfd_product(gpu_name: str) -> str:
    """The ``nvidia.com/gpu.product`` value GPU feature discovery writes for an ``nvidia-smi`` GPU name:
    spaces become ``-`` (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``)."""
    return "-".join(gpu_name.split())


#: ``docker run --shm-size`` units (binary: https://docs.docker.com/reference/cli/docker/container/run/) as
#: Kubernetes quantity suffixes (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/)
_SIZE_UNITS = {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}


def k8s_quantity(docker_size: str) -> str:
    """A Docker size (``1g``, ``512m``, ``64k``, bytes) as a Kubernetes quantity (``1Gi``, ``512Mi``, ``64Ki``).
    Raises ConfigError for anything else."""
    m = re.fullmatch(r"(\d+)([bkmg]?)", docker_size.strip().lower())
    if m is None:
        raise ConfigError(f"--shm-size {docker_size!r} is not a size such as 1g or 512m")
    return m.group(1) + _SIZE_UNITS[m.group(2)]


def job_name(cluster: str, image: str, step: str) -> str:
    """``builder-check-<cluster>-<step>-<10 hex of the image and step>``, cut to 63 characters."""
    digest = hashlib.sha256(f"{image}\n{step}".encode()).hexdigest()[:10]
    base = _NAME_CHARS.sub("-", f"builder-check-{cluster}-{step}".lower()).strip("-")
    return f"{base[: 63 - 11]}-{digest}"


def job_manifest(
    *,
    cluster: str,
    settings: RunnerSettings,
    vendor: str | None,
    gpu_names: Sequence[str],
    image: str,
    command: Sequence[str],
    step: str,
    stdin: bool,
    timeout: float,
    shm_size: str | None = None,
) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs ``command`` in ``image`` (pin it by digest) on ``cluster`` (see the
    module docstring). ``vendor``: ``nvidia`` | ``amd`` asks for ``settings.gpus`` GPUs and selects the node
    by ``settings.gpu_product`` (default for NVIDIA: :func:`gfd_product` of the cluster's first GPU);
    None: a CPU check, no GPU asked. ``shm_size``: a memory-backed ``/dev/shm`` of that size."""
    labels = {"app.kubernetes.io/managed-by": "builder", "builder.dev/cluster": cluster, "builder.dev/step": step}
    container: dict[str, Any] = {
        "name": "check",
        "image": image,
        "command": list(command[:1]),
        "args": list(command[1:]),
        "stdin": stdin,
        "stdinOnce": stdin,
    }
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    selector = dict(settings.node_selector)
    if vendor in GPU_RESOURCE:
        container["resources"] = {"limits": {GPU_RESOURCE[vendor]: settings.gpus}}
        product = settings.gpu_product or (gfd_product(gpu_names[0]) if vendor == "nvidia" and gpu_names else None)
        if product:
            selector[PRODUCT_LABEL[vendor]] = product
    if settings.runtime_class:
        pod["runtimeClassName"] = settings.runtime_class
    if selector:
        pod["nodeSelector"] = selector
    if shm_size:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": k8s_quantity(shm_size)}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(cluster, image, step), "namespace": settings.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, int(timeout)),
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        },
    }


def not_run_here(cluster: str | None, settings: RunnerSettings, reference: str = "REF") -> ChecksIncompleteError:
    """Why a check on the Kubernetes cluster ``cluster`` does not run from here (builder renders the Jobs,
    it does not reach the cluster), with the command that renders them for ``reference``."""
    return ChecksIncompleteError(
        f"cluster {cluster} runs checks on Kubernetes (namespace {settings.namespace}"
        + (f", context {settings.context}" if settings.context else "")
        + "): builder renders the Jobs, it does not reach the cluster, so nothing ran there",
        hint=f"render the Jobs with `builder check {reference} --cluster {cluster} --manifest > jobs.yaml` and "
        "run them with kubectl as docs/kubernetes.md shows",
        cluster=cluster,
    )


def kubernetes_session(cluster: str | None, settings: RunnerSettings) -> NoReturn:
    """Refuses (:func:`not_run_here`): raises ChecksIncompleteError (exit 23: not checked from here, not a
    runner failure) naming the way to the Jobs (docs/kubernetes.md)."""
    raise not_run_here(cluster, settings)


__all__ = [
    "GPU_RESOURCE",
    "PRODUCT_LABEL",
    "gfd_product",
    "job_manifest",
    "job_name",
    "k8s_quantity",
    "kubernetes_session",
    "not_run_here",
]
