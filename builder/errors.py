"""Every user-facing error, each with its own exit code and a hint that says what to do next.

The exit-code table is allocated here once and documented in ``docs/exit-codes.md``
(a unit test keeps the two in step). Errors are raised by core modules and caught only in
``builder.cli.main``, which prints ``message`` and ``hint`` (or, with ``--json``, one JSON
document ``{"error": {...}}`` on stdout) and exits with ``exit_code``.

Codes: 0 success, 1 unexpected error (a bug: traceback shown), 2 usage or configuration
(as Click), then one code per failure kind below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the JSON shapes: typing_extensions, not imported to raise an error (issue 19)
    from builder.error_documents import ErrorBody


class BuilderError(Exception):
    """Base class. ``message``: what went wrong (names the file, field or reference);
    ``hint``: what to do next; ``details``: machine-readable facts for ``--json``."""

    exit_code: ClassVar[int] = 1
    kind: ClassVar[str] = "error"

    def __init__(self, message: str, *, hint: str | None = None, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        # free-form JSON facts of the failure kind (the ``details`` object of ``builder.error_documents.ErrorDocument``)
        self.details: dict[str, Any] = details

    default_hint: ClassVar[str] = ""

    def diagnostics(self) -> str:
        """Human text: the message, then the hint on its own line."""
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message

    def to_json(self) -> ErrorBody:
        return {
            "kind": self.kind,
            "exit_code": self.exit_code,
            "message": self.message,
            "hint": self.hint,
            "details": self.details,
        }


class ConfigError(BuilderError):
    """Invalid configuration or usage (builder.toml, BUILDER_* variables, option values)."""

    exit_code = 2
    kind = "config"
    default_hint = "fix the named setting in builder.toml or the BUILDER_* variable; see docs/configuration.md"


class EngineUnavailableError(BuilderError):
    """The container engine (Docker daemon) cannot be reached."""

    exit_code = 3
    kind = "engine-unavailable"
    default_hint = (
        "start the Docker daemon (`bash scripts/setup` starts one on this machine) "
        "or point DOCKER_HOST at a running engine"
    )


class EngineCommandError(BuilderError):
    """An engine command ran and failed (carries command, exit code, stdout, stderr)."""

    exit_code = 4
    kind = "engine-command"
    default_hint = "read the engine's stderr above; rerun with --debug for the full command"


class RegistryUnavailableError(BuilderError):
    """The OCI registry cannot be reached (connection refused, DNS, TLS, timeout)."""

    exit_code = 5
    kind = "registry-unavailable"
    default_hint = (
        "start the registry (`bash scripts/setup` starts one on 127.0.0.1:5000) "
        "or set `registry` in builder.toml / BUILDER_REGISTRY"
    )

    def __init__(self, message: str, *, hint: str | None = None, **details: object) -> None:
        """``details['registry']`` (host[:port]) chooses the default hint: starting a registry with
        scripts/setup only for one on this machine (loopback); for any other, check the network."""
        registry = str(details.get("registry") or "")
        from builder.hosts import is_loopback

        if hint is None and registry and not is_loopback(registry):
            hint = (
                f"check that {registry} is reachable from this machine (network, DNS, HTTPS_PROXY/NO_PROXY) "
                "or set `registry` in builder.toml / BUILDER_REGISTRY"
            )
        super().__init__(message, hint=hint, **details)


class RegistryAuthError(BuilderError):
    """The registry refused our credentials (401/403)."""

    exit_code = 6
    kind = "registry-auth"
    default_hint = (
        "log in with `docker login REGISTRY` (credentials are read from --docker-config, "
        "else $DOCKER_CONFIG, else ~/.docker/config.json)"
    )


class RegistryError(BuilderError):
    """The registry answered with an unexpected status or an invalid document."""

    exit_code = 7
    kind = "registry"
    default_hint = "check the registry's logs; the HTTP status and reference are in the message"


class NotFoundError(BuilderError):
    """A reference, digest, variant, stage, key or file that was named does not exist."""

    exit_code = 8
    kind = "not-found"
    default_hint = "check the name; `builder matrix list` and `builder status` show what exists"


class MatrixError(BuilderError):
    """A matrix failed validation; ``details['problems']`` lists every problem with its location."""

    exit_code = 10
    kind = "matrix-invalid"
    default_hint = "fix each listed field in the matrix file; `builder matrix list` re-validates"


class IncompatibleError(BuilderError):
    """An image cannot start or run on the given host/driver/GPU (compatibility verdict `blocked`)."""

    exit_code = 11
    kind = "incompatible"
    default_hint = "upgrade the driver to the minimum shown, or pick a variant built for an older CUDA line"


class RenderStaleError(BuilderError):
    """Committed renders differ from what the templates and matrices produce now."""

    exit_code = 12
    kind = "render-stale"
    default_hint = "run `builder render` and commit the result"


class UnpinnedBaseError(BuilderError):
    """A base image or dependency lock is not pinned: ``build`` left those variants out (the
    others were built), ``run`` did not start."""

    exit_code = 13
    kind = "unpinned"
    default_hint = "run `builder bases update` (bases) or `builder lock` (Python dependencies) and commit"


class BuildFailedError(BuilderError):
    """One or more builds failed; ``details['failed']`` names them and their log files."""

    exit_code = 14
    kind = "build-failed"
    default_hint = "read the build log named for each failed variant"


class TagConflictError(BuilderError):
    """A write-once content tag already points at another digest; nothing was overwritten."""

    exit_code = 15
    kind = "tag-conflict"
    default_hint = (
        "a content tag must mean one image: find who pushed the other digest (a second checkout on this "
        "registry, e.g. CI's? give each checkout its own repository_prefix: builder.toml or "
        "BUILDER_REPOSITORY_PREFIX=NAME); never delete it to make room - change the inputs (a new content "
        "hash) instead"
    )


class SigningKeyError(BuilderError):
    """A signing key is missing, unreadable, encrypted without a password, or of the wrong type."""

    exit_code = 16
    kind = "key"
    default_hint = "generate one with `builder keys generate` or set BUILDER_KEY_PASSWORD"


class SigningError(BuilderError):
    """Signing or attaching an attestation failed (keyless: OIDC, Fulcio or Rekor refused)."""

    exit_code = 17
    kind = "signing"
    default_hint = "see the message for the service that refused; rerun with --debug"


class VerificationError(BuilderError):
    """Signatures, attestations or a stage's promotion records did not verify (also: `resolve`/`rollback`
    of a stage pointer no trusted promotion record explains); ``details`` says why for each item."""

    exit_code = 18
    kind = "verification-failed"
    default_hint = "do not use this digest; check who signed it with `builder verify REF --json`"


class CheckFailedError(BuilderError):
    """A device check ran and failed; ``details`` carries the diagnosis and the layer at fault."""

    exit_code = 20
    kind = "check-failed"
    default_hint = "follow the `fix` of the diagnosis; `builder diagnose` explains a saved error"

    @property
    def diagnosis(self) -> str | None:
        """The key of the diagnosis (``details['diagnosis']``); None when no known failure kind matched."""
        key = self.details.get("diagnosis")
        return key if isinstance(key, str) else None


class HostProbeError(BuilderError):
    """The host could not be probed (vendor tool missing or failing) or a saved probe is unreadable."""

    exit_code = 21
    kind = "host-probe"
    default_hint = "run on the GPU host itself, or pass saved output with --from FILE"


class RunnerError(BuilderError):
    """A check runner could not run the check on its cluster (Slurm refused or lost the job, kubectl or srun is
    missing, a remote engine did not answer); ``details`` names the cluster and the scheduler's words."""

    exit_code = 22
    kind = "runner"
    default_hint = "read the scheduler's message; the cluster's `runner:` in its fleet file says where checks go"


class ChecksIncompleteError(BuilderError):
    """A fleet check passed on every cluster it ran on, but builder does not run checks on some clusters: no
    `runner:` in the fleet file, or a Kubernetes cluster (builder renders its Jobs); their rows say how."""

    exit_code = 23
    kind = "checks-incomplete"
    default_hint = (
        "run each skipped cluster's check as its row says (a Kubernetes cluster: `builder check REF --cluster NAME "
        "--manifest | kubectl apply -f -`), or give the cluster a `runner:`"
    )


class PolicyError(BuilderError):
    """A policy file is invalid; ``details['problems']`` lists every problem with its location."""

    exit_code = 30
    kind = "policy-invalid"
    default_hint = "fix each listed rule; `builder policy validate` re-checks"


class PolicyDeniedError(BuilderError):
    """A promotion was denied by policy; ``details['results']`` gives each plan with every rule and its reason."""

    exit_code = 31
    kind = "policy-denied"
    default_hint = "provide the missing evidence (signatures, checks, approvals, ticket) and retry"


class PromotionConflictError(BuilderError):
    """A stage tag changed under us (concurrent promotion or fork in the previous-digest chain)."""

    exit_code = 32
    kind = "promotion-conflict"
    default_hint = "run `builder status` and `builder history`, then retry the promotion"


class LedgerError(BuilderError):
    """The local audit ledger cannot be opened or is inconsistent."""

    exit_code = 33
    kind = "ledger"
    default_hint = "check the ledger path (builder.toml `ledger`); it is append-only, never edit it"


#: Every error class, for the exit-code table (docs and tests read this).
ALL_ERRORS: tuple[type[BuilderError], ...] = (
    ConfigError,
    EngineUnavailableError,
    EngineCommandError,
    RegistryUnavailableError,
    RegistryAuthError,
    RegistryError,
    NotFoundError,
    MatrixError,
    IncompatibleError,
    RenderStaleError,
    UnpinnedBaseError,
    BuildFailedError,
    TagConflictError,
    SigningKeyError,
    SigningError,
    VerificationError,
    CheckFailedError,
    HostProbeError,
    RunnerError,
    ChecksIncompleteError,
    PolicyError,
    PolicyDeniedError,
    PromotionConflictError,
    LedgerError,
)
