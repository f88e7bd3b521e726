"""SLSA provenance v1 predicate for one built image (signed and attached by ``builder.signing.sign``).

Shape (https://slsa.dev/spec/v1.0/provenance)::

    {"buildDefinition": {"buildType": BUILD_TYPE,
                         "externalParameters": {variant, matrix, cell, platform, buildArgs, ...},
                         "internalParameters": {contentHash, contentTag, secrets, sourceDateEpoch, ...},
                         "resolvedDependencies": [git source, base image, Dockerfile, context files]},
     "runDetails": {"builder": {"id": BUILDER_ID, "version": {...}},
                    "metadata": {"invocationId", "startedOn", "finishedOn"},
                    "byproducts": [build log]}}

Facts recorded: template hash (sha256 of the rendered Dockerfile and the template/content hash
from ``builder.render``), base image digest, dependency lock hash (``requirements.lock`` in the
context), the matrix cell, the git commit, the builder version and the build arguments with
secret-looking values redacted (BuildKit secrets are named by id only, never their content).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from builder import __version__

if TYPE_CHECKING:
    from builder.models import BuiltImage, RenderedImage

#: buildType URI this project owns (documented in docs/build.md).
BUILD_TYPE = "https://builder-project.github.io/buildtypes/buildkit/v1"
BUILDER_ID = "https://builder-project.github.io/builder"
LOCK_FILE = "requirements.lock"
_SECRET_NAME = re.compile(r"(secret|token|passw|credential|private|api[_-]?key|auth)", re.IGNORECASE)
REDACTED = "<redacted>"


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def redact_build_args(args: Sequence[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
    """Build args with values of secret-looking names (TOKEN, PASSWORD, SECRET, API_KEY, ...) replaced
    by ``<redacted>`` and credentials in URLs (``https://user:pass@host``) removed."""
    items = args.items() if isinstance(args, Mapping) else args
    out: dict[str, str] = {}
    for k, v in items:
        if _SECRET_NAME.search(k):
            out[k] = REDACTED
        else:
            out[k] = re.sub(r"(://)[^/@\s:]+:[^/@\s]+@", r"\1" + REDACTED + "@", v)
    return out


def _time(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance_predicate(
    rendered: RenderedImage,
    built: BuiltImage,
    *,
    git_commit: str | None,
    source_repository: str | None = None,
    builder_version: str = __version__,
    buildx_builder: str | None = None,
    secret_ids: Sequence[str] = (),
    source_date_epoch: int | None = None,
    started: dt.datetime | None = None,
    finished: dt.datetime | None = None,
    invocation_id: str | None = None,
) -> dict[str, Any]:
    """The SLSA provenance v1 predicate (a plain JSON dict) for ``built`` from ``rendered``.

    ``git_commit``: the commit the matrices/templates came from (None: not a git checkout);
    ``source_repository``: a URI for the repository (e.g. ``git+https://github.com/org/repo``);
    ``secret_ids``: BuildKit secret ids the build mounted (their content is never recorded).
    Pure: no I/O."""
    v = rendered.variant
    labels = dict(rendered.labels)
    context = dict(rendered.context)
    lock_hash = _sha256(context[LOCK_FILE]) if LOCK_FILE in context else None
    deps: list[dict[str, Any]] = []
    if git_commit:
        deps.append(
            {
                "uri": f"{source_repository or 'git+file:.'}@{git_commit}",
                "digest": {"gitCommit": git_commit},
                "name": "source",
            }
        )
    if v.base.digest:
        alg, _, hexpart = v.base.digest.partition(":")
        deps.append(
            {
                "uri": f"oci://{v.base.pull.split('@', 1)[0]}",
                "digest": {alg: hexpart},
                "name": "base-image",
                "annotations": {"reference": v.base.reference},
            }
        )
    deps.append({"name": "Dockerfile", "digest": {"sha256": _sha256(rendered.dockerfile)}})
    for name, data in sorted(rendered.context):
        deps.append({"name": f"context/{name}", "digest": {"sha256": _sha256(data)}})
    cell = {
        "family": v.family,
        "accelerator": {"kind": v.accelerator.kind, "version": v.accelerator.version},
        "framework": {"name": v.framework.name, "version": v.framework.version},
        "python": v.python,
        "os": v.os,
        "platform": v.platform,
        "gpuArchs": list(v.gpu_archs),
        "packages": list(v.packages),
    }
    internal: dict[str, Any] = {
        "contentHash": rendered.content_hash,
        "contentTag": rendered.content_tag,
        "templateHash": _sha256(rendered.dockerfile),
        "dependencyLockHash": lock_hash,
        "baseDigest": v.base.digest,
        "secrets": sorted(secret_ids),
        "unpinned": list(rendered.unpinned),
    }
    if source_date_epoch is not None:
        internal["sourceDateEpoch"] = source_date_epoch
    if buildx_builder:
        internal["buildxBuilder"] = buildx_builder
    metadata: dict[str, Any] = {}
    if invocation_id:
        metadata["invocationId"] = invocation_id
    if started is not None:
        metadata["startedOn"] = _time(started)
    if finished is not None:
        metadata["finishedOn"] = _time(finished)
    run_details: dict[str, Any] = {
        "builder": {"id": BUILDER_ID, "version": {"builder": builder_version}},
        "metadata": metadata,
    }
    if built.log_path:
        run_details["byproducts"] = [{"name": "build-log", "uri": f"file://{built.log_path}"}]
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "variant": v.id,
                "matrix": v.matrix,
                "repository": built.reference,
                "cell": cell,
                "buildArgs": redact_build_args(rendered.build_args),
                "labels": labels,
            },
            "internalParameters": internal,
            "resolvedDependencies": deps,
        },
        "runDetails": run_details,
    }
