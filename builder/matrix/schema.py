"""The matrix file schema (``matrices/*.yaml``) as pydantic models: what the YAML may contain.

Only shape and types here; meaning (versions, placeholders, compatibility) is checked in
:mod:`builder.matrix.validate` and :mod:`builder.matrix.expand`. Reference: ``docs/matrices.md``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Platforms a variant may be built for.
PLATFORMS = ("linux/amd64", "linux/arm64")


def _text(v: object) -> object:
    """YAML numbers where text belongs (``12.8``) as text; the number check reports them first."""
    return str(v) if isinstance(v, (int, float)) else v


def _texts(v: object) -> object:
    return [_text(x) for x in v] if isinstance(v, list) else v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AcceleratorSpec(_Strict):
    """One accelerator axis value. ``image_version``: the full release in base-image tags
    (``nvidia/cuda:12.8.1-...``); defaults to ``version``."""

    kind: Literal["cuda", "rocm", "cpu"]
    version: str | None = None
    image_version: str | None = None

    @field_validator("version", "image_version", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return _text(v)


class FrameworkSpec(_Strict):
    """The framework axis: one name, its release versions."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    versions: list[str] = Field(min_length=1)

    @field_validator("versions", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return _texts(v)


class Axes(_Strict):
    """The axes whose cross product is the matrix."""

    accelerator: list[AcceleratorSpec] = Field(min_length=1)
    framework: FrameworkSpec
    python: list[str] = Field(min_length=1)
    os: list[str] = Field(min_length=1)
    platform: list[str] = Field(default_factory=lambda: ["linux/amd64"], min_length=1)

    @field_validator("python", mode="before")
    @classmethod
    def _py_text(cls, v: object) -> object:
        return _texts(v)


RuleValue = str | list[str]


class ExcludeRule(_Strict):
    """An exclude rule: every key given must match (values: one or a list; ``accelerator`` matches
    the kind ``cuda``, the tag ``cu128``/``rocm6.4``/``cpu``; ``framework`` a version or a
    specifier such as ``>=2.9``)."""

    accelerator: RuleValue | None = None
    framework: RuleValue | None = None
    python: RuleValue | None = None
    os: RuleValue | None = None
    platform: RuleValue | None = None
    reason: str | None = None

    @field_validator("accelerator", "framework", "python", "os", "platform", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return _texts(_text(v))


class IncludeSpec(_Strict):
    """A cell added outside the cross product (may override packages/base/index_url)."""

    accelerator: AcceleratorSpec
    framework: str
    python: str
    os: str
    platform: str = "linux/amd64"
    packages: list[str] | None = None
    base: str | None = None
    index_url: str | None = None

    @field_validator("framework", "python", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return _text(v)


class MatrixSpec(_Strict):
    """One matrix file."""

    family: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    repository: str = Field(pattern=r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
    description: str | None = None
    axes: Axes
    exclude: list[ExcludeRule] = Field(default_factory=list)
    include: list[IncludeSpec] = Field(default_factory=list)
    packages: dict[str, list[str]] = Field(default_factory=dict)
    index_url: dict[str, str] = Field(default_factory=dict)
    base: dict[str, str] = Field(min_length=1)
    build_args: dict[str, str] = Field(default_factory=dict)
    #: the GPU architectures the framework build in the image carries, per accelerator kind or ``default``,
    #: when they differ from the framework wheels' list in builder.compat (``[]``: no GPU kernels at all)
    gpu_archs: dict[str, list[str]] = Field(default_factory=dict)
