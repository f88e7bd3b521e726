"""Configuration: ``builder.toml`` at the repository root, overridden by ``BUILDER_<KEY>`` variables.

``load_config(root, environ)`` is pure: the CLI passes ``os.environ`` in (core modules never
read the environment). Relative paths are resolved against ``root``.
Reference for every key: ``docs/configuration.md``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, SupportsInt, cast

from builder.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_FILE = "builder.toml"
ENV_PREFIX = "BUILDER_"


@dataclasses.dataclass(frozen=True)
class Config:
    """Resolved settings. Paths are absolute."""

    root: Path
    registry: str = "127.0.0.1:5000"
    insecure_registries: tuple[str, ...] = ()
    state_dir: Path = Path(".builder")
    render_dir: Path = Path("rendered")
    bases_lock: Path = Path("bases.lock.json")
    mirror_map: Path | None = None
    matrices_dir: Path = Path("matrices")
    policies_dir: Path = Path("policies")
    fleets_dir: Path = Path("fleets")
    images_dir: Path = Path("images")
    locks_dir: Path = Path("locks")
    ledger: Path | None = None  # default: <state_dir>/ledger.sqlite
    key: Path | None = None  # default: <state_dir>/keys/builder.key
    check_key: Path | None = None  # default: <state_dir>/keys/check-runner/builder.key
    key_password: str | None = None
    workers: int = 2
    registry_retries: int = 4  # extra attempts of a registry request on 429/5xx/connection reset
    registry_backoff_ms: int = 250  # wait before the first retry; doubled for each next one
    registry_max_delay_ms: int = 30_000  # longest wait between attempts (Retry-After capped)

    @property
    def ledger_path(self) -> Path:
        return self.ledger or self.state_dir / "ledger.sqlite"

    @property
    def key_path(self) -> Path:
        return self.key or self.state_dir / "keys" / "builder.key"

    @property
    def check_key_path(self) -> Path:
        """Key that signs device-check results on this host (a check runner's, never the build key)."""
        return self.check_key or self.state_dir / "keys" / "check-runner" / "builder.key"

    @property
    def mirror_record(self) -> Path:
        """Machine-local record of mirrored base digests (written by scripts/setup)."""
        return self.state_dir / "mirror.json"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    def is_insecure(self, registry: str) -> bool:
        """Plain HTTP only for loopback or explicitly listed registries."""
        host = registry.rsplit(":", 1)[0] if not registry.startswith("[") else registry
        loopback = host in ("localhost", "[::1]") or host.startswith("127.")
        return loopback or registry in self.insecure_registries


_PATH_FIELDS = {f.name for f in dataclasses.fields(Config) if f.name != "root" and "Path" in str(f.type)}
_SECRET_FIELDS = {"key_password"}
_ZERO_ALLOWED = {"registry_retries", "registry_backoff_ms", "registry_max_delay_ms"}  # other ints must be >= 1


def _coerce(name: str, value: object, source: str) -> Path | tuple[str, ...] | int | str | None:
    """``value`` (from TOML or an environment variable) as field ``name`` of :class:`Config` takes it. Raises
    ConfigError naming ``source``, the key and the value when it does not fit."""
    field_type = str({f.name: f.type for f in dataclasses.fields(Config)}[name])
    try:
        if name in _PATH_FIELDS:
            if value in ("", None):
                return None
            return Path(str(value))
        if field_type.startswith("tuple"):
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TypeError("expected a list of strings")
            return tuple(value)
        if field_type == "int":
            n = int(cast("str | SupportsInt", value))  # int() refuses other types: TypeError, reported below
            if n < (0 if name in _ZERO_ALLOWED else 1):
                raise ValueError("must be >= 0" if name in _ZERO_ALLOWED else "must be >= 1")
            return n
        if not isinstance(value, str):
            raise TypeError("expected a string")
        return value
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: invalid value for `{name}`: {value!r} ({exc})") from exc


def load_config(root: Path, environ: Mapping[str, str]) -> Config:
    """Read ``root/builder.toml`` (optional) and apply ``BUILDER_*`` overrides.

    Raises ConfigError naming the file and key for unknown keys or bad values.
    """
    root = root.resolve()
    values: dict[str, Any] = {}
    known = {f.name for f in dataclasses.fields(Config)} - {"root"}
    path = root / CONFIG_FILE
    if path.exists():
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        for key, value in data.items():
            if key not in known - _SECRET_FIELDS:
                raise ConfigError(
                    f"{path}: unknown key `{key}`",
                    hint=f"known keys: {', '.join(sorted(known - _SECRET_FIELDS))}",
                )
            values[key] = _coerce(key, value, str(path))
    for key in known:
        env = ENV_PREFIX + key.upper()
        if env in environ:
            values[key] = _coerce(key, environ[env], f"environment variable {env}")
    for key in _PATH_FIELDS:
        p = values.get(key)
        if isinstance(p, Path) and not p.is_absolute():
            values[key] = root / p
    cfg = Config(root=root, **values)
    # defaults that are relative paths
    fixed = {
        k: root / getattr(cfg, k)
        for k in _PATH_FIELDS
        if isinstance(getattr(cfg, k), Path) and not getattr(cfg, k).is_absolute()
    }
    return dataclasses.replace(cfg, **fixed) if fixed else cfg


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding builder.toml, else ``start``."""
    for d in (start, *start.parents):
        if (d / CONFIG_FILE).exists():
            return d
    return start
