"""``builder report VARIANT``: the evidence of each digest in each stage, and a benchmark metric over
each stage's history, as a terminal sparkline and an SVG chart (docs/evidence.md "Report").

Reads what ``history`` reads (the stage's trusted ``promotion/v1`` chain, :func:`stage_histories`)
and, for every digest the chain names, its verified attestations in that stage's repository
(:func:`builder.promote.evidence.read_place`, keys of the policy): the newest ``benchmark/v1``,
``test-result/v1`` and ``device-check/v1`` by a key the policy lists. Nothing is written to the
registry. The SVG is drawn here (a polyline per stage on a value axis; SVG 1.1,
https://www.w3.org/TR/SVG11/shapes.html#PolylineElement): no plotting library for one line chart.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from builder.errors import BuilderError, NotFoundError, RegistryUnavailableError
from builder.predicates import BENCHMARK_V1, DEVICE_CHECK_V1, TEST_RESULT_V1
from builder.promote.evidence import read_place
from builder.promote.queries import stage_histories
from builder.promote.targets import resolve_targets, scope_of
from builder.promote.verdict_cache import VerdictCache

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.signing.report import VerifiedItem

#: the eight block elements of a sparkline, lowest first
BLOCKS = "▁▂▃▄▅▆▇█"


class PointDocument(TypedDict):
    """One digest a stage held: when it entered (the record's time), its digest, and what its newest
    verified evidence says (None: none): device check and tests (``passed``/``failed``), the metric's
    ``value`` and ``unit`` and the hardware class it was measured on."""

    time: str
    digest: str
    device_check: str | None
    tests: str | None
    value: float | None
    unit: str | None
    hardware: str | None


class StageReportDocument(TypedDict):
    stage: str
    digest: str | None
    points: list[PointDocument]
    sparkline: str
    error: str | None


class ReportDocument(TypedDict):
    """``builder report VARIANT --json``: the ``metric`` charted, each stage (oldest point first) and
    the SVG file written (None: none)."""

    variant: str
    metric: str | None
    stages: list[StageReportDocument]
    svg: str | None


@dataclasses.dataclass(frozen=True)
class Point:
    time: str
    digest: str
    device_check: str | None = None
    tests: str | None = None
    value: float | None = None
    unit: str | None = None
    hardware: str | None = None

    def to_json(self) -> PointDocument:
        return {
            "time": self.time,
            "digest": self.digest,
            "device_check": self.device_check,
            "tests": self.tests,
            "value": self.value,
            "unit": self.unit,
            "hardware": self.hardware,
        }


@dataclasses.dataclass(frozen=True)
class StageReport:
    """A stage: the digest it holds now, every digest of its history oldest first, or why it could
    not be read."""

    stage: str
    digest: str | None
    points: tuple[Point, ...] = ()
    error: str | None = None

    def to_json(self) -> StageReportDocument:
        return {
            "stage": self.stage,
            "digest": self.digest,
            "points": [p.to_json() for p in self.points],
            "sparkline": sparkline([p.value for p in self.points]),
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class VariantReport:
    variant: str
    metric: str | None
    stages: tuple[StageReport, ...]
    svg_path: str | None = None

    def to_json(self) -> ReportDocument:
        return {
            "variant": self.variant,
            "metric": self.metric,
            "stages": [s.to_json() for s in self.stages],
            "svg": self.svg_path,
        }

    def svg(self) -> str:
        """The benchmark series of every stage as an SVG line chart (:func:`svg_chart`)."""
        unit = next((p.unit for s in self.stages for p in s.points if p.unit), "")
        series = {s.stage: [(p.time[:10], p.value) for p in s.points] for s in self.stages}
        return svg_chart(series, title=f"{self.variant}: {self.metric or 'no benchmark'}", unit=unit or "")


def sparkline(values: Sequence[float | None]) -> str:
    """One block per value scaled between the series' min and max (``·`` for a missing value)."""
    known = [v for v in values if v is not None]
    if not known:
        return "·" * len(values)
    lo, hi = min(known), max(known)
    span = hi - lo
    out = []
    for v in values:
        if v is None:
            out.append("·")
        else:
            out.append(BLOCKS[round((v - lo) / span * (len(BLOCKS) - 1))] if span else BLOCKS[len(BLOCKS) // 2])
    return "".join(out)


#: line colours of the stages, in order (dev, staging, prod, ...)
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def svg_chart(
    series: Mapping[str, Sequence[tuple[str, float | None]]], *, title: str, unit: str, width: int = 720
) -> str:
    """A line chart: one polyline (with dots) per series over its points in order, a shared value axis
    from 0 to the largest value, the first and last label of the longest series under the x axis, a
    legend. Missing values break the line. Pure text (SVG 1.1)."""
    height, left, right, top, bottom = 320, 70, 150, 40, 40
    values = [v for pts in series.values() for _, v in pts if v is not None]
    vmax = max(values) * 1.1 if values else 1.0
    n = max((len(p) for p in series.values()), default=0)
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / vmax)

    esc = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="22" font-size="14">{esc(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
    ]
    for k in range(5):
        tick = vmax * k / 4
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.3g}</text>')
        parts.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" stroke="#eee"/>')
    parts.append(
        f'<text x="14" y="{top + plot_h / 2:.0f}" transform="rotate(-90 14 {top + plot_h / 2:.0f})" '
        f'text-anchor="middle">{esc(unit)}</text>'
    )
    longest = max(series.values(), key=len, default=())
    if longest:
        parts.append(f'<text x="{x(0):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{esc(longest[0][0])}</text>')
        if len(longest) > 1:
            lx, last = x(len(longest) - 1), esc(longest[-1][0])
            parts.append(f'<text x="{lx:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{last}</text>')
    for k, (name, pts) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        run: list[str] = []
        for i, (_, v) in enumerate([*pts, ("", None)]):
            if v is None:
                if len(run) > 1:
                    parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(run)}"/>')
                run = []
                continue
            run.append(f"{x(i):.1f},{y(v):.1f}")
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
        ly = top + 16 * k + 8
        parts.append(f'<rect x="{left + plot_w + 16}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{left + plot_w + 32}" y="{ly + 1}">{esc(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _newest(items: Sequence[VerifiedItem], ptype: str, digest: str) -> Mapping[str, Any] | None:
    """The predicate of the newest verified ``ptype`` attestation about ``digest`` (by ``run.finished_at``
    or the device check's ``run.finished_at``)."""
    found = []
    for it in items:
        st = it.statement or {}
        subjects = {"sha256:" + str((s.get("digest") or {}).get("sha256")) for s in st.get("subject") or []}
        if it.ok and not it.untrusted and it.predicate_type == ptype and digest in subjects and it.predicate:
            found.append(it.predicate)

    def when(p: Mapping[str, Any]) -> str:
        run = p.get("run")
        return str(run.get("finished_at") or "") if isinstance(run, Mapping) else ""

    return max(found, key=when) if found else None


def _metric(pred: Mapping[str, Any] | None, metric: str | None) -> tuple[str | None, float | None, str | None]:
    """(metric name, value, unit) of ``metric`` (None: the first) in a benchmark predicate."""
    for m in (pred or {}).get("metrics") or []:
        if isinstance(m, Mapping) and (metric is None or m.get("name") == metric):
            v = m.get("value")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return str(m.get("name")), float(v), str(m.get("unit") or "")
    return metric, None, None


def variant_report(
    ctx: PromotionContext, variant: str, stages: Sequence[str] = (), *, metric: str | None = None, limit: int = 50
) -> VariantReport:
    """The report of ``variant`` (an id or a reference) over ``stages`` (default: every stage):
    each stage's history (at most ``limit`` records) with each digest's evidence and ``metric``
    (None: the first metric of the newest benchmark found). NotFoundError for unknown names or
    stages, and for a ``metric`` no benchmark of the variant's digests has (naming the metrics they
    have); RegistryUnavailableError; a stage that cannot be read carries its error."""
    from builder.policy.rules_benchmark import DEFAULT_SAME, class_text, hardware_of

    [target] = resolve_targets(scope_of(ctx), (variant,))
    out: list[StageReport] = []
    chosen = metric
    seen: dict[str, None] = {}  # metric names the digests' benchmarks have, in order
    # the layers history just verified (its records) or an earlier run did are not read again
    verdicts = VerdictCache.of(ctx)
    try:
        for h in stage_histories(ctx, target, stages, limit=limit):
            if h.error is not None:
                out.append(StageReport(h.stage, None, error=str(h.error.get("message"))))
                continue
            loc = ctx.stage_location(target, h.stage)
            moves = [(r.time, r.digest) for r, _ in reversed(h.records)]  # oldest first
            if not moves and h.digest:
                moves = [("", h.digest)]
            points: list[Point] = []
            try:
                for when, digest in moves:
                    report = read_place(ctx, loc, digest, check_present=False, verdicts=verdicts)
                    items = report.items if report is not None else ()
                    bench = _newest(items, BENCHMARK_V1, digest)
                    tests = _newest(items, TEST_RESULT_V1, digest)
                    dev = _newest(items, DEVICE_CHECK_V1, digest)
                    for m in (bench or {}).get("metrics") or []:
                        if isinstance(m, Mapping) and isinstance(m.get("name"), str):
                            seen.setdefault(m["name"])
                    name, value, unit = _metric(bench, chosen)
                    chosen = chosen or name
                    hw = class_text(hardware_of(bench), DEFAULT_SAME) if bench else None
                    points.append(
                        Point(
                            when,
                            digest,
                            str(dev.get("result")) if dev else None,
                            str(tests.get("result")) if tests else None,
                            value,
                            unit,
                            hw,
                        )
                    )
            except RegistryUnavailableError:
                raise
            except BuilderError as exc:
                out.append(StageReport(h.stage, h.digest, tuple(points), exc.message))
                continue
            out.append(StageReport(h.stage, h.digest, tuple(points)))
    finally:
        verdicts.flush()
    if metric is not None and seen and metric not in seen:
        raise NotFoundError(
            f"no benchmark/v1 of {variant}'s digests has metric {metric!r}; they have: {', '.join(seen)}",
            hint="give one of those to --metric, or leave --metric out for the first metric",
            metric=metric,
            metrics=list(seen),
        )
    return VariantReport(variant, chosen, tuple(out))


__all__ = [
    "BLOCKS",
    "Point",
    "PointDocument",
    "ReportDocument",
    "StageReport",
    "StageReportDocument",
    "VariantReport",
    "sparkline",
    "svg_chart",
    "variant_report",
]
