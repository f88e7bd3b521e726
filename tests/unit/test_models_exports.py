"""``builder.models``: a variant and what it is made of are defined in the package itself; what the
steps make of it (``RenderedImage``, ``BuiltImage``, ``SummaryRow``) in its modules, imported on first
use (issue 19: ``builder resolve`` decodes variants and never creates those classes)."""

from __future__ import annotations

import subprocess
import sys

import builder.models
from tests.conftest import ROOT


def test_every_public_name_is_there() -> None:
    for name in builder.models.__all__:
        assert getattr(builder.models, name) is not None
    assert builder.models.RenderedImage.__module__ == "builder.models.images"
    assert builder.models.BuiltImage.__module__ == "builder.models.images"
    assert builder.models.SummaryRow.__module__ == "builder.models.summary"


def test_a_variant_needs_no_step_module() -> None:
    program = (
        "import sys\n"
        "from builder.models import Variant\n"
        "print(sorted(m for m in sys.modules if m.startswith('builder.models')))\n"
        "from builder.models import SummaryRow\n"
        "print(sorted(m for m in sys.modules if m.startswith('builder.models')))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["['builder.models']", "['builder.models', 'builder.models.summary']"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        builder.models.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")
