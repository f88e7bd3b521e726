"""Layer sharing across the matrix (issue 19 item 5): every shipped variant's Dockerfile starts
with the layers that do not depend on its accelerator, build arguments or framework (the Python
layer and the user), so variants on one base build and store them once.

BuildKit's cache key of a ``RUN`` covers its parent state, the command and the environment it
runs with (``ENV`` and the ``ARG``s declared before it); ``LABEL`` only edits the image config
(Dockerfile reference: https://docs.docker.com/reference/dockerfile/#label and
https://docs.docker.com/build/cache/invalidation/#build-arguments)."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from typing import TYPE_CHECKING

from builder import matrix, render
from tests.conftest import ROOT
from tests.dockerfiles import instructions
from tests.unit.test_render import BASES, IMAGES, LOCKS

if TYPE_CHECKING:
    from builder.models import Variant

#: Instructions that put accelerator-specific values into the environment of later RUNs.
ACCELERATOR_ENV = re.compile(r"^(ARG|ENV) .*(NVIDIA_|ROCM_|CUDA|_ARCH|COMPUTE_CAPABILITIES)", re.S)


def shared_prefix(dockerfile: str) -> list[str]:
    """The instructions up to and including the user's ``RUN`` (the last shared layer), without
    ``LABEL`` (no layer, no effect on a RUN's cache key)."""
    steps = instructions(dockerfile)
    end = next(i for i, s in enumerate(steps) if s.startswith("RUN") and "useradd" in s)
    return [s for s in steps[: end + 1] if not s.startswith("LABEL")]


def shipped() -> list[Variant]:
    return [v for m in matrix.load_matrices(sorted((ROOT / "matrices").glob("*.yaml"))) for v in m.variants]


def dockerfile(v: Variant) -> str:
    return render.render_variant(v, images_dir=IMAGES, locks_dir=LOCKS, bases=BASES).dockerfile


def test_no_accelerator_environment_before_the_shared_layers() -> None:
    for v in shipped():
        text = dockerfile(v)
        prefix = shared_prefix(text)
        assert prefix[1].startswith("FROM") and prefix[2].startswith("RUN"), (v.id, prefix[:3])
        bad = [s for s in prefix if ACCELERATOR_ENV.match(s)]
        assert not bad, f"{v.id}: accelerator-specific before the shared layers: {bad}"
        assert any(ACCELERATOR_ENV.match(s) for s in instructions(text)) == (v.accelerator.kind != "cpu"), v.id


def test_variants_on_one_base_share_the_python_and_user_layers() -> None:
    """Group the shipped variants by base image, family and Python: within a group the shared
    prefix is one text, so BuildKit builds it once; groups holding several accelerators or
    frameworks' build arguments exist (the case the order is for)."""
    groups: dict[tuple[str, ...], list[tuple[Variant, list[str]]]] = defaultdict(list)
    for v in shipped():
        prefix = shared_prefix(dockerfile(v))
        groups[(prefix[0], prefix[1], v.family, v.python)].append((v, prefix))
    mixed = 0
    for members in groups.values():
        for (a, pa), (b, pb) in itertools.pairwise(members):
            assert pa == pb, f"{a.id} and {b.id} share a base but not the Python/user layers"
        whole = [[s for s in instructions(dockerfile(v)) if ACCELERATOR_ENV.match(s)] for v, _ in members]
        mixed += len({tuple(w) for w in whole}) > 1
    assert mixed >= 1, "no base is shared by variants with different accelerator environments"
