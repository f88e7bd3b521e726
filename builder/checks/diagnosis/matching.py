"""Matching: which failure kind a message shows, which layer noticed it, and the answer with its facts,
evidence lines and fix (``diagnose(text, context) -> Diagnosis``).

Reads any error output (docker/podman/compose stderr, Kubernetes events, nvidia-smi, PyTorch/TensorFlow/CUDA
messages, rocminfo, Slurm logs). The answer names the layer that is *wrong* (``at_fault``) and the one that
*noticed* (``noticed_by``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from builder.checks.diagnosis.crosscheck import (
    DECIDED_BY_ENGINE,
    ENGINE_FIX,
    alternatives,
    check_driver,
    in_container,
    on_bare_metal,
)
from builder.checks.diagnosis.facts import min_driver
from builder.checks.diagnosis.integration import NOT_INJECTED, missing_capability
from builder.checks.diagnosis.model import Context, Diagnosis, FailureRule, Layer
from builder.checks.diagnosis.rules import AMD_ANSWERS, RULES, RULES_BY_KEY
from builder.checks.diagnosis.runtime import nccl_versions
from builder.errors import NotFoundError

if TYPE_CHECKING:
    from collections.abc import Sequence

_TOOLKIT_NOTICE = re.compile(
    r"nvidia-container-cli|prestart hook|running hook|error running hook|nvidia-container-runtime", re.I
)
_ENGINE_NOTICE = re.compile(
    r"Error response from daemon|OCI runtime|failed to create shim|Error: setting up CDI|kubelet|"
    r"failed to create containerd task|^docker:|Error: (crun|runc|OCI)",
    re.I | re.M,
)
#: a GPU request in a docker/podman command line (not nvidia-docker 1, whose driver volume is another story)
_GPU_REQUESTED = re.compile(r"--gpus[= ]\S+|--runtime[= ]nvidia\b|--device[= ]nvidia\.com/gpu=")
_FRAMEWORK_NOTICE = re.compile(r"torch|tensorflow|jax|cupy|Traceback", re.I)


def _noticed_by(rule: FailureRule, text: str) -> Layer:
    if rule.key in ("container-toolkit-missing", "cdi-device-unresolvable", "cdi-not-enabled"):
        return "container-engine"
    if _TOOLKIT_NOTICE.search(text):
        return "container-toolkit"
    if rule.key == "toolkit-ldconfig-failed" and not re.search(r"ldcache|ldconfig", text):
        return "image-user-space"  # the program found no driver library (a GPU was requested)
    if _ENGINE_NOTICE.search(text):
        return "container-engine"
    if rule.noticed_by == "image-user-space" and _FRAMEWORK_NOTICE.search(text):
        return "image-user-space"
    if re.search(r"nvidia-smi|NVML|NVIDIA-SMI", text) and rule.key in (
        "driver-not-loaded",
        "driver-library-mismatch",
        "device-cgroup-lost",
    ):
        return "kernel-driver"
    return rule.noticed_by


def _amd(text: str, ctx: Context) -> bool:
    """Whether the failure is on an AMD host: the context's vendor, else AMD-only words in the text."""
    if ctx.vendor:
        return ctx.vendor.lower() == "amd"
    return bool(
        re.search(
            r"\bROCk module\b|/dev/kfd|\bamdgpu\b|\brocminfo\b|\bROCm\b|\brocBLAS\b|\bTensile\b|\bhipError|"
            r"\bHIP_ERROR_|\blibhip|\brocm[_/]",
            text,
        )
    )


def _first_lines(text: str, pattern: re.Pattern[str]) -> list[str]:
    out = []
    for line in text.splitlines():
        if pattern.search(line):
            out.append(line.strip()[:400])
            if len(out) >= 3:
                break
    if not out:
        m = pattern.search(text)
        if m:
            out.append(text[max(0, m.start() - 80) : m.end() + 80].strip().replace("\n", " ")[:400])
    return out


def _resolve_ambiguity(matches: list[FailureRule], text: str, ctx: Context) -> list[FailureRule]:
    """Context-dependent choices between kinds that share phrases."""
    keys = [r.key for r in matches]
    vendor = (ctx.vendor or "").lower()
    tool_missing = re.search(r"\b(nvidia-smi|rocm-smi|amd-smi|rocminfo)\b:? (command )?not found", text)
    if tool_missing:
        tool = tool_missing.group(1)
        nvidia_tool = tool == "nvidia-smi"
        amd_context = vendor == "amd" or re.search(r"/dev/kfd|ROCm|rocm-smi|amdgpu|Instinct|Radeon", text)
        nvidia_context = vendor == "nvidia" or re.search(r"/dev/nvidia|NVIDIA-SMI|CUDA Version", text)
        wrong = (nvidia_tool and amd_context) or (not nvidia_tool and nvidia_context)
        if wrong and "wrong-vendor-tool" in keys:
            matches = [RULES_BY_KEY["wrong-vendor-tool"]] + [r for r in matches if r.key != "wrong-vendor-tool"]
        elif "wrong-vendor-tool" in keys and nvidia_tool:
            matches = [r for r in matches if r.key != "wrong-vendor-tool"] + [RULES_BY_KEY["wrong-vendor-tool"]]
    # an NGC banner ("compatibility mode is UNAVAILABLE") names the driver it needs: error 804 only says why the
    # forward-compatibility fallback did not work
    if (
        "driver-too-old-for-image" in keys
        and "forward-compat-unsupported" in keys
        and re.search(r"compatibility mode is UNAVAILABLE|built for NVIDIA Driver Release", text)
    ):
        matches = [RULES_BY_KEY["driver-too-old-for-image"]] + [
            r for r in matches if r.key != "driver-too-old-for-image"
        ]
    # a symptom (no libcuda, no nvidia-smi, no NVENC library) whose capability the known
    # NVIDIA_DRIVER_CAPABILITIES lacks: the capabilities, whatever else the symptom could mean
    # a GPU that was requested (--gpus, --runtime nvidia, a CDI device) whose driver libraries the container still
    # does not find: the hook mounted them but the container's ld cache does not list them (nvidia-docker#854:
    # `ldconfig` in the container fixed it) - not a missing request
    if "gpu-not-requested" in keys and ctx.engine in (None, "docker", "podman") and _GPU_REQUESTED.search(text):
        ldconfig = RULES_BY_KEY["toolkit-ldconfig-failed"]
        matches = [ldconfig, *[r for r in matches if r.key != ldconfig.key]]
    # a missing driver library on the host itself (TensorFlow's log names the host; no engine anywhere): not a
    # container's missing request, the host's driver install (tensorflow#6233, #3674, #9071)
    if "gpu-not-requested" in keys and on_bare_metal(text, ctx):
        host = RULES_BY_KEY["driver-libs-missing-on-host"]
        matches = [host, *[r for r in matches if r is not host]]
    # a missing driver library (libcuda, nvidia-smi) in a container given raw /dev/nvidia* nodes: the devices are
    # there, the runtime that injects the host's driver libraries was bypassed (not a missing GPU request)
    if "gpu-not-requested" in keys and re.search(r"--device[= ]/dev/nvidia", text):
        matches = [NOT_INJECTED, *[r for r in matches if r is not NOT_INJECTED]]
    # NCCL failing while the ranks report different NCCL versions (each rank prints "NCCL version X.Y.Z"; pip's
    # nvidia-nccl-cuNN==X.Y.Z per node): the ranks disagree, whatever the symptom (NVIDIA/nccl#1267)
    if nccl_versions(text) and re.search(r"NCCL (?:WARN|error)|nccl\w*Error|ncclSocketInit", text, re.I):
        ranks = RULES_BY_KEY["nccl-rank-mismatch"]
        matches = [ranks, *[r for r in matches if r.key != ranks.key]]
    if missing_capability(text, ctx):
        caps = RULES_BY_KEY["driver-capabilities-missing"]
        matches = [caps, *[r for r in matches if r.key != caps.key]]
    return matches


def _decide(
    rule: FailureRule, matches: list[FailureRule], text: str, ctx: Context, facts: dict[str, object]
) -> tuple[FailureRule, list[FailureRule]]:
    """The context's decision (``--engine``) and the cross-check of "driver too old" against the driver and
    CUDA the text or context name (``builder.checks.diagnosis.crosscheck``); adds what decided to ``facts``."""
    decided = DECIDED_BY_ENGINE.get((rule.key, ctx.engine or ""))
    if decided:
        facts["decided_by"] = f"--engine {ctx.engine}: {rule.key} becomes {decided}"
        rule = RULES_BY_KEY[decided]
        matches = [rule, *[r for r in matches if r.key != decided]]
    if rule.key == "driver-too-old-for-image":
        check = check_driver(text, ctx, facts.get("image_cuda"))  # type: ignore[arg-type]
        if check is not None:
            facts.update({k: v for k, v in check.facts().items() if k not in facts or k == "contradiction"})
            if check.sufficient and in_container(text, ctx) and NOT_INJECTED.facts is not None:
                rule = NOT_INJECTED
                matches = [NOT_INJECTED, *matches]
                facts.update(NOT_INJECTED.facts(text, ctx))
    return rule, matches


def _evidence(rule: FailureRule, matches: list[FailureRule], text: str) -> list[str]:
    evidence: list[str] = []
    for candidate in matches:  # a kind decided by cross-checking quotes the lines the text matched
        for p in candidate.patterns:
            if p.search(text):
                evidence.extend(_first_lines(text, p))
                break
        if evidence:
            break
    if not evidence and nccl_versions(text):  # ranks with different NCCL versions: quote them
        evidence.extend(_first_lines(text, re.compile(r"NCCL WARN|NCCL version|nvidia-nccl-cu\d+==")))
    if rule is NOT_INJECTED:
        evidence.extend(_first_lines(text, re.compile(r"--device[= ]/dev/nvidia|nvidia-smi: command not found")))
    return evidence


def _driver_too_old_answer(facts: dict[str, object], summary: str, fix: str) -> tuple[str, str]:
    """Summary and fix of ``driver-too-old-for-image`` from what is known: a contradicted driver, an NGC
    banner's required driver, the image CUDA's minimum driver, or only the driver's CUDA."""
    if facts.get("contradiction"):
        return (
            "the message says the driver is too old, but " + str(facts["contradiction"]),
            "check which libcuda the process loads (`ldconfig -p | grep libcuda`, LD_LIBRARY_PATH): a libcuda from "
            "the CUDA toolkit's compat or stubs directory, or a copy in the image, shadows the host driver's",
        )
    if facts.get("required_driver"):
        return (
            f"the image was built for NVIDIA driver {facts['required_driver']} or later; the host has "
            f"{facts.get('host_driver', '?')} and forward compatibility is unavailable",
            f"on the host: upgrade the driver to >= {facts['required_driver']}, or run an image release built for "
            "the CUDA the driver supports; forward compatibility (cuda-compat) works only on data-center GPUs",
        )
    if facts.get("image_cuda") and facts.get("min_driver"):
        summary = f"the image needs CUDA {facts['image_cuda']}, which needs a driver >= {facts['min_driver']}" + (
            f"; the driver supports CUDA {facts['driver_cuda']}" if facts.get("driver_cuda") else ""
        )
        fix = (
            f"on the host: upgrade the driver to >= {facts['min_driver']} (CUDA {facts['image_cuda']}), or run a "
            "variant built for the CUDA line the driver supports"
        )
    else:
        # the minimum driver depends on the image's CUDA, which this text does not name: say so
        # instead of pointing at a fact that is not there
        if facts.get("driver_cuda"):
            summary = f"the driver supports only CUDA {facts['driver_cuda']}, older than the CUDA runtime in the image"
        fix = (
            "on the host: upgrade the driver to one that supports the image's CUDA"
            + (f" (this driver supports CUDA {facts['driver_cuda']} at most)" if facts.get("driver_cuda") else "")
            + ", or run an image built for the CUDA the driver supports; "
            + (
                f"the minimum driver for CUDA {facts['image_cuda']} is not in builder's table "
                "(builder/compat/data/cuda-driver.csv)"
                if facts.get("image_cuda")
                else "the minimum driver depends on the image's CUDA version, which this message does not name: "
                "pass `--image-cuda X.Y` or `--require-cuda EXPR` (the image's NVIDIA_REQUIRE_CUDA) to name it"
            )
            + "; do not set NVIDIA_DISABLE_REQUIRE to hide it"
        )
    if facts.get("would_satisfy"):
        fix += "; would satisfy NVIDIA_REQUIRE_CUDA: " + "; ".join(facts["would_satisfy"])  # type: ignore[arg-type]
    return summary, fix


_AMBIGUOUS = frozenset(
    {"nccl-system-error", "driver-not-loaded", "gpu-not-requested", "no-gpu-visible", "gpu-program-fault"}
)


def diagnose(text: str, context: Context | None = None) -> Diagnosis:
    """Name the failure kind in ``text`` (any tool's output), the layer at fault and the fix.

    ``facts.alternatives`` lists the other kinds an ambiguous text can be and what decides each; the context
    (``Context.engine``, vendor, host facts) decides where it can. Returns key ``unknown`` (quoting the lines it
    could not place) when nothing matches."""
    ctx = context or Context()
    if not text.strip():
        return _empty()
    matches = [
        r for r in RULES if any(p.search(text) for p in r.patterns) and not any(u.search(text) for u in r.unless)
    ]
    matches = _resolve_ambiguity(matches, text, ctx)
    if not matches:
        return _unknown(text)
    rule = matches[0]
    facts = rule.facts(text, ctx) if rule.facts else {}
    facts = {k: v for k, v in facts.items() if v is not None}
    rule, matches = _decide(rule, matches, text, ctx, facts)
    if len(matches) > 1 or rule.key in _AMBIGUOUS:
        alts = alternatives(rule.key, [r.key for r in matches[1:]])
        if alts:
            facts["alternatives"] = alts
    evidence = _evidence(rule, matches, text)
    summary = rule.summary
    fix = ENGINE_FIX.get((rule.key, ctx.engine or ""), rule.fix)
    if rule.key in AMD_ANSWERS and _amd(text, ctx):
        summary, fix = AMD_ANSWERS[rule.key]
    if rule.key == "driver-too-old-for-image":
        summary, fix = _driver_too_old_answer(facts, summary, fix)
    if rule.key == "forward-compat-unsupported" and ctx.image_cuda:
        drv, _row = min_driver(ctx.image_cuda)
        if drv:
            facts["min_driver"] = drv
            facts["image_cuda"] = ctx.image_cuda
    if rule.key == "forward-compat-unsupported":
        named = (
            f"(>= {facts['min_driver']} for CUDA {facts['image_cuda']})"
            if facts.get("min_driver") and facts.get("image_cuda")
            else "(the minimum depends on the image's CUDA version: pass `--image-cuda X.Y` or `--require-cuda EXPR` "
            "to name it)"
        )
        fix = fix.replace("(see min_driver)", named)
    if rule.key == "gpu-arch-not-in-image" and facts.get("gpu_arch"):
        summary = f"the framework in the image (or a GPU library it loads) has no code for {facts['gpu_arch']}" + (
            f" (compiled for {' '.join(facts['image_archs'])})" if facts.get("image_archs") else ""
        )
    return Diagnosis(
        key=rule.key,
        at_fault=rule.at_fault,
        noticed_by=_noticed_by(rule, text),
        summary=summary,
        fix=fix,
        facts=facts,
        evidence=tuple(dict.fromkeys(evidence)),
        also_matched=tuple(r.key for r in matches[1:]),
    )


_ERRORISH = re.compile(r"error|fail|denied|not found|cannot|unable|fatal|panic|exception|refused|invalid", re.I)


def _unknown(text: str) -> Diagnosis:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    quoted = [line for line in lines if _ERRORISH.search(line)][:5] or lines[-5:]
    return Diagnosis(
        key="unknown",
        at_fault="unknown",
        noticed_by="unknown",
        summary="no known GPU/container failure kind matched; the lines that look like errors are quoted",
        fix="read the quoted lines; `builder hostinfo` shows the host's driver, toolkit and engine facts",
        facts={"quoted": quoted},
        evidence=tuple(quoted),
    )


def _empty() -> Diagnosis:
    return Diagnosis(
        key="unknown",
        at_fault="unknown",
        noticed_by="unknown",
        summary="the input was empty: there is no error text to diagnose",
        fix="pass the failing command's error output: a file, or `-` for standard input "
        "(`docker run ... 2>&1 | builder diagnose -`); sample messages are in tests/data/errors/",
        facts={"input": "empty"},
    )


def read_input(path: Path | str) -> str:
    """The text of ``path`` (undecodable bytes replaced) for ``diagnose``.

    Raises NotFoundError naming the file when it does not exist, is a directory or cannot be
    read (permissions); its hint names ``builder diagnose -`` (standard input) and the samples."""
    p = Path(path)
    hint = "`builder diagnose -` reads the error text from standard input; sample messages are in tests/data/errors/"
    if not p.exists():
        raise NotFoundError(f"error file {p} does not exist", hint=hint, path=str(p))
    if p.is_dir():
        raise NotFoundError(f"error file {p} is a directory, not a file", hint=hint, path=str(p))
    try:
        return p.read_text(errors="replace")
    except OSError as exc:
        raise NotFoundError(
            f"error file {p} cannot be read: {exc.strerror or exc}", hint=hint, path=str(p), errno=exc.errno
        ) from exc


def diagnose_many(texts: Sequence[str], context: Context | None = None) -> Diagnosis:
    """Diagnose the concatenation of several outputs (stderr of each step)."""
    return diagnose("\n".join(t for t in texts if t), context)


__all__ = ["diagnose", "diagnose_many", "read_input"]
