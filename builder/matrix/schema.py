"""The matrix file schema (``matrices/*.yaml``) as pydantic models: what the YAML may contain.

Only shape and types here; meaning (versions, placeholders, compatibility) is checked in
:mod:`builder.matrix.validate` and :mod:`builder.matrix.expand`. Reference: ``docs/matrices.md``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class CheckSpec(_Strict):
    """``tests`` / ``benchmark`` of a matrix (docs/matrices.md "Checks declared with the image"): exactly
    one of ``command`` (argv, or one string run with ``sh -c``) and ``script`` (a file, relative to the
    project root, sent on stdin to the image's python with ``args``); ``timeout`` seconds; ``gpus``
    (``all``, ``none`` or a count); ``shm_size``; ``env``; ``junit`` (path in the container);
    ``dataset`` / ``model`` (versions the benchmark declares); ``min_devices`` (``collective``: the fewest
    GPUs it needs, 0: the CPU too)."""

    command: str | list[str] | None = None
    script: str | None = None
    args: list[str] = Field(default_factory=list)
    timeout: float = Field(default=600.0, gt=0, le=86400)
    gpus: Literal["all", "none"] | int = "all"
    shm_size: str | None = Field(default="1g", pattern=r"^\d+[bkmgBKMG]?$")
    env: dict[str, str] = Field(default_factory=dict)
    junit: str | None = Field(default=None, pattern=r"^/")
    dataset: str | None = None
    model: str | None = None
    min_devices: int = Field(default=2, ge=0, le=1024)

    @field_validator("args", mode="before")
    @classmethod
    def _args_text(cls, v: object) -> object:
        return _texts(v)

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, v: object) -> object:
        """One message for a wrong ``gpus`` (not one per member of the union)."""
        if isinstance(v, bool) or not (isinstance(v, int) or v in ("all", "none")):
            raise ValueError("`gpus` is all, none or a number of GPUs")
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_text(cls, v: object) -> object:
        return {k: _text(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _one_program(self) -> CheckSpec:
        if (self.command is None) == (self.script is None):
            raise ValueError(
                "give exactly one of `command` (run in the image) and `script` (a file sent to its python)"
            )
        if isinstance(self.gpus, int) and self.gpus < 0:
            raise ValueError("`gpus` is all, none or a count >= 0")
        return self


class CheckOverride(_Strict):
    """Checks of the variants whose id matches ``match`` (an id or a glob such as ``*-cpu-*``): each
    section given replaces the matrix-wide one; the first matching override wins."""

    match: str = Field(min_length=1)
    tests: CheckSpec | None = None
    benchmark: CheckSpec | None = None
    collective: CheckSpec | None = None


class MatrixSpec(_Strict):
    """One matrix file."""

    family: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    repository: str = Field(pattern=r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
    description: str | None = None
    #: the promotion policy and the fleet this matrix's images are judged by: a name in
    #: builder.toml ``policies_dir`` / ``fleets_dir`` (``default`` -> policies/default.yaml) or a
    #: file relative to the project root; used by every command run without ``--policy``/``--fleet``
    policy: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_./-]+$")
    fleet: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_./-]+$")
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
    #: checks run by ``builder check`` in fresh containers of the image (docs/matrices.md)
    tests: CheckSpec | None = None
    benchmark: CheckSpec | None = None
    collective: CheckSpec | None = None
    overrides: list[CheckOverride] = Field(default_factory=list)
