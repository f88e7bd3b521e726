"""The composition root: one ``App`` per invocation, built from ``builder.toml`` and the
environment, owning what every command shares.

- **Credentials, once.** Docker's own lookup: ``--docker-config`` (file or directory), else
  ``$DOCKER_CONFIG``, else ``~/.docker``; inside it ``config.json`` with ``auths``,
  ``credHelpers`` and ``credsStore`` (https://docs.docker.com/reference/cli/docker/#configuration-files).
  Every registry client any command makes carries them, so a password-protected registry works
  the same for ``sign`` and for ``promote`` (crane's root command and default keychain have the
  same shape: https://github.com/google/go-containerregistry/tree/main/cmd/crane).
- **Registry clients**: one per registry host, reused by every step of a command.
- **Signers**: the signing key (``--key``, else ``builder.toml`` ``key``) decrypted with
  ``BUILDER_KEY_PASSWORD`` (the environment only, never builder.toml), else ``COSIGN_PASSWORD`` as cosign
  reads it for its own key files.
- **The promotion context**: the stage policy, its verifiers, the ledger and the fleet checker,
  over the same clients; closed with the ``App``.

The command line builds the ``App`` (it alone reads ``os.environ`` and options) and hands its
parts to the core, which never builds credentials or clients itself.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from builder.config import Config
    from builder.errors import BuilderError
    from builder.labels import SourceFacts
    from builder.pipeline import ProgressFn, RunReport, RunRequest
    from builder.policy import FleetEvidence
    from builder.promote.context import PromotionContext
    from builder.registry import DockerCredentials, RegistryClient
    from builder.signing.keys import KeyPairSigner


def _check_fleet(
    layer_dir: Path, client: RegistryClient, repository: str, digest: str, fleet: str
) -> list[FleetEvidence]:
    """The promotion's fleet checker (``builder.promote.compat_fleet_checker``, image layers cached
    under ``layer_dir``): one verdict per cluster of the fleet file ``fleet`` for ``digest``. Imported
    on its first call: the compat and image-layer modules cost every promotion command start-up
    time, and most promotions judge no fleet. Raises what ``check_fleet`` raises."""
    from builder.image.layers import LayerCache
    from builder.promote import compat_fleet_checker

    return compat_fleet_checker(LayerCache(layer_dir))(client, repository, digest, fleet)


def docker_config_path(option: Path | None, environ: Mapping[str, str], home: Path) -> Path:
    """Where Docker's client configuration is: ``option`` (``--docker-config``), else
    ``$DOCKER_CONFIG``, else ``<home>/.docker`` (a directory holding ``config.json``, or the file
    itself). A location the user named (the option or the variable) must exist: a typo there would
    otherwise read as "no credentials" and fail later as a refused login (exit 6), so it raises
    NotFoundError (exit 8) naming the path and where it was given. The default ``~/.docker`` may be
    missing (nobody logged in yet), as may ``config.json`` in a named folder (Docker reads none)."""
    from builder.errors import NotFoundError

    named = (
        (option, "--docker-config")
        if option is not None
        else (Path(environ["DOCKER_CONFIG"]), "DOCKER_CONFIG")
        if environ.get("DOCKER_CONFIG")
        else None
    )
    if named is None:
        return home / ".docker"
    path, given = named
    if not path.exists():
        raise NotFoundError(
            f"Docker config {path} (given as {given}) does not exist",
            hint=f"give the config.json (or the folder holding it) that `docker login` wrote, or unset {given}"
            if given == "DOCKER_CONFIG"
            else "give the config.json (or the folder holding it) that `docker login` wrote",
            path=str(path),
        )
    return path


@dataclasses.dataclass
class App:
    """What one invocation shares: ``config`` (``builder.toml`` + ``BUILDER_*``) and
    ``docker_config`` (resolved by :func:`docker_config_path`)."""

    config: Config
    docker_config: Path
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)
    #: told one line for people when a command uses what the matrices name (the CLI prints it)
    on_note: Callable[[str], None] | None = dataclasses.field(default=None, repr=False)
    _clients: dict[str, RegistryClient] = dataclasses.field(default_factory=dict, repr=False)
    _contexts: list[PromotionContext] = dataclasses.field(default_factory=list, repr=False)
    _guard: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)
    #: reference -> the variant id a command's REF gave for it (:meth:`image_reference`, :meth:`explain`)
    _variant_refs: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)

    @functools.cached_property
    def credentials(self) -> DockerCredentials:
        """The Docker credentials (read once; RegistryAuthError when the file is unreadable)."""
        from builder.registry import DockerCredentials

        return DockerCredentials.from_file(self.docker_config)

    def endpoint(self, registry: str) -> str:
        """Where ``registry``'s API answers: its ``registry_endpoints`` entry (builder.toml /
        ``BUILDER_REGISTRY_ENDPOINTS``), else ``registry-1.docker.io`` for Docker Hub
        (``docker.io`` and its aliases), else ``registry`` itself."""
        from builder.registry.reference import DOCKER_HUB, DOCKER_HUB_ENDPOINT, canonical_registry

        name = canonical_registry(registry)
        for key, host in self.config.endpoint_overrides().items():
            if canonical_registry(key) == name:
                return host
        return DOCKER_HUB_ENDPOINT if name == DOCKER_HUB else registry

    def client(self, registry: str) -> RegistryClient:
        """The client for ``registry`` (``host[:port]``) with this invocation's credentials;
        one per host, shared by threads. It talks to :meth:`endpoint` (Docker Hub: its real API
        host) and looks credentials up under ``registry`` (Docker Hub's
        ``https://index.docker.io/v1/`` entry, as ``docker login`` writes it)."""
        from builder.registry import client_for
        from builder.registry.reference import DOCKER_HUB, canonical_registry

        if canonical_registry(registry) == DOCKER_HUB:
            registry = DOCKER_HUB
        with self._guard:
            if registry not in self._clients:
                cfg = self.config
                endpoint = self.endpoint(registry)
                self._clients[registry] = client_for(
                    registry,
                    insecure=cfg.is_insecure,
                    auth=self.credentials,
                    retries=cfg.registry_retries,
                    backoff=cfg.registry_backoff_ms / 1000,
                    max_delay=cfg.registry_max_delay_ms / 1000,
                    timeout=cfg.registry_timeout_s,
                    copy_streams=cfg.copy_streams,
                    endpoint=endpoint if endpoint != registry else None,
                    environ=self.environ,  # HTTPS_PROXY / NO_PROXY, CA bundle, NETRC
                )
            return self._clients[registry]

    @property
    def default_client(self) -> RegistryClient:
        """The client of the configured registry (``builder.toml`` ``registry``)."""
        return self.client(self.config.registry)

    @property
    def key_password(self) -> str | None:
        """The password of encrypted key files: ``BUILDER_KEY_PASSWORD`` (the environment only:
        builder.toml refuses a password), else ``COSIGN_PASSWORD``; None: keys are not encrypted."""
        if self.config.key_password is not None:
            return self.config.key_password
        return self.environ.get("COSIGN_PASSWORD")

    @property
    def cosign_key_password(self) -> str | None:
        """The password of a cosign key file being imported: ``COSIGN_PASSWORD`` (cosign's own
        variable), else ``BUILDER_KEY_PASSWORD``."""
        return self.environ.get("COSIGN_PASSWORD", self.config.key_password)

    def source_facts(self, source_date_epoch: int | None) -> SourceFacts:
        """Where this checkout's images come from, for their OCI labels: on GitHub Actions
        ``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY`` and ``$GITHUB_SHA``
        (https://docs.github.com/en/actions/reference/variables-reference), else the ``origin``
        remote's web URL and ``git rev-parse HEAD``; ``created`` is ``source_date_epoch``;
        ``licenses`` is builder.toml ``image_licenses``."""
        from builder.build.source import git_commit, git_remote_url
        from builder.labels import SourceFacts, repository_url

        env = self.environ
        root = self.config.root
        if env.get("GITHUB_REPOSITORY"):
            server = env.get("GITHUB_SERVER_URL") or "https://github.com"
            source: str | None = f"{server.rstrip('/')}/{env['GITHUB_REPOSITORY']}"
        else:
            source = repository_url(git_remote_url(root))
        revision = env.get("GITHUB_SHA") or git_commit(root)
        return SourceFacts(source, revision, source_date_epoch, self.config.image_licenses)

    def image_reference(self, text: str) -> str:
        """The image a command's REF names, the one way for every command that takes one: a variant
        id (``jax0.7-cpu-py3.11-debian12``: no ``/``, ``:`` or ``@``) is its moving variant tag
        ``<registry>/<repository_prefix>/<repository>:<variant-id>`` (what ``builder build`` points at
        the variant's latest image; the matrices are read only then); any other text is returned as
        given (a reference without tag or digest stays so: builder never assumes ``latest``).
        Raises NotFoundError (exit 8, close matches named) for an unknown variant id, MatrixError."""
        from builder.matrix.index import project_index
        from builder.selection import looks_like_variant_id, target_reference

        if not looks_like_variant_id(text):
            return text
        cfg = self.config
        # the index's repositories are already under the prefix (project_index): not prefixed again
        reference = target_reference(text, (project_index(cfg),), cfg.registry)
        self._variant_refs[reference] = text
        return reference

    def signable_reference(self, text: str) -> str:
        """The image ``builder sign``/``attest`` vouch for: :meth:`image_reference` of ``text``; for a
        variant id, its moving tag's digest (``registry/repository@sha256:…``) when this checkout
        built that digest as the variant (``builder.build.pushed.pushed_as``). Anyone who can push
        can move a variant tag, and the key must not sign what it points at on the tag's word: a
        digest this checkout did not build is TagConflictError (exit 15) naming it, with the
        command that signs it by digest (the user's own word, after looking at it). Raises what
        :meth:`image_reference` raises, NotFoundError (8) for a variant never built, registry errors."""
        from builder.build.pushed import pushed_as
        from builder.errors import BuilderError, TagConflictError
        from builder.registry import parse_reference

        reference = self.image_reference(text)
        variant = self._variant_refs.get(reference)
        if variant is None:
            return reference
        r = parse_reference(reference, self.config.registry)
        try:
            digest = self.client(r.registry).resolve(r.repository, r.ref)
        except BuilderError as exc:
            raise self.explain(exc) from exc
        pinned = f"{r.registry}/{r.repository}@{digest}"
        if not pushed_as(self.config.state_dir, digest, variant):
            raise TagConflictError(
                f"{reference} names {digest}, which this checkout did not build as {variant} (no record in "
                f"{self.config.state_dir / 'pushed'}): builder does not sign or attest what a moving tag "
                "points at on the tag's word",
                hint=f"look at it (builder inspect {pinned}); if it is the variant's build, give the digest: "
                f"builder sign {pinned}",
            )
        return pinned

    def explain(self, error: BuilderError) -> BuilderError:
        """``error`` as the command's user should read it: a registry's 404 (NotFoundError with
        ``status`` 404) while the command read a REF given as a variant id whose moving tag does not
        exist becomes :func:`builder.selection.unbuilt_variant` (exit 8, hint ``builder build
        --select <variant-id>``: the variant is in the matrices, no build pushed it); any other error
        is returned as it is (a built variant's missing platform or blob, a missing file). On that
        404 path only: one manifest request per variant REF of the command (at most two: ``diff``).
        Registry errors of that request leave ``error`` as it is."""
        from builder.errors import BuilderError, NotFoundError
        from builder.registry import parse_reference
        from builder.selection import unbuilt_variant

        if not isinstance(error, NotFoundError) or error.details.get("status") != 404:
            return error
        for reference, variant in self._variant_refs.items():
            r = parse_reference(reference, self.config.registry)
            if error.details.get("registry") != self.client(r.registry).registry:
                continue  # the 404 came from another registry: not this REF's tag
            try:
                absent = self.client(r.registry).try_get_manifest(r.repository, r.ref) is None
            except BuilderError:  # cannot tell: the registry's own answer stands
                return error
            if absent:
                explained = unbuilt_variant(variant, reference)
                explained.__cause__ = error
                return explained
        return error

    def signer(self, key: Path | None = None) -> KeyPairSigner:
        """The key pair signer of ``key`` (default: ``builder.toml`` ``key``). Raises
        SigningKeyError (missing file, wrong password)."""
        from builder.signing.keys import load_signer

        return load_signer(key or self.config.key_path, self.key_password)

    def promotion(
        self,
        policy_file: Path | None,
        key_file: Path | None = None,
        *,
        need_signer: bool = False,
        trust_root: Path | None = None,
        matrices: Sequence[Path] = (),
        ledger: bool | None = None,
    ) -> PromotionContext:
        """The promotion context: the stage policy (``policy_file``, else the one the matrices name:
        :meth:`bound`, else ``<policies_dir>/default.yaml``), the signing key and the ledger when
        ``need_signer`` (``ledger``: whether to open the ledger, default ``need_signer``; a dry run
        that checks the key writes nothing), this invocation's registry clients, and the fleet checker. Raises
        PolicyError, SigningKeyError, LedgerError, and what :meth:`bound` raises."""
        from builder.promote import open_context

        # a write decides under the policy of every matrix: a broken one might name another policy
        policy_file = self.bound("policy", policy_file, matrices, skip_broken=not need_signer)
        ctx = open_context(
            self.config,
            self.client,
            policy_file=policy_file,
            key_file=key_file,
            key_password=self.key_password,
            need_signer=need_signer,
            ledger=ledger,
            trust_root=trust_root,
            fleet_checker=functools.partial(_check_fleet, self.config.state_dir / "cache" / "layers"),
        )
        self._contexts.append(ctx)
        return ctx

    def bound(
        self, kind: str, given: Path | None, matrices: Sequence[Path] = (), *, skip_broken: bool = True
    ) -> Path | None:
        """``given`` (the command's ``--policy`` / ``--fleet``), else the ``policy`` / ``fleet``
        (``kind``) the matrices name (``matrices``: the command's ``--matrix`` files, default every
        matrix), said in one line through ``on_note``; None when neither. Raises ConfigError when
        the matrices name different ones, NotFoundError when a named file is missing, MatrixError
        (a matrix of the project that does not load is left out with a warning when ``skip_broken``:
        ``matrix_binding``)."""
        if given is not None:
            return given
        from builder.matrix.bindings import matrix_binding

        binding = matrix_binding(self.config, kind, matrices, skip_broken=skip_broken)
        if binding.path is not None and self.on_note is not None:
            self.on_note(f"{kind} {binding.path} (named by {binding.source}; --{kind} chooses another)")
        return binding.path

    def run_pipeline(
        self, request: RunRequest, *, on_progress: ProgressFn | None = None, on_key: Callable[[Path, str], None]
    ) -> RunReport:
        """``builder run``: the selected variants rendered, then built, signed, checked and
        promoted (``builder.pipeline.run_pipeline``) with this invocation's clients, keys and
        promotion context. Keys missing at ``builder.toml`` ``key`` / ``check_key`` are generated
        first, ``on_key(path, role)`` told of each. Raises what the pipeline raises."""
        from builder import pipeline
        from builder.build.plan import BuildOptions, default_secrets
        from builder.build.source import git_commit
        from builder.publish import signing_hook
        from builder.signing.keys import load_public_keys
        from builder.variants import select_renders

        cfg = self.config
        rendered = select_renders(cfg, request.matrices, request.selection)
        check_key = request.check_key or cfg.check_key_path
        for path, role in ((cfg.key_path, "build"), (check_key, "check-runner")):
            if pipeline.ensure_key(path, self.key_password):
                on_key(path, role)
        options = BuildOptions(
            registry=cfg.registry,
            state_dir=cfg.state_dir,
            workers=request.workers or cfg.workers,
            builder=request.builder,
            secrets=default_secrets(),
            source_date_epoch=request.source_date_epoch,
            allow_unpinned=request.allow_unpinned,
            repository_prefix=cfg.repository_prefix,
            image_labels=self.source_facts(request.source_date_epoch).labels(),
        )
        client = self.default_client
        ctx = self.promotion(request.policy_file, cfg.key_path, need_signer=True, matrices=request.matrices)
        check = pipeline.CheckSetup(
            signer=self.signer(check_key),
            keys=tuple(load_public_keys([check_key.with_suffix(".pub")])),
            lock_dir=cfg.state_dir / "locks",
            fleet=self.bound("fleet", request.fleet, request.matrices),
            enabled=request.check,
            commit=git_commit(cfg.root),
            root=cfg.root,
            bundle=request.bundle,
        )
        return pipeline.run_pipeline(
            rendered,
            options,
            client=client,
            promotion=ctx,
            check=check,
            stages=pipeline.stages_to_run(ctx.policy.stage_names, request.to_stage),
            ticket=request.ticket,
            on_built=signing_hook(
                client=client,
                options=options,
                lock_dir=cfg.state_dir / "locks",
                git_commit=git_commit(cfg.root),
                signer=self.signer(),
                bundle=request.bundle,
            ),
            sign_keys=tuple(load_public_keys([cfg.key_path.with_suffix(".pub")])),
            on_progress=on_progress,
        )

    def close(self) -> None:
        """Release what the invocation opened (ledgers)."""
        for ctx in self._contexts:
            if ctx.ledger is not None:
                ctx.ledger.close()
        self._contexts.clear()
