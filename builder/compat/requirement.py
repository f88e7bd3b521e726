"""``NVIDIA_REQUIRE_CUDA``: parser, evaluator, and the strings official images carry.

Grammar (NVIDIA Container Toolkit, "Specialized Configurations with Docker", ``NVIDIA_REQUIRE_*``:
https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html):
space-separated *terms* are OR-ed; comma-separated *constraints* inside a term are AND-ed; a
constraint is ``KEY OP VALUE`` with KEY in ``cuda`` (the CUDA version the host driver supports),
``driver`` (driver version), ``brand`` (product brand: tesla, nvidia, geforce, ...) or ``arch``
(compute capability), OP in ``>= > <= < = == !=``. Versions compare numerically.

When the whole expression fails, nvidia-container-cli reports only the last clause it evaluated
("unsatisfied condition: driver < 566"), which reads as "driver too new"; :func:`evaluate` reports
which term matched, and when none does, what would satisfy it (the minimum driver).

Unknown host facts (a static check without ``nvidia-smi -q`` has no brand): the hook itself always knows
the brand, driver and CUDA version (it reads them from NVML), so an unknown value is a gap in *our* input,
not a value. A constraint on an unknown fact is neither true nor false: a term with no failed constraint
and at least one unknown one is *undetermined*, and so is the expression when no term is satisfied and
one is undetermined (:attr:`Evaluation.undetermined`, naming the unknown facts). Callers must say so
("cannot tell; pass the brand") instead of treating it as a match or a refusal. One exception: when the
expression exempts every brand NVML reports on the same driver window, the brand cannot change the answer,
and an unknown brand does not make it undetermined.

Official images (``data/cuda-images.csv``, source: https://gitlab.com/nvidia/container-images/cuda) carry
``cuda>=X.Y`` OR, per exempted driver branch N and brand B, ``brand=B,driver>=N,driver<N+1``:
:func:`require_cuda` rebuilds that string.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Literal

from packaging.version import InvalidVersion, Version
from typing_extensions import TypedDict

from builder.compat._data import CudaImageRow, cuda_image_rows, major_minor
from builder.compat.drivers import min_driver, parse_cuda, parse_driver
from builder.compat.gpus import PRODUCT_BRANDS
from builder.errors import ConfigError, NotFoundError

Key = Literal["cuda", "driver", "brand", "arch"]
Op = Literal[">=", ">", "<=", "<", "=", "==", "!="]
KEYS: tuple[str, ...] = ("cuda", "driver", "brand", "arch")
_CONSTRAINT = re.compile(r"^\s*(cuda|driver|brand|arch)\s*(>=|<=|==|!=|=|>|<)\s*([A-Za-z0-9_.\-]+)\s*$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Constraint:
    key: Key
    op: Op
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"


@dataclasses.dataclass(frozen=True)
class Term:
    """AND of constraints; ``text`` is the term as written."""

    constraints: tuple[Constraint, ...]

    @property
    def text(self) -> str:
        return ",".join(str(c) for c in self.constraints)

    def values(self, key: str) -> tuple[Constraint, ...]:
        return tuple(c for c in self.constraints if c.key == key)

    @property
    def is_exemption(self) -> bool:
        """A term without a ``cuda`` constraint (the brand + driver-branch windows of official images)."""
        return not self.values("cuda")


@dataclasses.dataclass(frozen=True)
class Requirement:
    """OR of terms. ``cuda``: the highest ``cuda>=X.Y`` in the expression (the image's CUDA line), or None."""

    terms: tuple[Term, ...]
    text: str

    @property
    def cuda(self) -> str | None:
        found = [Version(c.value) for t in self.terms for c in t.values("cuda") if c.op in (">=", ">", "=", "==")]
        return major_minor(max(found)) if found else None

    def exemptions(self) -> tuple[tuple[str, int], ...]:
        """(brand, branch) of every exemption term of the form ``brand=B,driver>=N,driver<N+1``."""
        out = []
        for t in self.terms:
            brands = [c.value.lower() for c in t.values("brand") if c.op in ("=", "==")]
            lows = [Version(c.value) for c in t.values("driver") if c.op == ">="]
            if t.is_exemption and brands and lows:
                out.append((brands[0], lows[0].major))
        return tuple(out)


def parse_requirement(expr: str) -> Requirement:
    """Parse an ``NVIDIA_REQUIRE_CUDA`` value (see :func:`_parse_requirement`); results are cached by text."""
    return _parse_requirement(expr)


@functools.lru_cache(maxsize=512)
def _parse_requirement(expr: str) -> Requirement:
    """Parse an ``NVIDIA_REQUIRE_CUDA`` value (surrounding quotes and a leading ``NVIDIA_REQUIRE_CUDA=`` are
    accepted). Raises ConfigError naming the bad constraint. An empty expression is an empty Requirement
    (the hook then checks nothing)."""
    text = expr.strip()
    if text.startswith("ENV "):
        text = text[4:].strip()
    if text.upper().startswith("NVIDIA_REQUIRE_CUDA"):
        text = text.split("=", 1)[1] if "=" in text else text.split(None, 1)[1]
    text = text.strip().strip("\"'").strip()
    terms = []
    for raw_term in text.split():
        constraints = []
        for raw in raw_term.split(","):
            if not raw:
                continue
            m = _CONSTRAINT.match(raw)
            if not m:
                raise ConfigError(
                    f"NVIDIA_REQUIRE_CUDA: cannot parse constraint {raw!r} in term {raw_term!r}",
                    hint="constraints are KEY OP VALUE with KEY cuda|driver|brand|arch, e.g. cuda>=12.8 or brand=tesla",
                )
            key, op, value = m.group(1).lower(), m.group(2), m.group(3)
            if key in ("cuda", "driver", "arch"):
                try:
                    Version(value)
                except InvalidVersion:
                    raise ConfigError(
                        f"NVIDIA_REQUIRE_CUDA: {key} value {value!r} in {raw!r} is not a version",
                        hint="use numbers, e.g. driver>=535 or cuda>=12.4",
                    ) from None
            constraints.append(Constraint(key=key, op=op, value=value))  # type: ignore[arg-type]
        if constraints:
            terms.append(Term(constraints=tuple(constraints)))
    return Requirement(terms=tuple(terms), text=text)


@dataclasses.dataclass(frozen=True)
class Host:
    """What the hook compares against: driver version, the CUDA line the driver supports, the product
    brand (lower-case hook name), the GPU's compute capability. Unknown values are None."""

    driver: str | None
    cuda: str | None
    brand: str | None = None
    arch: str | None = None


class TermResultDocument(TypedDict):
    """One term of the expression: satisfied or not, the constraints that failed and those unknown."""

    term: str
    satisfied: bool
    failed: list[str]
    unknown: list[str]


class EvaluationDocument(TypedDict):
    """An :class:`Evaluation` as JSON (the ``require_cuda_evaluation`` fact of a diagnosis)."""

    satisfied: bool
    undetermined: bool
    unknown_facts: list[str]
    matched: str | None
    min_driver: str | None
    satisfy: list[str]
    terms: list[TermResultDocument]


@dataclasses.dataclass(frozen=True)
class TermResult:
    term: str
    satisfied: bool
    failed: tuple[str, ...]  # constraints that failed ("cuda>=12.8 (host 12.4)")
    unknown: tuple[str, ...]  # constraints whose host value is unknown

    def to_json(self) -> TermResultDocument:
        return {
            "term": self.term,
            "satisfied": self.satisfied,
            "failed": list(self.failed),
            "unknown": list(self.unknown),
        }


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Result of :func:`evaluate`. ``matched``: the first satisfied term's text (None when none);
    ``matched_exemption``: that term has no cuda constraint (started through an exemption window);
    ``min_driver``: the lowest driver that satisfies a ``cuda>=`` term (None when unknown);
    ``satisfy``: human descriptions of what would satisfy the expression."""

    satisfied: bool
    matched: str | None
    matched_index: int | None
    matched_exemption: bool
    min_driver: str | None
    satisfy: tuple[str, ...]
    terms: tuple[TermResult, ...]
    last_failed: str | None  # the clause nvidia-container-cli would name

    @property
    def empty(self) -> bool:
        return not self.terms

    @property
    def undetermined(self) -> bool:
        """No term is satisfied, but one has no failed constraint and some unknown ones: whether the hook
        starts the container depends on host facts we do not have (see the module docstring)."""
        return not self.satisfied and any(not t.failed and t.unknown for t in self.terms)

    @property
    def unknown_facts(self) -> tuple[str, ...]:
        """The host facts (``brand``, ``driver``, ``cuda``, ``arch``) the undetermined terms need, in order."""
        keys: list[str] = []
        for t in self.terms:
            if not t.failed:
                for c in t.unknown:
                    key = _CONSTRAINT.match(c)
                    if key and key.group(1).lower() not in keys:
                        keys.append(key.group(1).lower())
        return tuple(keys)

    def to_json(self) -> EvaluationDocument:
        return {
            "satisfied": self.satisfied,
            "undetermined": self.undetermined,
            "unknown_facts": list(self.unknown_facts),
            "matched": self.matched,
            "min_driver": self.min_driver,
            "satisfy": list(self.satisfy),
            "terms": [t.to_json() for t in self.terms],
        }


def _compare(left: Version, op: str, right: Version) -> bool:
    if op == ">=":
        return left >= right
    if op == ">":
        return left > right
    if op == "<=":
        return left <= right
    if op == "<":
        return left < right
    if op in ("=", "=="):
        return left == right
    return left != right


@functools.lru_cache(maxsize=1024)
def _host_version(key: str, raw: str) -> Version:
    return parse_cuda(raw) if key == "cuda" else parse_driver(raw) if key == "driver" else Version(raw)


@functools.lru_cache(maxsize=4096)
def _value_version(value: str) -> Version:
    return Version(value)


def _check(c: Constraint, host: Host) -> bool | None:
    if c.key == "brand":
        if host.brand is None:
            return None
        equal = host.brand.lower() == c.value.lower()
        return (not equal) if c.op == "!=" else equal
    raw = {"cuda": host.cuda, "driver": host.driver, "arch": host.arch}[c.key]
    if raw is None:
        return None
    left = _host_version(c.key, raw)
    right = _value_version(c.value)
    if c.key == "cuda":  # the hook compares major.minor
        left = Version(major_minor(left))
    return _compare(left, c.op, right)


def evaluate(requirement: Requirement | str, host: Host) -> Evaluation:
    """Evaluate an expression against a host. The first satisfied term wins (terms are OR-ed).

    A constraint on an unknown host value (None) is neither satisfied nor failed: it is listed in the term's
    ``unknown``, the term is not satisfied, and when no term is satisfied :attr:`Evaluation.undetermined`
    says the answer depends on those facts (NVIDIA_REQUIRE_* semantics:
    https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
    An empty expression is satisfied. Raises ConfigError for an unparsable expression."""
    req = parse_requirement(requirement) if isinstance(requirement, str) else requirement
    results: list[TermResult] = []
    matched: int | None = None
    last_failed: str | None = None
    for index, term in enumerate(req.terms):
        failed: list[str] = []
        unknown: list[str] = []
        for c in term.constraints:
            ok = _check(c, host)
            if ok is None:
                unknown.append(str(c))
            elif not ok:
                shown = {"cuda": host.cuda, "driver": host.driver, "brand": host.brand, "arch": host.arch}[c.key]
                failed.append(f"{c} (host {c.key} {shown})")
                last_failed = str(c)
        sat = not failed and not unknown
        results.append(TermResult(term=term.text, satisfied=sat, failed=tuple(failed), unknown=tuple(unknown)))
        if sat and matched is None:
            matched = index
    if matched is None and host.brand is None:
        matched = _brand_irrelevant(req, results)
    satisfied = matched is not None or not req.terms
    need = _min_driver_for(req)
    satisfy = [] if satisfied else _what_satisfies(req, host, need)
    return Evaluation(
        satisfied=satisfied,
        matched=req.terms[matched].text if matched is not None else None,
        matched_index=matched,
        matched_exemption=matched is not None and req.terms[matched].is_exemption,
        min_driver=need,
        satisfy=tuple(satisfy),
        terms=tuple(results),
        last_failed=None if satisfied else last_failed,
    )


def _brand_irrelevant(req: Requirement, results: list[TermResult]) -> int | None:
    """With the brand unknown: the index of an exemption term whose other constraints hold, when the expression
    exempts *every* brand NVML can report (``builder.compat.gpus.PRODUCT_BRANDS``, the ``nvmlBrandType_t`` names
    the hook compares) on that same driver window - then the brand does not matter and the hook starts the
    container whatever it is. None otherwise (the answer stays undetermined)."""
    windows: dict[tuple[str, ...], tuple[set[str], int]] = {}
    for index, (term, result) in enumerate(zip(req.terms, results, strict=True)):
        others = tuple(sorted(str(c) for c in term.constraints if c.key != "brand"))
        brands = [c.value.lower() for c in term.values("brand") if c.op in ("=", "==")]
        if result.failed or len(brands) != 1 or any(not u.lower().startswith("brand") for u in result.unknown):
            continue
        seen, first = windows.get(others, (set(), index))
        seen.add(brands[0])
        windows[others] = (seen, first)
    for exempted, first in windows.values():
        if exempted >= set(PRODUCT_BRANDS):
            return first
    return None


def _min_driver_for(req: Requirement) -> str | None:
    drivers: list[Version] = []
    for term in req.terms:
        if term.is_exemption:
            continue
        floor: Version | None = None
        for c in term.values("cuda"):
            if c.op in (">=", ">", "=", "=="):
                try:
                    floor = Version(min_driver(c.value))
                except NotFoundError:
                    floor = None
        for c in term.values("driver"):
            if c.op in (">=", ">"):
                v = Version(c.value)
                floor = v if floor is None or v > floor else floor
        if floor is not None:
            drivers.append(floor)
    return str(min(drivers)) if drivers else None


def _what_satisfies(req: Requirement, host: Host, need: str | None) -> list[str]:
    out = []
    cuda = req.cuda
    if need:
        out.append(f"driver >= {need}" + (f" (reports CUDA {cuda}; term cuda>={cuda})" if cuda else ""))
    windows: dict[int, list[str]] = {}
    for brand, branch_ in req.exemptions():
        windows.setdefault(branch_, []).append(brand)
    if windows:
        branches = ", ".join(f"R{b}" for b in sorted(windows))
        brands = sorted({b for bs in windows.values() for b in bs})
        mine = host.brand.lower() if host.brand else None
        if mine is not None and mine not in brands:
            out.append(f"no exemption applies to brand {mine!r} (exempted brands: {', '.join(brands)})")
        elif mine is None:
            out.append(
                f"or, if the GPU's brand is one of {', '.join(brands)} (brand unknown: pass nvidia-smi -q "
                f"'Product Brand'), a driver on an exempted branch ({branches}) through forward compatibility"
            )
        else:
            out.append(
                f"or a driver on an exempted branch ({branches}) with brand in {', '.join(brands)}"
                " (starts through forward compatibility, needs cuda-compat)"
            )
    return out


# -------------------------------------------------------------------------------- official image strings


@dataclasses.dataclass(frozen=True)
class RequireInfo:
    """The ``NVIDIA_REQUIRE_CUDA`` of an official image release and where it came from."""

    expr: str
    image_release: str | None  # the release whose row was used
    constructed: bool  # True when the release has no recorded string and the pattern was applied
    note: str


def _image_row(cuda_version: str) -> tuple[CudaImageRow | None, bool]:
    """The row of an exact image release (12.8.1) or the newest release of a line (12.8); else the nearest
    older row with a recorded requirement (constructed=True)."""
    rows = cuda_image_rows()
    v = parse_cuda(cuda_version)
    exact = [r for r in rows if Version(r.image_release) == v]
    if exact and exact[0].known_requirement:
        return exact[0], False
    line = major_minor(v)
    same_line = [r for r in rows if r.cuda == line and r.known_requirement]
    if same_line and len(v.release) <= 2:
        return same_line[-1], False
    if same_line:
        return same_line[-1], True
    older = [r for r in rows if r.known_requirement and Version(r.image_release) <= v]
    return (older[-1] if older else None), True


def require_cuda_info(cuda_version: str, *, platform: str = "linux/amd64") -> RequireInfo:
    """The requirement string an official ``nvidia/cuda`` image of ``cuda_version`` (``12.8`` or ``12.8.1``)
    carries on ``platform``. Releases not recorded in ``cuda-images.csv`` get the official pattern with the
    exemption branches/brands of the nearest older recorded release (``constructed=True``, said in ``note``)."""
    v = parse_cuda(cuda_version)
    line = major_minor(v)
    row, constructed = _image_row(cuda_version)
    if row is None:
        return RequireInfo(
            expr=f"cuda>={line}",
            image_release=None,
            constructed=True,
            note=f"no official image release recorded at or before {cuda_version}: only cuda>={line}",
        )
    arm = platform.endswith("arm64")
    if arm and not row.arm64_exemptions:
        expr = f"cuda>={line}"
        note = f"{platform} images of {row.image_release} carry only cuda>=X.Y (cuda-images.csv)"
    else:
        windows = [f"brand={b},driver>={n},driver<{n + 1}" for n in row.exempt_branches for b in row.exempt_brands]
        expr = " ".join([f"cuda>={line}", *windows])
        note = f"exemptions of nvidia/cuda:{row.image_release} ({row.evidence})"
    if constructed:
        note = (
            f"CUDA {cuda_version} has no recorded requirement: constructed by the official pattern with the "
            f"exemptions of {row.image_release} (cuda-images.csv); verify with `docker inspect` of the real image"
        )
    return RequireInfo(expr=expr, image_release=row.image_release, constructed=constructed, note=note)


def require_cuda(cuda_version: str, *, platform: str = "linux/amd64") -> str:
    """``NVIDIA_REQUIRE_CUDA`` of the official image of that CUDA release (see :func:`require_cuda_info`)."""
    return require_cuda_info(cuda_version, platform=platform).expr


def forward_compat_branches(cuda_version: str) -> tuple[int, ...]:
    """Driver branches NVIDIA supports forward compatibility on for a CUDA line: the exemption branches of its
    official image (or the nearest older recorded one). Empty when unknown."""
    row, _ = _image_row(major_minor(parse_cuda(cuda_version)))
    return row.exempt_branches if row is not None else ()


def exempt_brands(cuda_version: str) -> tuple[str, ...]:
    row, _ = _image_row(major_minor(parse_cuda(cuda_version)))
    return row.exempt_brands if row is not None else ()


__all__ = [
    "KEYS",
    "Constraint",
    "Evaluation",
    "EvaluationDocument",
    "Host",
    "RequireInfo",
    "Requirement",
    "Term",
    "TermResult",
    "TermResultDocument",
    "evaluate",
    "exempt_brands",
    "forward_compat_branches",
    "parse_requirement",
    "require_cuda",
    "require_cuda_info",
]
