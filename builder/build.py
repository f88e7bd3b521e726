"""Compatibility re-exports; import from builder.builds.plan, builder.builds.tags, builder.builds.run,
builder.builds.source, builder.publish (signing after a push), builder.bases (bases lock update),
builder.selection (select, shard, changed) and builder.variants (rendering the matrices now or at a
git ref). Every name the former ``builder/build.py`` offered stays importable from here.
"""

from builder.bases import BaseChange, base_facts, update_bases
from builder.builds.plan import (
    CA_SECRET_ID,
    CACHE_PREFIX,
    DEFAULT_CA_BUNDLE,
    MAX_TAG,
    PENDING_PREFIX,
    Action,
    BuildOptions,
    PlannedBuild,
    build_secrets,
    check_pinned,
    check_tags,
    content_key,
    default_secrets,
    parse_secret,
    plan_builds,
)
from builder.builds.run import (
    BuildRun,
    ProgressFn,
    build_request,
    build_variants,
    built_json,
    materialize,
    preview,
    raise_for_failures,
)
from builder.builds.source import git_commit, git_commit_time
from builder.builds.tags import lookup_content_tags, move_tag, publish_content_tag, resolve_many
from builder.publish import KeylessSetup, signing_hook
from builder.selection import changed as changed_variants
from builder.selection import parse_shard, select, shard
from builder.variants import render_at_ref, render_matrices

__all__ = [
    "CACHE_PREFIX",
    "CA_SECRET_ID",
    "DEFAULT_CA_BUNDLE",
    "MAX_TAG",
    "PENDING_PREFIX",
    "Action",
    "BaseChange",
    "BuildOptions",
    "BuildRun",
    "KeylessSetup",
    "PlannedBuild",
    "ProgressFn",
    "base_facts",
    "build_request",
    "build_secrets",
    "build_variants",
    "built_json",
    "changed_variants",
    "check_pinned",
    "check_tags",
    "content_key",
    "default_secrets",
    "git_commit",
    "git_commit_time",
    "lookup_content_tags",
    "materialize",
    "move_tag",
    "parse_secret",
    "parse_shard",
    "plan_builds",
    "preview",
    "publish_content_tag",
    "raise_for_failures",
    "render_at_ref",
    "render_matrices",
    "resolve_many",
    "select",
    "shard",
    "signing_hook",
    "update_bases",
]
