"""The verdict of an image on an NVIDIA host with a known driver (:func:`check_nvidia`): the container hook's
``NVIDIA_REQUIRE_CUDA`` check, then the application's CUDA line against the driver - full support,
minor-version compatibility, forward compatibility (listed branches, data-center/professional GPUs only),
else blocked. What each verdict means and the public sources of these rules: :mod:`builder.compat.verdict`
(CUDA compatibility guide, https://docs.nvidia.com/deploy/cuda-compatibility/; container toolkit
``NVIDIA_REQUIRE_CUDA``,
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from builder.compat._data import major_minor
from builder.compat.drivers import driver_cuda, min_driver_row, minor_floor, parse_cuda, parse_driver
from builder.compat.gpus import GpuClass, brand_class, brand_from_name, normalize_brand
from builder.compat.requirement import Host, evaluate, forward_compat_branches, parse_requirement
from builder.compat.verdict import BrandSource, Verdict, VerdictName, finish_verdict
from builder.errors import NotFoundError

if TYPE_CHECKING:
    from builder.compat.frameworks import ArchCoverage
    from builder.compat.requirement import Evaluation, Requirement


def check_nvidia(
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
        return finish_verdict("blocked", need, reasons, arch, base)

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
        return finish_verdict(verdict, self.need, self.reasons, self.arch, self.base)

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
        return finish_verdict("forward-compat", need, reasons, arch, base)
    if gclass == "unknown":
        reasons.append(
            "forward compatibility needs a data-center or professional GPU and the GPU class is unknown: "
            "on GeForce/TITAN it fails with CUDA error 804"
        )
        return finish_verdict("forward-compat", need, reasons, arch, base)
    # consumer GPU: forward compatibility fails (CUDA error 804)
    if image_cuda and _minor_ok(d, image_cuda):
        reasons.append(
            "consumer GPU: forward compatibility is not supported (CUDA error 804 if the cuda-compat libraries are "
            "used); it runs only through minor-version compatibility"
        )
        return finish_verdict("minor-version-compat", need, reasons, arch, {**base, "needs_cuda_compat": False})
    reasons.append(
        f"consumer GPU (brand {host_brand}): forward compatibility is not supported "
        "('forward compatibility was attempted on non supported HW', CUDA error 804)"
    )
    return finish_verdict("blocked", need, reasons, arch, {**base, "needs_cuda_compat": False})


__all__ = ["check_nvidia"]
