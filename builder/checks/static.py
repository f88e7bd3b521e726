"""Static compatibility verdicts of an image (nothing runs): on a saved host, or on every cluster of a fleet.
Both ask ``builder.compat`` (``check_compat`` per GPU; ``check_fleet`` and ``summarize`` per fleet), so they
agree with ``builder compat check`` / ``builder compat fleet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder import compat
from builder.checks.host.model import HostInfo
from builder.checks.host.reading import load_host
from builder.checks.image import ImageFacts
from builder.compat.fleets import HostLoader, image_vendor, load_fleet, summarize


def _worst(verdicts: list[str]) -> str:
    return max(verdicts, key=lambda v: compat.SEVERITY.get(v, compat.SEVERITY["blocked"])) if verdicts else "ok"


def static_check_host(image: ImageFacts, host: HostInfo) -> dict[str, Any]:
    """Compatibility verdict of ``image`` on ``host`` (each GPU; the worst wins), including
    architecture coverage. Returns ``{"verdict", "gpus": [...], "reasons"}``."""
    rows: list[dict[str, Any]] = []
    gpu_image = image.accelerator in ("cuda", "rocm")
    if not host.gpus:
        if gpu_image:
            reason = f"the image needs a GPU ({image.accelerator}) and the host has none (vendor {host.vendor})"
            return {"verdict": "blocked", "reasons": [reason], "gpus": []}
        return {"verdict": "ok", "reasons": ["CPU image"], "gpus": []}
    for g in host.gpus:
        v = compat.check_compat(
            driver=host.driver_version if host.vendor == "nvidia" else host.rocm_version,
            gpu=g.name,
            brand=g.brand if g.brand_source == "nvidia-smi -q" else None,
            cuda=image.cuda_version if image.accelerator == "cuda" else None,
            require=image.require_cuda if image.accelerator == "cuda" else None,
            rocm=image.rocm_version if image.accelerator == "rocm" else None,
            image_archs=tuple(image.gpu_archs),
            compute_capability=g.compute_capability or g.gfx_target,
            driver_cuda_version=host.cuda_version,
            vendor=host.vendor if host.vendor != "none" else None,
        )
        rows.append({"gpu": g.name, "index": g.index, **v.to_json()})
    verdict = _worst([r["verdict"] for r in rows])
    reasons = [f"{r['gpu']}: {x}" for r in rows if r["verdict"] == verdict for x in r["reasons"]]
    return {"verdict": verdict, "reasons": reasons, "gpus": rows}


def static_check_fleet(image: ImageFacts, fleet_path: Path, *, load_host: HostLoader = load_host) -> dict[str, Any]:
    """Verdict of ``image`` for every cluster of the fleet file (``builder.compat.check_fleet``) and the
    fleet's verdict from ``builder.compat.fleets.summarize`` (the one ``builder compat fleet`` uses):
    ``verdict`` is the WORST over the clusters of the image's vendor (cuda -> nvidia, rocm -> amd; a CPU
    image: every cluster); clusters of another vendor are listed in ``not_applicable`` and never block;
    ``blocked`` when an applicable cluster is blocked or none applies. Keys: ``fleet``, ``verdict``,
    ``header`` (the one-line summary both CLIs print), ``image_vendor``, ``runs_on``, ``blocked_on``,
    ``not_applicable``, ``reasons``, ``clusters`` (each: cluster, vendor, applies, and its verdict with
    reasons). ``load_host`` reads the clusters' ``hostinfo:`` files (default:
    ``builder.checks.host.reading.load_host``).
    Raises ConfigError for an invalid fleet file."""
    fleet = load_fleet(fleet_path, load_host=load_host)
    results = compat.check_fleet(
        fleet,
        cuda=image.cuda_version if image.accelerator == "cuda" else None,
        require=image.require_cuda if image.accelerator == "cuda" else None,
        rocm=image.rocm_version if image.accelerator == "rocm" else None,
        image_archs=tuple(image.gpu_archs),
    )
    summary = summarize(((c.name, c.vendor, v.verdict) for c, v in results), image_vendor(image.accelerator))
    skipped = set(summary.not_applicable)
    rows = [
        {"cluster": c.name, "vendor": c.vendor, "applies": c.name not in skipped, **v.to_json()} for c, v in results
    ]
    return {
        "fleet": fleet.name,
        **summary.to_json(),
        "header": summary.header(fleet.name),
        "reasons": list(summary.reasons),
        "clusters": rows,
    }


__all__ = ["static_check_fleet", "static_check_host"]
