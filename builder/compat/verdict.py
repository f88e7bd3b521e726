"""Can image X start and run on host Y? One pure function, :func:`check_compat`.

Verdicts (sources: CUDA compatibility guide, https://docs.nvidia.com/deploy/cuda-compatibility/ for
minor-version and forward compatibility; container toolkit ``NVIDIA_REQUIRE_CUDA``,
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html):

- ``ok``: the host driver supports the image's CUDA line (and, for an image with ``NVIDIA_REQUIRE_CUDA``,
  a ``cuda>=`` term of it matches);
- ``minor-version-compat``: an application without a hook requirement, built with a newer CUDA minor of
  the same major, runs on a driver at or above the major's floor (12.x: 525.60.13), without features or
  PTX that need the newer driver - warn;
- ``forward-compat``: the image starts through an exemption term (``brand=B,driver>=N,driver<N+1``) or,
  without a hook requirement, the driver branch is one NVIDIA lists for forward compatibility of that
  line; needs the ``cuda-compat`` package in the image; works on data-center/professional GPUs only
  (GeForce/TITAN fail with CUDA error 804);
- ``blocked``: the container hook refuses it, or it cannot run (no driver path, GPU architecture not in
  the image's compiled list, CUDA image on an AMD host, ...).

An ``NVIDIA_REQUIRE_CUDA`` whose evaluation is undetermined (an exemption term would match if the unknown
brand were exempted) is ``blocked`` - fail closed: nothing shows the image starts - and the reason says that
the brand decides it and how to supply it; it never reads as a match or as a refusal by brand.

``min_driver`` is the driver that would make the verdict ``ok`` (the lowest Linux minimum of the image's
CUDA line); ``reasons`` say why, naming the rule and the table row.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Literal

from packaging.version import InvalidVersion, Version
from typing_extensions import TypedDict

from builder.compat._data import major_minor, rocm_rows
from builder.compat.drivers import (
    driver_cuda,
    min_driver_row,
    minor_floor,
    parse_cuda,
    parse_driver,
)
from builder.compat.frameworks import ArchCoverage, arch_coverage, rocm_row
from builder.compat.generations import check_generation
from builder.compat.gpus import GpuClass, GpuInfo, brand_class, brand_from_name, gpu_info, normalize_brand, sm_of
from builder.compat.kernels import KernelBinary, KernelVerdict, kernel_verdicts
from builder.compat.requirement import Host, evaluate, forward_compat_branches, parse_requirement, require_cuda
from builder.errors import IncompatibleError, NotFoundError

if TYPE_CHECKING:
    from builder.compat.requirement import Evaluation, Requirement

VerdictName = Literal["ok", "minor-version-compat", "forward-compat", "blocked"]
#: the GPU vendor of a host as :func:`check_compat` understood it
HostVendor = Literal["nvidia", "amd"]
#: where the brand of a verdict came from: the host's tool (``nvidia-smi -q``), the GPU name, or nowhere
BrandSource = Literal["host", "gpu-name", "unknown"]
#: worst last: used to combine verdicts (a fleet's worst cluster, a cluster's worst host).
SEVERITY: dict[str, int] = {"ok": 0, "minor-version-compat": 1, "forward-compat": 2, "blocked": 3}


class VerdictDocument(TypedDict):
    """A :class:`Verdict` as JSON (``builder compat check --json``; each cluster, host and GPU row of the
    fleet and static verdicts extends it)."""

    verdict: VerdictName
    min_driver: str | None
    reasons: list[str]
    arch_covered: bool | None
    vendor: HostVendor
    driver: str | None
    driver_cuda: str | None
    image_cuda: str | None
    image_rocm: str | None
    gpu: str | None
    gpu_model: str | None
    gpu_class: GpuClass
    brand: str | None
    brand_source: BrandSource
    target: str | None
    matched_term: str | None
    needs_cuda_compat: bool
    min_driver_row: str | None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The answer of :func:`check_compat`.

    ``verdict``: ok | minor-version-compat | forward-compat | blocked; ``min_driver``: the driver that would
    make it ``ok`` (None when no driver helps or the CUDA line is unknown); ``reasons``: why, one sentence
    each; ``arch_covered``: the GPU's compute capability / gfx target is in the image's compiled list (None
    when either is unknown). The other fields record the inputs as understood."""

    verdict: VerdictName
    min_driver: str | None
    reasons: tuple[str, ...]
    arch_covered: bool | None = None
    vendor: HostVendor = "nvidia"
    driver: str | None = None
    driver_cuda: str | None = None
    image_cuda: str | None = None
    image_rocm: str | None = None
    gpu: str | None = None
    gpu_model: str | None = None
    gpu_class: GpuClass = "unknown"
    brand: str | None = None
    brand_source: BrandSource = "unknown"
    target: str | None = None  # compute capability or gfx target
    matched_term: str | None = None
    needs_cuda_compat: bool = False
    min_driver_row: str | None = None
    gpu_code: bool = True  # False: a CPU image (no CUDA, NVIDIA_REQUIRE_CUDA or ROCm): nothing to cover

    @property
    def arch_text(self) -> str:
        """``arch_covered`` for people: ``yes`` | ``no`` | ``unknown`` | ``not applicable (no GPU
        code)`` for a CPU image, whose GPU architecture coverage is no question at all."""
        if not self.gpu_code:
            return "not applicable (no GPU code)"
        return {True: "yes", False: "no", None: "unknown"}[self.arch_covered]

    @property
    def ok(self) -> bool:
        """True unless blocked (the exit-code rule of ``builder compat check``)."""
        return self.verdict != "blocked"

    def to_json(self) -> VerdictDocument:
        return {
            "verdict": self.verdict,
            "min_driver": self.min_driver,
            "reasons": list(self.reasons),
            "arch_covered": self.arch_covered,
            "vendor": self.vendor,
            "driver": self.driver,
            "driver_cuda": self.driver_cuda,
            "image_cuda": self.image_cuda,
            "image_rocm": self.image_rocm,
            "gpu": self.gpu,
            "gpu_model": self.gpu_model,
            "gpu_class": self.gpu_class,
            "brand": self.brand,
            "brand_source": self.brand_source,
            "target": self.target,
            "matched_term": self.matched_term,
            "needs_cuda_compat": self.needs_cuda_compat,
            "min_driver_row": self.min_driver_row,
        }

    def incompatibility(self) -> IncompatibleError | None:
        """The error ``builder compat check`` exits with (11) when the verdict is ``blocked``, else None."""
        if self.ok:
            return None
        return IncompatibleError(
            "the image cannot start or run on this host"
            + (f": needs driver >= {self.min_driver}" if self.min_driver else ""),
            verdict=self.to_json(),
        )


@dataclasses.dataclass(frozen=True)
class ImageSpec:
    """The image side of a compatibility question as a user states it: ``cuda`` (the CUDA line its
    application is built with, no hook requirement), ``require`` (its ``NVIDIA_REQUIRE_CUDA``, checked
    by the container hook), ``image_cuda`` (a release of the official ``nvidia/cuda`` images: their
    ``NVIDIA_REQUIRE_CUDA`` is used), ``rocm`` (the ROCm release of a ROCm image) and ``archs`` (the
    compiled architectures: ``sm_80``, ``compute_90``, ``gfx942``) and ``kernels`` (the GPU code measured
    in its libraries, :class:`builder.compat.kernels.KernelBinary`: when given, each library is judged per
    GPU and ``archs`` is not used). Nothing given: a CPU image."""

    cuda: str | None = None
    require: str | None = None
    image_cuda: str | None = None
    rocm: str | None = None
    archs: tuple[str, ...] = ()
    kernels: tuple[KernelBinary, ...] = ()

    @staticmethod
    def parse_archs(text: str | None) -> tuple[str, ...]:
        """``"sm_80,sm_90;compute_90"`` / ``"gfx90a gfx942"`` -> the architectures (commas, semicolons or
        spaces separate them; empty -> ``()``)."""
        if not text:
            return ()
        return tuple(a.strip() for a in text.replace(";", ",").replace(" ", ",").split(",") if a.strip())

    @property
    def requirement(self) -> str | None:
        """The ``NVIDIA_REQUIRE_CUDA`` the hook checks: ``require``, else that of the official image of
        ``image_cuda`` (:func:`builder.compat.require_cuda`; NotFoundError for an unknown release)."""
        return self.require or (require_cuda(self.image_cuda) if self.image_cuda else None)

    @property
    def vendor(self) -> HostVendor:
        """The GPU vendor the image needs: ``amd`` for a ROCm image, else ``nvidia``."""
        return "amd" if self.rocm else "nvidia"


def check_image(
    image: ImageSpec,
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    compute_capability: str | None = None,
    driver_cuda_version: str | None = None,
    vendor: str | None = None,
) -> Verdict:
    """:func:`check_compat` for an :class:`ImageSpec` (``builder compat check``): the host arguments are
    those of :func:`check_compat`. Raises ConfigError (unparsable versions or expression), NotFoundError
    (``image_cuda`` not a known release)."""
    if image.cuda is not None:
        min_driver_row(image.cuda)  # NotFoundError for a CUDA release no table knows: no verdict from guesses
    return check_compat(
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=image.cuda,
        require=image.requirement,
        image_archs=image.archs,
        compute_capability=compute_capability,
        driver_cuda_version=driver_cuda_version,
        rocm=image.rocm,
        vendor=vendor,
        kernels=image.kernels,
    )


def worst(verdicts: list[Verdict]) -> Verdict | None:
    """The most severe verdict (blocked > forward-compat > minor-version-compat > ok)."""
    return max(verdicts, key=lambda v: SEVERITY[v.verdict]) if verdicts else None


def check_compat(
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    cuda: str | None = None,
    require: str | None = None,
    image_archs: tuple[str, ...] = (),
    compute_capability: str | None = None,
    driver_cuda_version: str | None = None,
    rocm: str | None = None,
    vendor: str | None = None,
    kernels: tuple[KernelBinary, ...] = (),
) -> Verdict:
    """Can an image start and run on a host?

    Host: ``driver`` (NVIDIA ``550.144.03``; AMD: the ROCm release of the host's amdgpu driver, ``6.3``, or
    None), ``gpu`` (name as the vendor tool prints it), ``brand`` (nvidia-smi "Product Brand"; derived from
    the GPU name only when None), ``compute_capability`` (``"9.0"`` or ``"gfx942"``; from the GPU table when
    None), ``driver_cuda_version`` (nvidia-smi "CUDA Version"; from the driver table when None), ``vendor``
    (``nvidia`` | ``amd``; from the GPU name when None).

    Image: ``cuda`` (the CUDA line its application is built with), ``require`` (its ``NVIDIA_REQUIRE_CUDA``;
    when given the hook check applies), ``rocm`` (ROCm release of a ROCm image), ``image_archs`` (compiled
    list: ``sm_80 ... compute_90`` / ``gfx90a ...``), ``kernels`` (the GPU code measured in the image's
    libraries: each is judged on the GPU, :func:`builder.compat.kernels.kernel_verdict`; a library with no
    code the GPU can run makes the verdict ``blocked`` naming it, one that only JITs adds a reason). No
    cuda, require or rocm: a CPU image (``ok``).

    Pure: raises ConfigError only for unparsable versions or expressions."""
    driver, gpu = _known(driver), _known(gpu)  # brand placeholders: normalize_brand
    driver_cuda_version, compute_capability = _known(driver_cuda_version), _known(compute_capability)
    info = gpu_info(gpu) if gpu else None
    named_amd = bool(gpu and re.match(r"(?:AMD|ATI|Radeon|Instinct)\b", gpu, re.I))
    given_vendor = (
        vendor
        or (info.vendor if info else None)
        or ("amd" if named_amd or (rocm and not (cuda or require)) else "nvidia")
    ).lower()
    host_vendor: HostVendor = "amd" if given_vendor == "amd" else "nvidia"
    target = compute_capability or (info.target if info else None)
    jit_cuda = driver_cuda_version or (driver_cuda(driver) if driver and host_vendor == "nvidia" and kernels else None)
    measured = kernel_verdicts(kernels, target, vendor=host_vendor, driver_cuda=jit_cuda)
    if measured:
        arch: ArchCoverage | None = _measured_coverage(measured)
    else:
        arch = arch_coverage(target, tuple(image_archs)) if image_archs else None
    common: dict[str, Any] = {
        "gpu": gpu,
        "gpu_model": info.model if info else None,
        "target": target,
        "arch_covered": arch.covered if arch else None,
        "driver": driver,
    }
    if not (cuda or require or rocm):
        reasons = ["CPU image: no GPU driver requirement"]
        return Verdict(
            "ok", None, tuple(reasons), vendor=host_vendor, gpu_code=False, **{**common, "arch_covered": None}
        )
    verdict = _check_vendor(
        host_vendor,
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=cuda,
        require=require,
        rocm=rocm,
        info=info,
        driver_cuda_version=driver_cuda_version,
        arch=arch,
        target=target,
        common=common,
    )
    verdict = _apply_kernels(verdict, measured)
    if gpu and info is None and compute_capability is None and not measured:
        # never "ok" on silence: a GPU the tables do not know has not had its architecture checked
        verdict = dataclasses.replace(
            verdict,
            reasons=(
                *verdict.reasons,
                f"GPU {gpu!r} is not in builder's GPU table (builder/compat/data/gpus.csv): whether the driver and "
                "the image support its architecture was not checked - pass its compute capability or gfx target "
                "(--cc)",
            ),
        )
    return verdict


def _measured_coverage(rows: tuple[KernelVerdict, ...]) -> ArchCoverage:
    """Architecture coverage from the measured libraries: covered when each runs natively or by JIT."""
    missing = [r.path for r in rows if r.verdict == "none"]
    if missing:
        return ArchCoverage(False, "missing", f"no code for the GPU in {', '.join(missing)}")
    how = "ptx" if any(r.verdict == "jit" for r in rows) else "exact"
    return ArchCoverage(True, how, f"every GPU library of the image has code for the GPU ({len(rows)} measured)")


def _apply_kernels(verdict: Verdict, rows: tuple[KernelVerdict, ...]) -> Verdict:
    """The measured libraries judged on the GPU (:func:`builder.compat.kernels.kernel_verdicts`): any
    ``none`` blocks the verdict naming the library; ``jit`` ones add a reason; ``arch_covered`` then
    says whether every library runs natively or by JIT."""
    if not rows or verdict.vendor not in ("nvidia", "amd"):
        return verdict
    missing = [r for r in rows if r.verdict == "none"]
    jit = [r for r in rows if r.verdict == "jit"]
    reasons = verdict.reasons + tuple(r.reason for r in missing) + tuple(r.reason for r in jit)
    if missing:
        return dataclasses.replace(
            verdict, verdict="blocked", reasons=reasons, arch_covered=False, needs_cuda_compat=False
        )
    return dataclasses.replace(verdict, reasons=reasons, arch_covered=True)


def _check_vendor(
    host_vendor: HostVendor,
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    cuda: str | None,
    require: str | None,
    rocm: str | None,
    info: GpuInfo | None,
    driver_cuda_version: str | None,
    arch: ArchCoverage | None,
    target: str | None,
    common: dict[str, Any],
) -> Verdict:
    """The verdict before the measured libraries: AMD, a ROCm image on NVIDIA, or NVIDIA."""
    if host_vendor == "amd":
        return _check_amd(
            driver=driver,
            rocm=rocm,
            cuda=cuda or (parse_requirement(require).cuda if require else None),
            info_class=info.gpu_class if info else "unknown",
            arch=arch,
            common=common,
        )
    if rocm and not (cuda or require):
        return Verdict(
            "blocked",
            None,
            (f"ROCm {rocm} image on an NVIDIA host: it needs an AMD GPU (/dev/kfd)",),
            vendor=host_vendor,
            image_rocm=rocm,
            **common,
        )
    verdict = _check_nvidia(
        driver=driver,
        gpu=gpu,
        brand=brand,
        cuda=cuda,
        require=require,
        info_class=info.gpu_class if info else None,
        info_brand=info.brand if info else None,
        driver_cuda_version=driver_cuda_version,
        arch=arch,
        common=common,
    )
    return _apply_generation(verdict, target=target, driver=driver, arch_covered=arch.covered if arch else None)


def _apply_generation(
    verdict: Verdict, *, target: str | None, driver: str | None, arch_covered: bool | None
) -> Verdict:
    """GPU generation rules (``gpu-archs.csv``): the driver branch must support the GPU's architecture
    (first/last branch) and so must the image's CUDA release (first toolkit / last major); else ``blocked``."""
    gen = check_generation(target, driver=driver, image_cuda=verdict.image_cuda, image_archs_cover=arch_covered is True)
    if gen.row is None and not gen.notes:
        return verdict
    reasons = verdict.reasons + gen.notes + gen.blocked
    need = verdict.min_driver
    if gen.cuda_blocked or (gen.driver_blocked and gen.row is not None and gen.row.last_driver_branch is not None):
        need = None  # no newer driver helps: the CUDA release lacks the architecture, or the driver dropped it
    elif gen.min_driver and (need is None or Version(gen.min_driver) > Version(need)):
        need = gen.min_driver
    if gen.blocked:
        return dataclasses.replace(
            verdict, verdict="blocked", reasons=reasons, min_driver=need, needs_cuda_compat=False
        )
    return dataclasses.replace(verdict, reasons=reasons, min_driver=need)


_UNKNOWN = {"", "n/a", "[n/a]", "not found", "unknown", "none", "null", "-"}


def _known(value: str | None) -> str | None:
    """Tool placeholders (``N/A``, ``[N/A]``, ``Not Found``, empty) mean unknown: None."""
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _UNKNOWN else v


def _check_nvidia(
    *,
    driver: str | None,
    gpu: str | None,
    brand: str | None,
    cuda: str | None,
    require: str | None,
    info_class: GpuClass | None,
    info_brand: str | None,
    driver_cuda_version: str | None,
    arch: ArchCoverage | None,
    common: dict[str, Any],
) -> Verdict:
    reasons: list[str] = []
    req = parse_requirement(require) if require else None
    image_cuda = major_minor(parse_cuda(cuda)) if cuda else (req.cuda if req else None)

    host_brand = normalize_brand(brand)
    brand_source: BrandSource = "host" if host_brand else "unknown"
    if host_brand is None and gpu:
        host_brand = brand_from_name(gpu) or info_brand
        brand_source = "gpu-name" if host_brand else "unknown"
    # class: from the GPU table when the model is known, else from the brand; a vGPU brand wins (virtual)
    gclass: GpuClass = info_class or brand_class(host_brand)
    if brand_class(host_brand) == "virtual":
        gclass = "virtual"
    if brand_source == "gpu-name":
        reasons.append(f"brand {host_brand!r} derived from the GPU name {gpu!r} (pass the host's Product Brand)")

    need: str | None = None
    need_row: str | None = None
    if image_cuda:
        try:
            row = min_driver_row(image_cuda)
            need, need_row = row.min_driver, row.source
        except NotFoundError:
            reasons.append(f"CUDA {image_cuda} is not in cuda-driver.csv: its minimum driver is unknown")

    base: dict[str, Any] = {
        **common,
        "vendor": "nvidia",
        "image_cuda": image_cuda,
        "brand": host_brand,
        "brand_source": brand_source,
        "gpu_class": gclass,
        "min_driver_row": need_row,
    }
    if driver is None:
        reasons.append("driver version unknown: cannot show the image can start (fail closed)")
        return _finish("blocked", need, reasons, arch, base)

    d = parse_driver(driver)
    host_cuda = major_minor(parse_cuda(driver_cuda_version)) if driver_cuda_version else driver_cuda(driver)
    base["driver_cuda"] = host_cuda
    src = "reported" if driver_cuda_version else "per cuda-driver.csv"
    case = _NvidiaCase(
        driver=d,
        host_cuda=host_cuda,
        host_txt=f"driver {driver} supports CUDA {host_cuda or 'unknown'} ({src})",
        host_brand=host_brand,
        gclass=gclass,
        image_cuda=image_cuda,
        need=need,
        need_row=need_row,
        reasons=reasons,
        arch=arch,
        base=base,
    )
    if req is not None:
        ev = evaluate(req, Host(driver=driver, cuda=host_cuda, brand=host_brand, arch=common.get("target")))
        base["matched_term"] = ev.matched
        verdict = _requirement_verdict(case, req, ev)
        if verdict is not None:
            return verdict
    # no hook requirement (or the image starts): the application's CUDA against the driver
    return _driver_verdict(case)


@dataclasses.dataclass(frozen=True)
class _NvidiaCase:
    """One image on one NVIDIA host with a known driver: ``driver`` (parsed), ``host_cuda`` (the newest CUDA it
    supports) and ``host_txt`` (the sentence saying so), the host's brand and GPU class, the image's CUDA
    line with its minimum driver (``need``) and table row; ``reasons`` collects in order, ``base`` holds the
    :class:`Verdict` fields decided so far."""

    driver: Version
    host_cuda: str | None
    host_txt: str
    host_brand: str | None
    gclass: GpuClass
    image_cuda: str | None
    need: str | None
    need_row: str | None
    reasons: list[str]
    arch: ArchCoverage | None
    base: dict[str, Any]

    def finish(self, verdict: VerdictName) -> Verdict:
        return _finish(verdict, self.need, self.reasons, self.arch, self.base)

    def forward_compat(self) -> Verdict:
        return _forward_compat(
            self.gclass, self.host_brand, self.driver, self.image_cuda, self.need, self.reasons, self.arch, self.base
        )


def _requirement_verdict(case: _NvidiaCase, req: Requirement, ev: Evaluation) -> Verdict | None:
    """The verdict the hook's ``NVIDIA_REQUIRE_CUDA`` evaluation ``ev`` decides; None when the image starts
    and its application's CUDA must still be checked against the driver (or the requirement is empty)."""
    reasons, image_cuda, host_cuda = case.reasons, case.image_cuda, case.host_cuda
    if ev.empty:
        reasons.append("NVIDIA_REQUIRE_CUDA is empty: the hook checks nothing")
        return None
    if ev.satisfied and not ev.matched_exemption:
        reasons.append(f"{case.host_txt}; NVIDIA_REQUIRE_CUDA term {ev.matched!r} is satisfied")
        if image_cuda is None or host_cuda is None or Version(host_cuda) >= Version(image_cuda):
            return case.finish("ok")
        reasons.append(
            f"the image starts, but its application is built with CUDA {image_cuda}, newer than its "
            f"NVIDIA_REQUIRE_CUDA (cuda>={req.cuda}) says"
        )
        return None
    if ev.satisfied:
        reasons.append(
            f"{case.host_txt} < CUDA {image_cuda}: the image starts only through the exemption term {ev.matched!r} "
            f"(driver branch R{case.driver.major} is listed for forward compatibility)"
        )
        return case.forward_compat()
    return _requirement_refused(case, req, ev)


def _requirement_refused(case: _NvidiaCase, req: Requirement, ev: Evaluation) -> Verdict:
    """Blocked: the hook refuses the image. The reasons say what driver is needed, why no exemption applies
    (or that it cannot be told), the clause the hook will name, and whether minor-version compatibility would
    have run the application."""
    reasons, need, d, host_brand = case.reasons, case.need, case.driver, case.host_brand
    needed = f">= {need}" if need else "a newer driver"
    reasons.append(
        f"{case.host_txt} < CUDA {case.image_cuda}: NVIDIA_REQUIRE_CUDA is not satisfied; needs driver {needed}"
        + (f" ({case.need_row})" if case.need_row else "")
    )
    brands = sorted({b for b, _ in req.exemptions()})
    branches = sorted({n for _, n in req.exemptions()})
    if brands:
        if host_brand is None and d.major in branches:
            reasons.append(
                f"cannot tell whether an exemption applies: brand unknown and branch R{d.major} is exempted "
                f"for brands {', '.join(brands)}; pass nvidia-smi -q 'Product Brand' (--brand)"
            )
        elif host_brand is not None and host_brand not in brands:
            reasons.append(
                f"no exemption applies: brand {host_brand!r} is not exempted (exempted brands: "
                f"{', '.join(brands)}; branches: {', '.join(f'R{b}' for b in branches)})"
            )
        elif d.major not in branches:
            reasons.append(
                f"no exemption applies: branch R{d.major} is not exempted "
                f"(branches: {', '.join(f'R{b}' for b in branches)})"
            )
    if ev.last_failed:
        reasons.append(
            f"nvidia-container-cli would report only the last clause it evaluated ('unsatisfied condition: "
            f"{ev.last_failed}'), which is not the fix"
        )
    if case.image_cuda and _minor_ok(d, case.image_cuda):
        reasons.append(
            "the application itself could run through minor-version compatibility, but the hook refuses "
            "the image (setting NVIDIA_DISABLE_REQUIRE=true would skip the check: never silently)"
        )
    return case.finish("blocked")


def _driver_verdict(case: _NvidiaCase) -> Verdict:
    """The application's CUDA against the driver: full support, minor-version compatibility, forward
    compatibility (listed branches), else blocked."""
    reasons, image_cuda, host_cuda, need, d = case.reasons, case.image_cuda, case.host_cuda, case.need, case.driver
    if image_cuda is None:
        return case.finish("ok")
    ic = Version(image_cuda)
    if host_cuda is not None and Version(host_cuda) >= ic:
        reasons.append(f"{case.host_txt} >= CUDA {image_cuda}")
        return case.finish("ok")
    floor = minor_floor(image_cuda)
    if _minor_ok(d, image_cuda):
        reasons.append(
            f"{case.host_txt} < CUDA {image_cuda}: runs through minor-version compatibility (CUDA {ic.major}.x needs "
            f">= {floor}); features and PTX that need a newer driver are missing; a container with "
            f"NVIDIA_REQUIRE_CUDA=cuda>={image_cuda} would not start"
        )
        return case.finish("minor-version-compat")
    if floor:
        reasons.append(
            f"{case.host_txt} < CUDA {image_cuda}: CUDA {ic.major}.x needs driver >= {floor} even through "
            f"minor-version compatibility; full support needs >= {need}"
        )
    else:
        reasons.append(f"{case.host_txt} < CUDA {image_cuda}; needs driver >= {need} (no minor-version compatibility)")
    fc = forward_compat_branches(image_cuda)
    if d.major in fc:
        reasons.append(
            f"driver branch R{d.major} is listed for forward compatibility of CUDA {image_cuda} "
            f"(branches: {', '.join(f'R{b}' for b in fc)})"
        )
        return case.forward_compat()
    if fc:
        reasons.append(
            f"no forward compatibility either: branch R{d.major} is not among {', '.join(f'R{b}' for b in fc)}"
        )
    return case.finish("blocked")


def _minor_ok(d: Version, image_cuda: str) -> bool:
    floor = minor_floor(image_cuda)
    return floor is not None and d >= Version(floor)


def _forward_compat(
    gclass: GpuClass,
    host_brand: str | None,
    d: Version,
    image_cuda: str | None,
    need: str | None,
    reasons: list[str],
    arch: ArchCoverage | None,
    base: dict[str, Any],
) -> Verdict:
    base = {**base, "needs_cuda_compat": True}
    if gclass in ("datacenter", "professional", "virtual"):
        reasons.append(
            f"forward compatibility: the image must ship cuda-compat (libcuda from the image); supported on "
            f"{gclass} GPUs on listed branches; upgrade to >= {need} for full support"
        )
        return _finish("forward-compat", need, reasons, arch, base)
    if gclass == "unknown":
        reasons.append(
            "forward compatibility needs a data-center or professional GPU and the GPU class is unknown: "
            "on GeForce/TITAN it fails with CUDA error 804"
        )
        return _finish("forward-compat", need, reasons, arch, base)
    # consumer GPU: forward compatibility fails (CUDA error 804)
    if image_cuda and _minor_ok(d, image_cuda):
        reasons.append(
            "consumer GPU: forward compatibility is not supported (CUDA error 804 if the cuda-compat libraries are "
            "used); it runs only through minor-version compatibility"
        )
        return _finish("minor-version-compat", need, reasons, arch, {**base, "needs_cuda_compat": False})
    reasons.append(
        f"consumer GPU (brand {host_brand}): forward compatibility is not supported "
        "('forward compatibility was attempted on non supported HW', CUDA error 804)"
    )
    return _finish("blocked", need, reasons, arch, {**base, "needs_cuda_compat": False})


def _finish(
    verdict: VerdictName, need: str | None, reasons: list[str], arch: ArchCoverage | None, base: dict[str, Any]
) -> Verdict:
    if arch is not None:
        reasons.append(("architecture: " if arch.covered is not False else "architecture not covered: ") + arch.detail)
        if arch.covered is False:
            verdict = "blocked"
    return Verdict(verdict=verdict, min_driver=need, reasons=tuple(reasons), **base)


def _check_amd(
    *,
    driver: str | None,
    rocm: str | None,
    cuda: str | None,
    info_class: GpuClass,
    arch: ArchCoverage | None,
    common: dict[str, Any],
) -> Verdict:
    reasons: list[str] = []
    base: dict[str, Any] = {**common, "vendor": "amd", "image_rocm": rocm, "gpu_class": info_class}
    if cuda and not rocm:
        reasons.append(f"CUDA {cuda} image on an AMD host: it needs an NVIDIA GPU and driver")
        return _finish("blocked", None, reasons, arch, base)
    assert rocm is not None
    row = rocm_row(rocm)
    target = common.get("target")
    if row is None:
        reasons.append(f"ROCm {rocm} is not in rocm.csv: support of the GPU and driver cannot be checked")
    else:
        if target and target.startswith("gfx"):
            if target in row.gfx_targets:
                reasons.append(f"{target} is supported by ROCm {row.rocm}")
            else:
                reasons.append(
                    f"{target} is not in ROCm {row.rocm}'s supported targets "
                    f"({', '.join(row.gfx_targets)}): unsupported"
                )
        if driver:
            try:
                kmd: str | None = major_minor(Version(driver))
            except InvalidVersion:  # not a ROCm release: say so, do not guess
                kmd = None
            known_lines = {major_minor(Version(r.rocm)) for r in rocm_rows()}
            if kmd is None or kmd not in known_lines:
                # an amdgpu/kernel version (amd-smi "amdgpu version: 6.10.5") is not a ROCm release: never guess
                reasons.append(
                    f"amdgpu driver {driver!r} is not a known ROCm release (pass amd-smi's 'ROCm version'): "
                    "driver compatibility not checked"
                )
            elif kmd in row.kmd_tested:
                reasons.append(f"amdgpu driver of ROCm {kmd} is tested with ROCm {row.rocm} user space")
            else:
                reasons.append(
                    f"amdgpu driver of ROCm {kmd} is not among the tested drivers for ROCm {row.rocm} user space "
                    f"({', '.join(row.kmd_tested)}): upgrade the host driver"
                )
                return _finish("blocked", None, reasons, arch, base)
        else:
            reasons.append("amdgpu driver release unknown: driver compatibility not checked")
    return _finish("ok", None, reasons, arch, base)


__all__ = [
    "SEVERITY",
    "BrandSource",
    "HostVendor",
    "ImageSpec",
    "Verdict",
    "VerdictDocument",
    "VerdictName",
    "check_compat",
    "check_image",
    "sm_of",
    "worst",
]
