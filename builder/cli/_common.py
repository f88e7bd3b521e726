"""Shared Click plumbing: the application context, shared options, output helpers.

Human output goes to stderr (rich); ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from builder.errors import BuilderError, NotFoundError, SigningKeyError

if TYPE_CHECKING:
    from builder.app import App
    from builder.cli.plaintext import HumanConsole
    from builder.config import Config

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass
class AppContext:
    """Per-invocation state: output mode and the (lazily loaded) configuration."""

    json_output: bool = False
    debug: bool = False
    root_option: str | None = None
    docker_config: Path | None = None
    _config: Config | None = None
    _app: App | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from builder.config import find_root, load_config

            root = Path(self.root_option) if self.root_option else find_root(Path.cwd())
            self._config = load_config(root, os.environ)
        return self._config

    @property
    def app(self) -> App:
        """The composition root for this invocation (built on first use)."""
        if self._app is None:
            from builder import process
            from builder.app import App, docker_config_path

            path = docker_config_path(self.docker_config, os.environ, Path.home())
            self._app = App(self.config, path, environ=dict(os.environ), on_note=_note)
            process.set_child_environment(os.environ)  # children never get the key password
        return self._app

    def explain(self, error: BuilderError) -> BuilderError:
        """``error`` as reported: :meth:`builder.app.App.explain` when the invocation built an ``App``."""
        return error if self._app is None else self._app.explain(error)

    def close(self) -> None:
        """End of the invocation: a warning on stderr for each matrix file a names lookup left out
        because it does not load (:func:`builder.matrix.index.take_skipped_matrices`: a broken
        ``pytorch.yaml`` never fails ``resolve jax...``), then release what the ``App`` opened."""
        if "builder.matrix.index" in sys.modules:  # only a command that read the matrices
            from builder.matrix.index import take_skipped_matrices

            for path, why in take_skipped_matrices():
                sys.stderr.write(skipped_matrix_warning(path, why, Path.cwd()))
        if self._app is not None:
            from builder import process

            self._app.close()
            process.set_child_environment(None)


def skipped_matrix_warning(path: Path, why: str, cwd: Path) -> str:
    """The stderr lines (79 columns, ending in a newline) that say matrix ``path`` (shown relative
    to ``cwd`` when under it) was left out because of ``why`` (its first problem) and what to do."""
    import textwrap  # only when a matrix is broken

    shown = path.relative_to(cwd) if path.is_relative_to(cwd) else path
    text = f"warning: {shown} does not load and was left out ({why}); `builder matrix list` shows every problem"
    return textwrap.fill(text, width=79, subsequent_indent="  ", break_on_hyphens=False) + "\n"


def _note(text: str) -> None:
    """A line for people on stderr (dim): what a command chose for them."""
    from builder.cli.plaintext import escape

    console().print(f"[dim]{escape(text)}[/]", highlight=False, soft_wrap=True)


def app_context() -> AppContext:
    ctx = click.get_current_context()
    obj = ctx.find_object(AppContext)
    if obj is None:  # a command invoked outside the root group (tests)
        obj = AppContext()
        ctx.obj = obj
    return obj


def json_option(f: F) -> F:
    """``--json`` on a command: same as the global ``builder --json``."""

    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            obj = ctx.find_object(AppContext)
            if obj is None:
                ctx.obj = obj = AppContext()
            obj.json_output = True

    return click.option(
        "--json",
        "json_flag",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=callback,
        help="Print one JSON document on stdout (for CI).",
    )(f)


@functools.cache
def console() -> HumanConsole:
    """The console for human output (stderr): colour and width from the environment
    (``NO_COLOR``, ``FORCE_COLOR``, ``COLUMNS``; see ``builder.cli.terminal``); lines of text to a
    pipe or file without importing rich (``builder.cli.plaintext``), the rest through rich."""
    from builder.cli.plaintext import human_console

    return human_console()


def emit(payload: object, human: Callable[[], None] | str | None = None, *, report: object = None) -> None:
    """Print the command's result: JSON on stdout with ``--json``; else ``human`` on stderr.

    ``report``: the typed result, for GitHub Actions (``builder.cli.github.report_result``: step
    outputs and summary when ``GITHUB_ACTIONS=true``)."""
    app = app_context()
    if app.json_output:
        sys.stdout.write(json.dumps(payload, indent=2, default=_default) + "\n")
    elif callable(human):
        human()
    elif human is not None:
        console().print(human)
    if report is not None:
        from builder.cli.github import report_result

        report_result(report)


def _default(o: object) -> object:
    """JSON for what ``json`` cannot write: dataclasses as objects, paths as strings, sets and tuples as lists."""
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


class _EchoHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        from builder.cli.plaintext import escape

        console().print(f"[dim]{escape(record.getMessage())}[/]")


def echo_external_commands(enabled: bool) -> None:
    """``--debug``: print each external command (``builder.process`` log) on stderr before it
    runs, and a cache file not used because others could have written it (``builder.cachefile``);
    without it, nothing (also when several invocations share one process)."""
    for name in ("builder.process", "builder.cachefile"):
        log = logging.getLogger(name)
        for handler in [h for h in log.handlers if isinstance(h, _EchoHandler)]:
            log.removeHandler(handler)
        if enabled:
            log.addHandler(_EchoHandler())
        log.setLevel(logging.DEBUG if enabled else logging.NOTSET)


class _NoteHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        from builder.cli.plaintext import escape

        console().print(f"[dim]{escape(record.getMessage())}[/]", highlight=False)


def show_lock_waits() -> None:
    """Print on stderr the one notice ``builder.lockfile`` logs when a lock wait passes ~2 s (what
    is awaited, the lock file, the timeout), in every output mode (``--json`` keeps stdout); only
    this handler prints it (not propagated to the root logger). Idempotent (several invocations
    may share one process: the tests)."""
    # builder.registry.auth: the same kind of notice for a credential helper slow to answer;
    # builder.registry.backoff: for a registry request still being retried
    for name in ("builder.lockfile", "builder.registry.auth", "builder.registry.backoff"):
        log = logging.getLogger(name)
        for handler in [h for h in log.handlers if isinstance(h, _NoteHandler)]:
            log.removeHandler(handler)
        log.addHandler(_NoteHandler())
        log.propagate = False


# ---------------------------------------------------------------------------------------------
# Shared options: each is defined once here, so every command that takes it parses and documents
# it the same way. Nothing here imports more than click at import time (`builder --help` stays fast).


def option_group(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator applying ``options`` in the order given (as if stacked top to bottom)."""

    def decorate(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


class PathParam(click.Path):
    """A path given on the command line, passed as a ``Path``: the one path type of every command.

    Every check of it fails as one builder error naming the path and the option, while the command
    line is read (before any work): by default NotFoundError (exit 8, docs/exit-codes.md: a path
    given on the command line that is wrong), ``error=SigningKeyError`` (16) for key files. Checked:
    ``exists`` (a missing path), ``dir_okay=False`` (a folder where a file is named),
    ``file_okay=False`` (a file where a folder is named: ``render --out README.md``), and what else
    Click checks (readable). A path that need not exist yet (an output) is only checked when it does.
    """

    def __init__(
        self,
        *,
        file_okay: bool = True,
        dir_okay: bool = True,
        exists: bool = False,
        readable: bool = True,
        allow_dash: bool = False,
        error: type[BuilderError] | None = None,
    ) -> None:
        super().__init__(
            file_okay=file_okay,
            dir_okay=dir_okay,
            exists=exists,
            readable=readable,
            allow_dash=allow_dash,
            path_type=Path,
        )
        self.error = error

    def _raise(self, message: str, hint: str, value: object) -> NoReturn:
        raise (self.error or NotFoundError)(message, hint=hint, path=str(value))

    def convert(
        self, value: str | os.PathLike[str], param: click.Parameter | None, ctx: click.Context | None
    ) -> str | bytes | os.PathLike[str]:
        name = _param_name(param, ctx)
        dash = self.allow_dash and os.fspath(value) in ("-", b"-")
        if not dash and not os.path.exists(value):
            if self.exists:
                self._raise(
                    f"{os.fspath(value)!s} does not exist (given as {name})",
                    "check the path (a relative one is read from the current directory)",
                    value,
                )
        elif not dash and os.path.isdir(value) and not self.dir_okay:
            self._raise(f"{os.fspath(value)!s} is a folder; {name} names a file", "give the path of a file", value)
        elif not dash and not os.path.isdir(value) and not self.file_okay:
            self._raise(
                f"{os.fspath(value)!s} is a file; {name} names a folder",
                "give the path of a folder" + ("" if self.exists else " (a missing one is created)"),
                value,
            )
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:  # what else Click finds wrong (not readable): the same error
            self._raise(f"{exc.message.rstrip('.')} (given as {name})", "check the path and its permissions", value)


class DigestParam(click.ParamType[str, str]):
    """A content digest given on the command line: a whole ``sha256:<64 lowercase hex>`` (the OCI
    image spec's sha256 form, https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests),
    or one of ``special`` words (``--expect-previous none``), passed on as the text. Anything else
    is a usage error (exit 2) naming the option while the command line is read, before any plan
    or registry request; the one type of ``promote --expect-previous`` and ``rollback --to``."""

    name = "digest"

    def __init__(self, *special: str) -> None:
        self.special = special

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str | None:  # noqa: ARG002 (Click's signature)
        return "|".join(("DIGEST", *self.special))

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from builder.registry.reference import is_sha256_digest

        text = str(value).strip()
        if text in self.special or is_sha256_digest(text):
            return text
        words = "".join(f" or {s!r}" for s in self.special)
        raise click.BadParameter(f"{text!r} is not a digest (sha256:<64 hex>){words}", ctx, param)


def _param_name(param: click.Parameter | None, ctx: click.Context | None) -> str:
    """How an error names the parameter: ``'--out'``, ``the argument FILES``."""
    if isinstance(param, click.Option):
        return param.get_error_hint(ctx)
    return f"the argument {param.human_readable_name}" if param is not None else "a path"


class ExistingFile(PathParam):
    """A file that must exist: a missing one, or a folder, is NotFoundError (exit 8, as for every
    named input file, docs/exit-codes.md) naming the option (:class:`PathParam`)."""

    def __init__(self, *, error: type[BuilderError] | None = None) -> None:
        super().__init__(dir_okay=False, exists=True, error=error)


def file_option(
    *param_decls: str,
    help: str,
    exists: bool = False,
    required: bool = False,
    error: type[BuilderError] | None = None,
) -> Callable[[F], F]:
    """An option naming one file, passed as a ``Path`` (``None`` when not given); a folder, or with
    ``exists`` a missing file, is NotFoundError (exit 8, :class:`PathParam`; ``error``: another
    builder error, SigningKeyError for keys), with ``required`` a missing option a usage error (exit 2)."""
    return click.option(
        *param_decls,
        type=PathParam(dir_okay=False, exists=exists, error=error),
        default=None,
        required=required,
        help=help,
    )


matrix_option = click.option(
    "--matrix",
    "matrices",
    multiple=True,
    type=ExistingFile(),
    help="Matrix file (repeatable; default: every *.yaml/*.yml in builder.toml `matrices_dir`).",
)
select_option = click.option(
    "--select", "globs", multiple=True, metavar="GLOB", help="Only variants whose id matches this glob (repeatable)."
)
shard_option = click.option(
    "--shard",
    default=None,
    metavar="I/N",
    help="Only shard I of N of the variants (1-based, round-robin over the variants sorted by id; CI fan-out).",
)
changed_since_option = click.option(
    "--changed-since",
    default=None,
    metavar="GIT_REF",
    help="Only variants whose content hash differs from their render at GIT_REF (or that are new).",
)
workers_option = click.option(
    "--workers", type=click.IntRange(1, 64), default=None, help="Parallel builds (default: builder.toml)."
)
allow_unpinned_option = click.option(
    "--allow-unpinned", is_flag=True, help="Build variants whose base or lock is not pinned (throwaway)."
)
policy_option = file_option(
    "--policy", "policy_file", exists=True, help="Policy file (default: <policies_dir>/default.yaml)."
)
key_option = file_option("--key", help="Private signing key (default: builder.toml `key`).", error=SigningKeyError)
_TRUST_ALIAS = "builder.trust_root_alias"


def _check_trust_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """``--trust-config FILE``: a Sigstore trusted root JSON (checked cheaply while the command line is
    read, ConfigError exit 2); not given: what the hidden old spelling ``--trust-root`` gave."""
    if value is None:
        alias: Path | None = ctx.meta.get(_TRUST_ALIAS)
        return alias
    from builder.signing.keyless.trust import check_trust_file

    if param.name == "trust_root_alias":
        if ctx.params.get("trust_root") is not None:
            raise click.UsageError("give the trusted root once: --trust-config (--trust-root is its old name)", ctx)
        check_trust_file(value)
        ctx.meta[_TRUST_ALIAS] = value
        ctx.params["trust_root"] = value  # when --trust-config was already read (not given)
        return None
    if ctx.meta.get(_TRUST_ALIAS) is not None:
        raise click.UsageError("give the trusted root once: --trust-config (--trust-root is its old name)", ctx)
    check_trust_file(value)
    return value


trust_option = option_group(
    click.option(
        "--trust-config",
        "trust_root",
        type=PathParam(dir_okay=False, exists=True),
        default=None,
        callback=_check_trust_file,
        help="Sigstore trusted_root.json (or client trust config) for keyless identities in the policy, "
        "checked when given (default: public-good, offline copy).",
    ),
    click.option(
        "--trust-root",
        "trust_root_alias",
        type=PathParam(dir_okay=False, exists=True),
        default=None,
        hidden=True,
        expose_value=False,
        callback=_check_trust_file,
    ),
)


def bundle_option(what: str, legacy: str) -> Callable[[F], F]:
    """``--bundle/--no-bundle`` (default off), one definition for every command that writes with a
    key pair: ``what`` is also written as a Sigstore bundle referrer (cosign 3's default format),
    while the ``legacy`` tags cosign 2 readers need are always written (docs/signing.md)."""
    return click.option(
        "--bundle/--no-bundle",
        default=False,
        show_default=True,
        help=f"Key pair: also write {what} as a Sigstore bundle referrer (cosign 3's format, read "
        f"by cosign with --new-bundle-format); the legacy {legacy} always written.",
    )


def _store_docker_config(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        obj = ctx.find_object(AppContext)
        if obj is None:
            ctx.obj = obj = AppContext()
        obj.docker_config = value


docker_config_option = click.option(
    "--docker-config",
    type=PathParam(exists=True),
    default=None,
    is_eager=True,
    expose_value=False,
    callback=_store_docker_config,
    help="Docker config file or directory with registry credentials, which must exist (default: $DOCKER_CONFIG, "
    "else ~/.docker).",
)
keyless_options = option_group(
    click.option(
        "--keyless",
        "keyless_",
        is_flag=True,
        help="Sign keylessly with Sigstore (OIDC -> Fulcio, Rekor) instead of with a key.",
    ),
    click.option(
        "--oidc-token",
        envvar="BUILDER_OIDC_TOKEN",
        default=None,
        help="OIDC identity token for --keyless (default: the ambient CI token, e.g. GitHub Actions id-token).",
    ),
    file_option(
        "--trust-config",
        exists=True,
        help="Sigstore client trust config JSON of a private instance for --keyless (default: public-good).",
    ),
)


def _resolve_fleet(ctx: click.Context, _param: click.Parameter, value: str | None) -> Path | None:
    if value is None:
        return None
    from builder.checks.host.reading import load_host
    from builder.compat.fleets import load_fleet, resolve_fleet_path

    obj = ctx.find_object(AppContext) or AppContext()
    path = resolve_fleet_path(value, obj.config.fleets_dir)
    load_fleet(path, load_host=load_host)  # an invalid fleet: ConfigError (exit 2) before any work
    return path


def fleet_option(help: str, *, param: str = "fleet") -> Callable[[F], F]:
    """``--fleet NAME|FILE``, the same everywhere: a fleet name (``demo`` ->
    ``<fleets_dir>/demo.yaml``) or a fleet file, passed to the command as the file's ``Path``
    (NotFoundError, exit 8, naming the known fleets when neither exists; ConfigError, exit 2,
    listing every problem of an invalid fleet file - both before the command does anything)."""
    return click.option("--fleet", param, default=None, metavar="NAME|FILE", callback=_resolve_fleet, help=help)


def stage_option(help: str, *, multiple: bool = False, required: bool = False) -> Callable[[F], F]:
    """``--stage STAGE`` (a stage of the policy; repeatable with ``multiple``, passed as ``stages``)."""
    if multiple:
        return click.option("--stage", "stages", multiple=True, metavar="STAGE", help=help + " (repeatable)")
    return click.option("--stage", "stage", required=required, metavar="STAGE", help=help)


#: ``os/arch[/variant]`` as the OCI image index spec writes a platform (lower-case names such as
#: ``linux/amd64``, ``linux/arm64/v8``): https://github.com/opencontainers/image-spec/blob/main/image-index.md
_PLATFORM_RE = r"[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?"


def _check_platform(_ctx: click.Context, param: click.Parameter, value: str | tuple[str, ...] | None) -> object:
    """A malformed ``--platform`` (not ``os/arch[/variant]``) is a usage error (exit 2) before any work."""
    import re

    for one in (value,) if isinstance(value, str) else value or ():
        if not re.fullmatch(_PLATFORM_RE, one):
            raise click.BadParameter(f"{one!r} is not os/arch[/variant] (e.g. linux/amd64, linux/arm64)", param=param)
    return value


def platform_option(
    help: str = "Image platform (os/arch[/variant]).", *, multiple: bool = False, image: bool = True
) -> Callable[[F], F]:
    """``--platform OS/ARCH[/VARIANT]``, checked for its form (exit 2 when malformed). With
    ``image`` (the platform of an image read from a registry) the default is None: an index's
    linux/amd64 manifest, else its first, and a platform given that the image does not have is
    NotFoundError (exit 8) listing its platforms (:func:`builder.registry.copy.platform_manifest`);
    without ``image`` the default is ``linux/amd64``. Repeatable with ``multiple``, passed as
    ``platforms`` (default: the variants' own)."""
    if multiple:
        return click.option(
            "--platform",
            "platforms",
            multiple=True,
            metavar="OS/ARCH",
            callback=_check_platform,
            help=help + " (repeatable)",
        )
    if image:
        return click.option(
            "--platform",
            default=None,
            metavar="OS/ARCH",
            callback=_check_platform,
            help=help + " Default: the image's own (an index: linux/amd64, else its first); one it lacks is exit 8.",
        )
    return click.option(
        "--platform", default="linux/amd64", show_default=True, metavar="OS/ARCH", callback=_check_platform, help=help
    )


def buildx_builder_option(f: F) -> F:
    """``--builder NAME``, passed as ``buildx_builder``: the buildx builder that builds (``docker buildx
    create --driver remote|kubernetes --name NAME ...``: a BuildKit fleet); default: buildx's current one.
    An unknown name is exit 2 before any build (https://docs.docker.com/build/builders/drivers/)."""
    return click.option(
        "--builder",
        "buildx_builder",
        default=None,
        metavar="NAME",
        help="buildx builder that builds (remote, kubernetes drivers: `docker buildx ls` lists them); "
        "default: the current one.",
    )(f)


def default_source_date_epoch(cfg: Config) -> int | None:
    """``SOURCE_DATE_EPOCH`` for builds: ``$SOURCE_DATE_EPOCH`` when it is a number, else the
    project's HEAD commit time (None outside git)."""
    from builder.build.source import git_commit_time

    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(value) if value.isdigit() else git_commit_time(cfg.root)
