"""``builder resolve``: the validated ``repo@digest`` a stage holds for a variant, optionally
checked against a cluster, answered from the registry alone (so it works on a fresh machine).

Only what the answer needs is read: the stage's location (the policy, the variant's repository),
its pointer tag, and - unless ``verify`` is off - the trusted ``promotion/v1`` record on the digest
(``builder.promote.records``, imported then: the evidence and signature-verification modules cost
``resolve --no-verify`` start-up time and it never uses them); the fleet modules only with a
cluster.

Errors: NotFoundError (8) for unknown stages, clusters or pointers that do not exist;
VerificationError (18) for a pointer no trusted record explains; IncompatibleError (11) when the
digest cannot run on a cluster; ConfigError (2) for a pattern without ``--cluster``; registry
errors (5-7) propagate.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import ConfigError, IncompatibleError, NotFoundError, VerificationError
from builder.promote.targets import resolve_targets, scope_of

if TYPE_CHECKING:
    from builder.promote.context import PromotionContext
    from builder.promote.documents import ResolveDocument
    from builder.promote.location import Target


def resolve(
    ctx: PromotionContext,
    target: Target,
    stage: str,
    *,
    cluster: str | None = None,
    fleet: str | None = None,
    verify: bool = True,
) -> str:
    """``registry/repository@sha256:...`` of the digest ``stage`` holds for ``target`` - never an
    older one. ``verify``: the digest must carry a trusted promotion record (else
    VerificationError, exit 18, naming who signed the records that exist). With ``cluster``:
    IncompatibleError naming the cluster and why when the image cannot run there; NotFoundError
    for an unknown cluster. ``fleet``: the fleet file naming the cluster (default: the file of the
    stage's policy ``fleet`` rule, ``fleets.stage_fleet_file``)."""
    if cluster is not None and fleet is None:
        from builder.promote.fleets import stage_fleet_file  # compat: only for --cluster

        fleet = stage_fleet_file(ctx.policy, stage, cluster)
    loc = ctx.stage_location(target, stage)
    client = ctx.client(loc.registry)
    digest = client.try_resolve(loc.repository, loc.pointer_tag)
    if digest is None:
        raise NotFoundError(
            f"{target.variant} is not in stage {stage} ({loc} does not exist)",
            hint=f"promote it: builder promote {target.variant} --to {stage} --confirm",
        )
    if verify:
        from builder.promote.records import pointer_trust  # signature verification: only to verify

        trust = pointer_trust(ctx, loc, stage, digest)
        if not trust.trusted:
            raise VerificationError(
                trust.note(ctx.promoter_names(stage)),
                found=digest,
                pointer=str(loc),
                foreign=list(trust.foreign),
                hint=ctx.untrusted_hint(stage, target.variant, foreign=bool(trust.foreign))
                + "; pass --no-verify only if you trust the registry's tag as is",
            )
    pinned = loc.pinned(digest)
    if cluster is None or fleet is None:
        return pinned
    if ctx.fleet_checker is None:
        raise IncompatibleError(f"cannot decide whether {pinned} runs on {cluster}: no compatibility checker")
    rows = [r for r in ctx.fleet_checker(client, loc.repository, digest, fleet) if r.cluster == cluster]
    if not rows:
        raise NotFoundError(f"cluster {cluster!r} is not in fleet {fleet}")
    bad = [r for r in rows if r.verdict not in ("ok", "minor-version-compat")]
    if bad:
        raise IncompatibleError(
            f"{pinned} ({stage}) cannot run on cluster {cluster}: " + (bad[0].reason or bad[0].verdict),
            cluster=cluster,
            digest=digest,
            verdict=bad[0].verdict,
        )
    return pinned


def resolve_newest_for_cluster(
    ctx: PromotionContext,
    pattern: str,
    stage: str,
    *,
    cluster: str,
    fleet: Path | None = None,
    verify: bool = True,
) -> Resolved:
    """``builder resolve 'GLOB' --stage STAGE --cluster NAME``: of the variants ``pattern`` selects (e.g. every
    CUDA line of one framework), the one whose digest in ``stage`` was promoted there most recently (its
    trusted ``promotion/v1`` record's time) among those that run on ``cluster`` (:func:`resolve` for each:
    each variant's own stage digest, never an older one of it). Raises NotFoundError (no variant matches;
    the cluster is in no fleet file of the stage), IncompatibleError naming every candidate and why it was
    passed over when none runs there, registry errors."""
    from builder.compat.fleets import load_fleet
    from builder.promote.fleets import stage_fleet_file
    from builder.promote.records import pointer_trust

    fleet_file = str(fleet) if fleet else stage_fleet_file(ctx.policy, stage, cluster)
    if load_fleet(Path(fleet_file)).cluster(cluster) is None:
        raise NotFoundError(f"cluster {cluster!r} is not in fleet {fleet_file}", hint="check the cluster name")
    found: list[tuple[float, Target, str]] = []
    passed_over: list[str] = []
    for target in resolve_targets(scope_of(ctx), (), (pattern,)):
        try:
            pinned = resolve(ctx, target, stage, cluster=cluster, fleet=fleet_file, verify=verify)
        except (NotFoundError, IncompatibleError, VerificationError) as exc:
            passed_over.append(f"{target.variant}: {exc.message}")
            continue
        trust = pointer_trust(ctx, ctx.stage_location(target, stage), stage, pinned.rsplit("@", 1)[1])
        found.append((trust.record.when.timestamp() if trust.record else 0.0, target, pinned))
    if not found:
        raise IncompatibleError(
            f"no variant matching {pattern!r} in stage {stage} runs on cluster {cluster}: "
            + "; ".join(passed_over)[:1500],
            cluster=cluster,
            passed_over=passed_over,
        )
    _, target, pinned = max(found, key=lambda f: f[0])
    return Resolved(target.variant, stage, cluster, pinned, verify)


@dataclasses.dataclass(frozen=True)
class Resolved:
    """``builder resolve``: the validated ``reference`` (``registry/repository@sha256:...``)
    ``stage`` holds for ``variant``, checked against ``cluster`` when one was given; ``verified``:
    whether the digest was checked to carry a trusted promotion record (False: ``--no-verify``,
    the registry's tag taken as is)."""

    variant: str
    stage: str
    cluster: str | None
    reference: str
    verified: bool = True

    def to_json(self) -> ResolveDocument:
        return {
            "variant": self.variant,
            "stage": self.stage,
            "cluster": self.cluster,
            "reference": self.reference,
            "verified": self.verified,
        }

    def outputs(self) -> dict[str, str]:
        """Named values for a CI step: ``reference`` (``registry/repository@sha256:...``)."""
        return {"reference": self.reference}


def resolve_variant(
    ctx: PromotionContext,
    variant: str,
    stage: str,
    *,
    cluster: str | None = None,
    fleet: Path | None = None,
    verify: bool = True,
) -> Resolved:
    """``builder resolve VARIANT --stage STAGE``: :func:`resolve` of the variant id or reference
    ``variant`` (``fleet``: the fleet file naming ``cluster``). With ``cluster``, ``variant`` may be a glob
    (:func:`resolve_newest_for_cluster`). Raises what :func:`resolve` raises; ConfigError for a glob
    without ``cluster`` (resolve prints one digest)."""
    if any(c in variant for c in "*?["):
        if cluster is None:
            raise ConfigError(
                f"{variant!r} is a pattern: resolve prints one digest, so a pattern needs --cluster NAME "
                "(the newest digest of the matching variants that runs there)",
                hint="name one variant id, or add --cluster NAME",
            )
        return resolve_newest_for_cluster(ctx, variant, stage, cluster=cluster, fleet=fleet, verify=verify)
    [target] = resolve_targets(scope_of(ctx), (variant,))
    pinned = resolve(ctx, target, stage, cluster=cluster, fleet=str(fleet) if fleet else None, verify=verify)
    return Resolved(variant, stage, cluster, pinned, verify)
