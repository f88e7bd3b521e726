"""The promotion context: the policy, registry clients, locks, ledger and signer every promotion
function takes, passed in by the caller (the core never reads configuration files, environment
variables or credentials itself).

Registry clients come from an injected ``clients`` callable (registry host -> client) built by
the composition root with the user's Docker credentials (``--docker-config``, ``$DOCKER_CONFIG``,
``~/.docker``): the context never creates a client, so it never talks to a registry without the
credentials the user configured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from builder.config import repository_path
from builder.errors import BuilderError, NotFoundError, PromotionConflictError
from builder.lockfile import held
from builder.policy import BUILD_STAGE, KeySet, Policy
from builder.policy.cache import cached_policy
from builder.promote.location import Location, Target, utcnow

if TYPE_CHECKING:
    import datetime as dt

    from builder.config import Config
    from builder.ledger import Ledger
    from builder.policy.validation import PolicyValidation
    from builder.promote.gitref import PointerRefs
    from builder.promote.model import FleetChecker, PromotionRecord
    from builder.promote.newest_seen import NewestSeen
    from builder.registry import RegistryClient
    from builder.signing.keys import PublicKey
    from builder.signing.signer import Signer
    from builder.signing.verifiers import LayerCheck, LayerVerifier

ClientFactory = Callable[[str], "RegistryClient"]
"""registry host (``host[:port]``) -> a registry client carrying the user's credentials."""


@dataclasses.dataclass(frozen=True)
class PromotionContext:
    """Everything the promotion functions need.

    ``policy``: the loaded policy; ``registry``: the configured default registry (host[:port]);
    ``matrices_dir``: where variant ids named on the command line are looked up (None: only image
    references can be named); ``cache_dir``: machine-local caches (the matrices' variants,
    validated once per content; None: none); ``repository_prefix``: the checkout's (builder.toml), under which
    its variants' repositories and every stage repository live
    (:func:`builder.config.repository_path`);
    ``clients``: registry host -> client with the user's credentials; ``lock_dir``: file locks
    (stage pointers, .sig/.att writes); ``ledger``: the audit ledger (None: no local trail);
    ``signer``: signs promotion records (required to apply); ``fleet_checker``: compatibility
    verdicts for fleet rules and ``resolve --cluster``; ``verifiers``: extra layer verifiers
    (keyless); ``now``: the clock; ``pointer_refs``: the git compare-and-swap point of stage
    pointers (None: registry only); ``lock_timeout``: seconds to wait for a stage lock; ``seen_dir``:
    where :attr:`seen` keeps the moves of each stage pointer seen here (None: this run only)."""

    policy: Policy
    registry: str
    clients: ClientFactory
    lock_dir: Path
    ledger: Ledger | None = None
    signer: Signer | None = None
    fleet_checker: FleetChecker | None = None
    verifiers: Sequence[LayerVerifier] = ()
    matrices_dir: Path | None = None
    cache_dir: Path | None = None
    repository_prefix: str = ""
    now: Callable[[], dt.datetime] = utcnow
    # the cross-machine compare-and-swap point of stage pointers (builder.toml promotion_remote;
    # None: registry-only mode, builder.promote.gitref)
    pointer_refs: PointerRefs | None = None
    lock_timeout: float = 60.0
    # where the moves of each stage pointer this machine saw are kept (rollback protection,
    # builder.promote.newest_seen; None: for this run only)
    seen_dir: Path | None = None
    _seen: list[NewestSeen] = dataclasses.field(default_factory=list, repr=False, compare=False)
    _keys: list[PublicKey] = dataclasses.field(default_factory=list, repr=False, compare=False)
    _keys_loaded: threading.Event = dataclasses.field(default_factory=threading.Event, repr=False, compare=False)
    _keys_guard: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)
    no_referrers_api: set[str] = dataclasses.field(default_factory=set, repr=False, compare=False)
    """Registries (as given) that answered the referrers API with 404 for this context."""

    @property
    def seen(self) -> NewestSeen:
        """The moves of each stage pointer seen here, kept under ``seen_dir``
        (:mod:`builder.promote.newest_seen`, imported on first use: ``resolve --no-verify`` reads no
        record)."""
        if not self._seen:
            from builder.promote.newest_seen import NewestSeen

            with self._keys_guard:
                if not self._seen:
                    self._seen.append(NewestSeen(self.seen_dir))
        return self._seen[0]

    def client(self, registry: str) -> RegistryClient:
        """The client for ``registry`` (host[:port]), from the injected factory."""
        return self.clients(registry)

    @property
    def keys(self) -> list[PublicKey]:
        """Public keys of every key file the policy names (unusable ones are skipped: the rules
        that need them deny). Loaded once."""
        if not self._keys_loaded.is_set():
            with self._keys_guard:
                if not self._keys_loaded.is_set():
                    self._keys.extend(_policy_keys(self.policy))
                    self._keys_loaded.set()
        return self._keys

    def record_signers(self, stage: str) -> tuple[KeySet, ...]:
        """Who may sign trusted promotion records of ``stage``: promoters and its rollback list."""
        sets = list(self.policy.promoters)
        try:
            rb = self.policy.stage(stage).rollback
        except NotFoundError:
            rb = None
        if rb is not None:
            sets.extend(rb.keysets)
            sets.extend(KeySet(a.name, (a.key,)) for a in rb.approvers)
        return tuple(sets)

    def promoter_names(self, stage: str) -> list[str]:
        """The names of the key sets whose records of ``stage`` count, once each."""
        return list(dict.fromkeys(s.name for s in self.record_signers(stage)))

    def name_of(self, fingerprint: str) -> str | None:
        """The policy's approver name for a key fingerprint, or None."""
        for a in self.policy.approvers:
            if a.key.fingerprint == fingerprint:
                return a.name
        return None

    def promoter_label(self, rec: PromotionRecord) -> str:
        """Who signed ``rec``, for people: the policy's approver name for a known key (checked
        against the verified signer, never the record's own claim), else the key set it belongs to
        (``build``), else the short fingerprint."""
        fp = rec.signer or rec.promoter
        name = self.name_of(fp)
        if name:
            return name
        sets = [s.name for s in self.policy.keysets if any(k.fingerprint == fp for k in s.keys)]
        from builder.promote.model import short_signer  # the records' module: not for a resolve

        return sets[0] if sets else short_signer(fp)

    def stage_location(self, target: Target, stage: str) -> Location:
        """Where ``stage`` keeps ``target``: the build's variant tag for ``build`` (for an explicit
        reference: the reference's own registry/repository/tag), else the stage's
        pointer ``<variant-id>-<stage>`` in the stage's repository/registry, under the checkout's
        ``repository_prefix`` (``prod/{repository}`` of ``team-a/ml/jax`` is ``team-a/prod/ml/jax``).
        NotFoundError for a stage the policy does not define."""
        if stage == BUILD_STAGE:
            if target.explicit:  # the image the reference names, wherever it lives (mirror, a stage's repository)
                return target.reference_location
            return Location(target.registry, target.repository, target.variant)
        st = self.policy.stage(stage)
        prefix = self.repository_prefix
        relative = target.repository.removeprefix(f"{prefix}/") if prefix else target.repository
        repository = repository_path(prefix, st.repository_for(relative))
        return Location(st.registry or target.registry, repository, st.tag_for(target.variant))

    def lock_path(self, loc: Location, kind: str = "stage") -> Path:
        """The lock file of ``loc``: ``<lock_dir>/<kind>-<hash>.lock``."""
        key = hashlib.sha256(str(loc).encode()).hexdigest()[:32]
        return self.lock_dir / f"{kind}-{key}.lock"

    @contextlib.contextmanager
    def lock(self, loc: Location, kind: str = "stage") -> Iterator[None]:
        """Hold the file lock of ``loc`` (:meth:`lock_path`): one writer per stage pointer across
        processes of this machine. PromotionConflictError (32) naming the pointer and the lock
        file when another writer holds it longer than ``lock_timeout`` seconds
        (:func:`builder.lockfile.held`);
        released however the body ends."""
        with held(
            self.lock_path(loc, kind),
            self.lock_timeout,
            lambda path: PromotionConflictError(
                f"another promotion or rollback of {loc} held its lock for over {self.lock_timeout:g} s "
                f"({path}); nothing was written",
                pointer=str(loc),
                hint="a builder process on this machine (or one sharing this state_dir) is writing the stage: "
                "let it finish, then `builder status` and retry",
            ),
            what=f"the {kind} pointer {loc}",
        ):
            yield

    def untrusted_hint(self, stage: str, variant: str = "VARIANT", *, foreign: bool = True) -> str:
        """What to do about a pointer no trusted promotion record explains (``foreign``: records by
        other keys exist)."""
        import glob  # only on this error path

        fix = (
            "if this checkout's promoter key was replaced, the records its old key signed no longer count: "
            "list the old public key under `promoters` too, or promote again with the new key; "
            "if another checkout shares the registry, give each checkout its own repository_prefix "
            "(BUILDER_REPOSITORY_PREFIX; README, 'Sharing a registry'); if those records come from a "
            f"legitimate promoter, list its public key in a key set named under `promoters` in {self.policy.path}; "
            "otherwise "
            if foreign
            else "the tag was moved outside builder: "
        )
        # a promoter key file the policy names that cannot be read (docs/policies.md: a warning, the
        # records it signed do not count): the likeliest cause, named first - a named file, or a glob
        # of a set left without any usable key (a glob matching nothing next to usable keys, like the
        # shipped policy's keys/promoters/*.pub, only adds no key)
        unusable = [
            f"key set `{s.name}`: {k.problem}"
            for s in self.policy.promoters
            for k in s.keys
            if k.problem and not (k.file and glob.has_magic(k.file) and any(not u.problem for u in s.keys))
        ]
        missing = (
            f"the policy's promoter keys cannot be read ({'; '.join(dict.fromkeys(unusable))}): records "
            f"signed with them are not trusted - restore the key file or fix {self.policy.path}; "
            if unusable
            else ""
        )
        return (
            f"{missing}{fix}point the tag back at a digest with a trusted record (or delete it) and promote again; "
            f"`builder history {variant} --stage {stage}` shows the chain"
        )


def _policy_keys(policy: Policy) -> list[PublicKey]:
    from builder.signing.keys import load_public_keys

    out: list[PublicKey] = []
    for ref in policy.all_keys():
        if ref.file:
            try:
                out.extend(load_public_keys([Path(ref.file)]))
            except BuilderError:  # an unusable key file: the rules that name it deny
                continue
    return out


def policy_path(cfg: Config, given: Path | None) -> Path:
    """The policy file: ``given``, else ``<policies_dir>/default.yaml``."""
    return given if given is not None else cfg.policies_dir / "default.yaml"


def policy_variables(cfg: Config) -> dict[str, str]:
    """The ``${...}`` variables a policy file may use: ``state_dir`` and ``root``."""
    return {"state_dir": str(cfg.state_dir), "root": str(cfg.root)}


def load_stage_policy(cfg: Config, given: Path | None) -> Policy:
    """Load the policy file (``policy_path``), validated once per content of it and of the key
    and fleet files it reads (``builder.policy.cache``, under ``<state_dir>/cache``). Raises
    PolicyError, NotFoundError."""
    return cached_policy(policy_path(cfg, given), policy_variables(cfg), cfg.state_dir / "cache")


def validate_stage_policies(cfg: Config, files: Sequence[Path] = ()) -> PolicyValidation:
    """``builder policy validate``: ``files`` (default: every policy file of ``<policies_dir>``)
    checked with the project's variables (``policy_variables``). Raises PolicyError (30) when
    there is no policy file, NotFoundError (8) for a missing one; problems are in the result."""
    from builder.policy.validation import policy_files, validate_policies  # every problem: never cached

    return validate_policies(list(files) or policy_files(cfg.policies_dir), policy_variables(cfg))


def policy_verifiers(policy: Policy, trust_root: Path | None) -> tuple[LayerVerifier, ...]:
    """Extra layer verifiers the policy needs: when it names keyless identities, one that checks the
    Sigstore material offline against ``trust_root`` (default: the public-good trusted root) and
    lets the policy judge the identities."""
    keyless_ids = any(k.issuer for ks in policy.keysets for k in ks.keys) or any(a.key.issuer for a in policy.approvers)
    if not keyless_ids:
        return ()
    return (KeylessOnFirstUse(trust_root),)


@dataclasses.dataclass
class KeylessOnFirstUse:
    """A ``LayerVerifier`` that builds the keyless one (``KeylessLayerVerifier`` over the trusted
    root ``trust_root``, default public-good) on the first layer carrying a Sigstore certificate
    (``dev.sigstore.cosign/certificate``): sigstore takes about 0.4 s to import, and promotions,
    ``status`` and ``resolve`` over key-signed evidence never need it. ``check`` returns None for
    other layers (as the keyless verifier does); ConfigError for an unreadable trusted root is
    raised then, on first use."""

    trust_root: Path | None
    _real: LayerVerifier | None = dataclasses.field(default=None, repr=False)
    _guard: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def check(self, data: bytes, signature: bytes, annotations: Mapping[str, str]) -> LayerCheck | None:
        from builder.signing.layer import CERTIFICATE_ANNOTATION  # not at import: resolve --no-verify

        if not annotations.get(CERTIFICATE_ANNOTATION):
            return None
        with self._guard:
            if self._real is None:
                from builder.signing.keyless.identity import ANY_IDENTITY
                from builder.signing.keyless.trust import load_trusted_root
                from builder.signing.keyless.verify import KeylessLayerVerifier

                self._real = KeylessLayerVerifier(load_trusted_root(self.trust_root), (ANY_IDENTITY,))
            real = self._real
        return real.check(data, signature, annotations)


def open_context(
    cfg: Config,
    clients: ClientFactory,
    *,
    policy_file: Path | None,
    key_file: Path | None,
    need_signer: bool,
    key_password: str | None = None,
    trust_root: Path | None = None,
    fleet_checker: FleetChecker | None = None,
    ledger: bool | None = None,
) -> PromotionContext:
    """The promotion context of a project: its policy (``policy_file`` or the default), the signing
    key (``key_file`` or ``builder.toml`` ``key``, decrypted with ``key_password``) and the ledger
    when ``need_signer`` (``ledger``: open the ledger, default ``need_signer``: only a command that
    writes the trail opens it, so a dry run needs no writable state folder), locks under
    ``<state_dir>/locks``. Raises PolicyError, SigningKeyError, LedgerError. Close
    ``context.ledger`` when done."""
    signer = None
    if need_signer:
        from builder.signing.keys import load_signer

        signer = load_signer(key_file or cfg.key_path, key_password)
    policy = load_stage_policy(cfg, policy_file)
    verifiers = policy_verifiers(policy, trust_root)
    trail = None
    if need_signer if ledger is None else ledger:  # sqlite3: only for a command that writes the trail
        from builder.ledger import open_ledger

        trail = open_ledger(cfg.ledger_path)
    return PromotionContext(
        policy=policy,
        registry=cfg.registry,
        clients=clients,
        lock_dir=cfg.state_dir / "locks",
        ledger=trail,
        signer=signer,
        fleet_checker=fleet_checker,
        verifiers=verifiers,
        matrices_dir=cfg.matrices_dir,
        cache_dir=cfg.state_dir / "cache",
        repository_prefix=cfg.repository_prefix,
        pointer_refs=_pointer_refs(cfg),
        seen_dir=cfg.state_dir / "seen",
    )


def _pointer_refs(cfg: Config) -> PointerRefs | None:
    """The git compare-and-swap point of stage pointers when ``builder.toml`` names a
    ``promotion_remote`` (imported then: most checkouts run registry-only)."""
    if not cfg.promotion_remote:
        return None
    from builder.promote.gitref import PointerRefs

    return PointerRefs(cfg.promotion_remote, cfg.state_dir / "pointer-refs.git")
