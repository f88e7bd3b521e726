"""Configuration: ``builder.toml`` at the repository root, overridden by ``BUILDER_<KEY>`` variables.

``load_config(root, environ)`` is pure: the CLI passes ``os.environ`` in (core modules never
read the environment). Relative paths are resolved against ``root``.
Reference for every key: ``docs/configuration.md``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    repository_prefix: str = ""  # every repository of this checkout lives under it (docs/configuration.md)
    registry_endpoints: tuple[str, ...] = ()  # "NAME=HOST[:PORT]": where registry NAME's API answers
    image_licenses: str = ""  # SPDX expression for org.opencontainers.image.licenses ("" = no label)
    registry_retries: int = 4  # extra attempts of a registry request on 429/5xx/connection reset
    registry_backoff_ms: int = 250  # wait before the first retry; doubled for each next one
    registry_max_delay_ms: int = 30_000  # longest wait between attempts (Retry-After capped)
    registry_timeout_s: int = 60  # seconds a registry may stay silent before a request times out
    copy_streams: int = 4  # blobs streamed into one registry at once by a cross-registry copy
    promotion_remote: str | None = None  # git remote whose refs serialise stage pointers (docs/promotion.md)

    @property
    def ledger_path(self) -> Path:
        return self.ledger or self.state_dir / "ledger.sqlite"

    @property
    def keys_dir(self) -> Path:
        """Where this checkout's generated keys live: ``<state_dir>/keys`` (the build key, the
        check-runner key, approvers' keys under ``approvers/NAME``, as the shipped policies name
        them: ``{state_dir}/keys/approvers/NAME/builder.pub``)."""
        return self.state_dir / "keys"

    def approver_key_dir(self, name: str) -> Path:
        """The directory of approver ``name``'s key pair: ``<state_dir>/keys/approvers/NAME``."""
        return self.keys_dir / "approvers" / name

    @property
    def key_path(self) -> Path:
        return self.key or self.keys_dir / "builder.key"

    @property
    def check_key_path(self) -> Path:
        """Key that signs device-check results on this host (a check runner's, never the build key)."""
        return self.check_key or self.keys_dir / "check-runner" / "builder.key"

    @property
    def mirror_record(self) -> Path:
        """Machine-local record of mirrored base digests (written by scripts/setup)."""
        return self.state_dir / "mirror.json"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    def repository(self, repository: str) -> str:
        """The registry repository of a matrix or stage repository: under ``repository_prefix``
        (:func:`repository_path`, the one naming function)."""
        return repository_path(self.repository_prefix, repository)

    def endpoint_overrides(self) -> dict[str, str]:
        """``registry_endpoints`` as registry name -> ``host[:port]`` (validated at load)."""
        return {k.strip(): v.strip() for k, _, v in (e.partition("=") for e in self.registry_endpoints)}

    def is_insecure(self, registry: str) -> bool:
        """Plain HTTP only for loopback (:func:`builder.hosts.is_loopback`: ``localhost``, 127.0.0.0/8,
        ``[::1]``, any case, with or without a port) or explicitly listed registries."""
        from builder.hosts import is_loopback  # on a registry command only (start-up, issue 19)

        return is_loopback(registry) or registry in self.insecure_registries


_FIELD_TYPES = {f.name: str(f.type) for f in dataclasses.fields(Config) if f.name != "root"}
"""Each key's type, as :class:`Config` declares it (the one definition: what a key takes is read
from its field, never listed twice)."""
_PATH_FIELDS = {name for name, kind in _FIELD_TYPES.items() if "Path" in kind}
_SECRET_FIELDS = {"key_password"}
_ZERO_ALLOWED = {"registry_retries", "registry_backoff_ms", "registry_max_delay_ms"}  # other ints must be >= 1


def _expected(name: str) -> str:
    """What key ``name`` takes, in words (from its field's type): ``a path (a string)``,
    ``a whole number >= 1``, ``a list of strings``, ``a string``."""
    kind = _FIELD_TYPES[name]
    if name in _PATH_FIELDS:
        return "a path (a string)"
    if kind.startswith("tuple"):
        return "a list of strings (or one comma-separated string)"
    if kind == "int":
        return f"a whole number >= {0 if name in _ZERO_ALLOWED else 1}"
    return "a string"


def _toml_type(value: object) -> str:
    """The TOML type of a parsed ``value`` in the words of the TOML 1.0 spec (https://toml.io/en/v1.0.0):
    a boolean, an integer, a float, a string, an array, a table, a date or time."""
    for python, toml in ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string")):
        if isinstance(value, python):
            return toml
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def _not_an_item(item: str) -> bool:
    """Whether one comma-separated ``item`` is a piece of a list written in another syntax: quotes or
    blanks inside it, or brackets that do not hold an IPv6 address (``[::1]:5000`` is an item,
    ``[]`` and ``[a:5000]`` are not; RFC 3986 section 3.2.2)."""
    if any(c in item for c in "\"' \t"):
        return True
    if "[" not in item and "]" not in item:
        return False
    import ipaddress

    host, sep, rest = item.partition("]")
    inside = host.removeprefix("[").split("%", 1)[0]  # a zone index (fe80::1%eth0) is the address's
    try:
        ipaddress.IPv6Address(inside)
    except ValueError:
        return True
    return not (host.startswith("[") and sep and (rest == "" or re.fullmatch(r":\d+(/.*)?", rest)))


def _coerce(name: str, value: object, source: str, *, typed: bool) -> Path | tuple[str, ...] | int | str | None:
    """``value`` as field ``name`` of :class:`Config` takes it: from an environment variable
    (always text, converted: ``BUILDER_WORKERS=4``) or from builder.toml (``typed``: TOML-typed,
    checked as declared: a boolean, a float or a quoted ``"4"`` is never an integer, a path is a
    string). ``""`` for a path
    means "not set" (its default). Raises ConfigError naming ``source``, the key, the value given
    and what the key takes when it does not fit."""
    kind = _FIELD_TYPES[name]
    # as written: a TOML value in TOML's spelling (true, ["a"]; JSON's for these types), text quoted
    shown = json.dumps(value, default=str) if isinstance(value, (bool, int, float, list, dict)) else str(value)
    given = repr(value) if isinstance(value, str) else f"{shown} ({_toml_type(value)})"
    problem = ConfigError(
        f"{source}: invalid value for `{name}`: {given}; expected {_expected(name)}",
        hint=f"set `{name}` (builder.toml) or {ENV_PREFIX}{name.upper()} to {_expected(name)} (docs/configuration.md)",
    )
    if name in _PATH_FIELDS:
        if not isinstance(value, str):
            raise problem
        return Path(value) if value else None
    if kind.startswith("tuple"):
        if isinstance(value, str):
            items = tuple(v.strip() for v in value.split(",") if v.strip())
            if any(_not_an_item(v) for v in items):  # '["a:5000"]': a JSON or TOML list written as text
                raise ConfigError(
                    f"{source}: invalid value for `{name}`: {value!r} is not a comma-separated list (an item "
                    "holds quotes, blanks or an unmatched bracket: a list in JSON or TOML syntax?)",
                    hint=f"write the items separated by commas only, e.g. {ENV_PREFIX}{name.upper()}=ITEM1,ITEM2 "
                    "(docs/configuration.md)",
                )
            return items
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise problem
        return tuple(value)
    if kind == "int":
        if isinstance(value, str) and not typed:
            try:
                value = int(value)  # an environment variable's text; "2.5" and "true" are refused
            except ValueError:
                raise problem from None
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name in _ZERO_ALLOWED else 1):
            raise problem
        return value
    if not isinstance(value, str):
        raise problem
    return value


def load_config(root: Path, environ: Mapping[str, str]) -> Config:
    """Read ``root/builder.toml`` (optional) and apply ``BUILDER_*`` overrides.

    Raises ConfigError naming the file and key for unknown keys or bad values, and the file with the
    parser's line and column for text that is not TOML 1.0.

    The file is parsed with rtoml (the Rust ``toml`` crate, TOML 1.0: https://github.com/samuelcolvin/rtoml)
    rather than the standard library's ``tomllib``: every command reads ``builder.toml``, and importing
    ``tomllib`` compiles its regular expressions in pure Python: importing it and parsing the file
    cost 9.9 M instructions (about 2.3 ms) in a process that has already imported Click and urllib3,
    rtoml 1.7 M (about 1 ms) (issue 19, docs/benchmarks.md "#19, round 7").
    """
    root = root.resolve()
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}  # key -> where its value was set (for errors)
    known = {f.name for f in dataclasses.fields(Config)} - {"root"}
    path = root / CONFIG_FILE
    if path.is_symlink() or path.exists():  # a dangling link is a file to fix, not "no file"
        data = _read_config_file(path)
        for key, value in data.items():
            if key in _SECRET_FIELDS:
                raise ConfigError(
                    f"{path}: `{key}` is not read from builder.toml (a secret in a file of the checkout)",
                    hint=f"remove it from {CONFIG_FILE}; set {ENV_PREFIX}{key.upper()} in the environment instead",
                )
            if key not in known:
                raise ConfigError(
                    f"{path}: unknown key `{key}`",
                    hint=f"known keys: {', '.join(sorted(known - _SECRET_FIELDS))}",
                )
            values[key] = _coerce(key, value, str(path), typed=True)
            origins[key] = f"{path}: `{key}`"
    for key in known:
        env = ENV_PREFIX + key.upper()
        if env in environ:
            values[key] = _coerce(key, environ[env], f"environment variable {env}", typed=False)
            origins[key] = f"environment variable {env}"
    for key in [k for k, v in values.items() if v is None and "None" not in _FIELD_TYPES[k]]:
        del values[key]  # "" for a path that has a default: the default
    for key in _PATH_FIELDS:
        p = values.get(key)
        if isinstance(p, Path) and not p.is_absolute():
            values[key] = root / p
    _check_values(values, str(path))
    _check_registry(values, origins)
    cfg = Config(root=root, **values)
    # defaults that are relative paths
    fixed = {
        k: root / getattr(cfg, k)
        for k in _PATH_FIELDS
        if isinstance(getattr(cfg, k), Path) and not getattr(cfg, k).is_absolute()
    }
    cfg = dataclasses.replace(cfg, **fixed) if fixed else cfg
    _check_folders(cfg, origins)
    return cfg


def _read_config_file(path: Path) -> dict[str, Any]:
    """The TOML table of ``path`` (builder.toml), read with the hand-written files' size limit
    (:func:`builder.textfiles.read_text`). Raises ConfigError (exit 2) naming the file and what to
    do when it is a folder, a link to nothing, unreadable, over the limit, not UTF-8 or not TOML 1.0
    (with the parser's line and column)."""
    import rtoml  # only where builder.toml is read

    from builder.textfiles import read_text

    hint = f"make {path} a readable UTF-8 TOML file (docs/configuration.md), or remove it to use the defaults"
    try:
        text = read_text(path)
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not the configuration file", hint=hint) from None
    except FileNotFoundError:
        target = path.readlink() if path.is_symlink() else "nothing"
        raise ConfigError(f"{path} is a symbolic link to {target}, which does not exist", hint=hint) from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror or exc}", hint=hint) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text: {exc}", hint=hint) from None
    try:
        return dict(rtoml.loads(text))
    except rtoml.TomlParsingError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _check_registry(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """The ``registry`` setting must be a registry ``host[:port]`` (:func:`registry_problem`):
    ``BUILDER_REGISTRY='bad registry!'`` is a setting to fix, not a registry that answered badly.
    ConfigError (exit 2) naming where it was set."""
    registry = values.get("registry")
    if isinstance(registry, str) and (why := registry_problem(registry)) is not None:
        raise ConfigError(
            f"{origins.get('registry', '`registry`')}: the registry {why}",
            hint=f"set `registry` (builder.toml) or {ENV_PREFIX}REGISTRY to a registry host[:port], "
            "e.g. 127.0.0.1:5000 or ghcr.io",
        )


#: the settings that name a folder (``state_dir``, ``render_dir``, ``matrices_dir``, ...)
_DIR_FIELDS = tuple(sorted(name for name in _PATH_FIELDS if name.endswith("_dir")))
#: the settings that name a file (``bases_lock``, ``mirror_map``, ``ledger``, ``key``, ``check_key``)
_FILE_FIELDS = tuple(sorted(_PATH_FIELDS - set(_DIR_FIELDS)))


def _check_folders(cfg: Config, origins: Mapping[str, str]) -> None:
    """Every file setting that exists must not be a folder (``mkdir bases.lock.json`` was an
    IsADirectoryError traceback where it is read), and every folder setting that exists must be
    a folder: a file there (``BUILDER_STATE_DIR=README.md``) would otherwise read as an empty
    folder (no keys, so every signature "unknown signer"; no matrices) or fail later at a write.
    ConfigError (exit 2) naming the path and where it was set. A folder or file that does not
    exist yet is fine (builder creates ``state_dir``; the others say so where they are read)."""
    for name in _DIR_FIELDS:
        folder: Path = getattr(cfg, name)
        if folder.exists() and not folder.is_dir():
            raise ConfigError(
                f"{origins.get(name, f'`{name}` (default)')}: {folder} is a file, not a folder",
                hint=f"set `{name}` (builder.toml) or {ENV_PREFIX}{name.upper()} to a folder",
            )
    for name in _FILE_FIELDS:  # and every file setting that exists is no folder (read later: a traceback)
        file: Path | None = getattr(cfg, name)
        if file is not None and file.is_dir():
            raise ConfigError(
                f"{origins.get(name, f'`{name}` (default)')}: {file} is a folder, not a file",
                hint=f"set `{name}` (builder.toml) or {ENV_PREFIX}{name.upper()} to a file, or remove the folder",
            )


def _check_values(values: dict[str, Any], source: str) -> None:
    """Keys whose text has a grammar: ``repository_prefix`` (a repository path; stored without
    leading or trailing ``/``) and each ``registry_endpoints`` entry (``NAME=HOST[:PORT]``).
    ConfigError naming ``source`` and the key."""
    prefix = values.get("repository_prefix")
    if isinstance(prefix, str):
        try:
            values["repository_prefix"] = check_repository_prefix(prefix)
        except ConfigError as exc:
            raise ConfigError(f"{source} (or BUILDER_REPOSITORY_PREFIX): {exc}", hint=exc.hint) from exc
    for entry in values.get("registry_endpoints", ()):
        key, sep, host = entry.partition("=")
        if not sep or not key.strip() or not host.strip() or "/" in host:
            raise ConfigError(
                f"{source} (or BUILDER_REGISTRY_ENDPOINTS): registry_endpoints entry {entry!r} is not NAME=HOST[:PORT]",
                hint='e.g. registry_endpoints = ["docker.io=mirror.example:5000"]',
            )
        name = key.strip()
        if "." not in name and ":" not in name and name != "localhost":
            # the Docker CLI's rule: a first name component without '.' or ':' (not localhost) is a
            # repository path, never a registry, so no reference would ever reach this entry
            raise ConfigError(
                f"{source} (or BUILDER_REGISTRY_ENDPOINTS): registry_endpoints entry {entry!r}: {name!r} is not a "
                "registry name (a registry has a '.' or ':' or is localhost; Docker Hub is docker.io)",
                hint='e.g. registry_endpoints = ["docker.io=mirror.example:5000"]',
            )


#: One repository path component (OCI distribution spec, "Pulling manifests": ``<name>``
#: https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#pulling-manifests).
_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")


def repository_path(prefix: str, repository: str) -> str:
    """The registry repository of a project repository under the checkout's ``repository_prefix``:
    ``("team-a", "ml/jax")`` -> ``team-a/ml/jax``; ``""`` leaves it unchanged. The one place
    repositories are named (build, stage pointers, status, resolve, gc); two checkouts with
    different prefixes never share a repository on one registry."""
    prefix = prefix.strip("/")
    return f"{prefix}/{repository}" if prefix else repository


def repository_problem(repository: str) -> str | None:
    """Why ``repository`` is not a repository path (None: it is): ``/``-separated components of
    lowercase letters and digits joined by ``.``, ``_``, ``__`` or ``-`` (so never ``..`` or an
    empty component), at most 255 characters (OCI distribution spec ``<name>``, as above). The one
    definition of the grammar: ``builder.registry.reference`` parses references with it, policy
    validation and :func:`check_repository_prefix` judge names with it."""
    if len(repository) > 255:
        return "longer than 255 characters"
    for comp in repository.split("/"):
        if not _COMPONENT_RE.fullmatch(comp):
            return f"component {comp!r} must be lowercase letters/digits separated by . _ __ -"
    return None


#: ``host[:port]`` of a registry: DNS labels or a bracketed IPv6 literal, optional port (the
#: reference grammar: https://github.com/distribution/reference/blob/main/regexp.go).
_HOST_RE = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::[0-9]+)?$")


def registry_problem(host: str) -> str | None:
    """Why ``host`` is not a registry ``host[:port]`` (None: it is): DNS labels or an IPv6 literal,
    no empty label (``..``, a leading or trailing ``.``), so a registry can never read as a path
    (the reference grammar: https://github.com/distribution/reference/blob/main/regexp.go). The one
    definition: ``builder.registry.reference`` parses references with it, the ``registry`` setting
    and policy validation judge hosts with it."""
    if not _HOST_RE.fullmatch(host):
        return f"{host!r} is not host[:port]"
    name = host if host.startswith("[") else host.rsplit(":", 1)[0]
    if not name.startswith("[") and any(label in ("", "-") for label in name.split(".")):
        return f"{host!r} has an empty host label ('..', or a leading or trailing '.')"
    return None


def check_repository_prefix(prefix: str) -> str:
    """``prefix`` in lower case without leading/trailing ``/`` when it is a repository path
    (:func:`repository_problem`), else ConfigError naming it and what is wrong. ``""`` (no prefix)
    is valid. Lower case because repository names are (OCI distribution spec); a GitHub
    ``owner/repo`` such as ``Acme/Images`` becomes the GHCR namespace ``acme/images``
    (https://docs.github.com/en/packages/working-with-a-github-packages-registry/working-with-the-container-registry)."""
    text = prefix.strip("/").lower()
    why = repository_problem(text) if text else None
    if why is not None:
        raise ConfigError(
            f"repository_prefix {prefix!r} is not a repository path: {why}",
            hint="use lowercase components such as `team-a` or `acme/images` (GHCR: the GitHub owner/repository)",
        )
    return text


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding builder.toml, else ``start``."""
    for d in (start, *start.parents):
        if (d / CONFIG_FILE).is_symlink() or (d / CONFIG_FILE).exists():
            return d
    return start
