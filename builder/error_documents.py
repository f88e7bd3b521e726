"""The JSON shapes of a failure and of a validation problem, each defined once: ``ErrorBody`` and
``ErrorDocument`` (what ``--json`` prints on any failure, docs/exit-codes.md; built by
:meth:`builder.errors.BuilderError.to_json`) and ``ProblemDocument`` (one validation problem,
:meth:`builder.yamldoc.Problem.to_json`), with ``Severity``.

They are ``typing_extensions`` TypedDicts: pydantic builds the commands' JSON Schemas from them
(``python -m builder.cli.documents docs/schemas``) and refuses ``typing.TypedDict`` before
Python 3.12 (https://docs.pydantic.dev/2.8/errors/usage_errors/#typed-dict-version). That is why
they live in a module of their own, imported by what writes or declares a document: raising,
catching or printing an error needs neither them nor ``typing_extensions``, whose import costs
``builder resolve`` more start-up than most of builder's own modules (issue 19). Nothing here is
checked at run time; the shapes are for mypy and the schemas.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

#: a problem's weight: ``error`` fails the load, ``warning`` does not
Severity = Literal["error", "warning"]


class ErrorBody(TypedDict):
    """One failure: ``kind`` (the error class's name in docs/exit-codes.md), ``exit_code``,
    ``message``, ``hint`` (what to do next; may be empty) and ``details`` (facts of that kind)."""

    kind: str
    exit_code: int
    message: str
    hint: str
    details: dict[str, Any]


class ErrorDocument(TypedDict):
    """What ``--json`` prints on any failure, usage errors and bugs included."""

    error: ErrorBody


class ProblemDocument(TypedDict):
    """One validation problem in JSON (every ``--json`` document that reports problems): the
    ``file`` as named, 1-based ``line`` and ``col`` (0: unknown), the dotted field ``path``
    (empty: the whole document), the ``message`` and its ``severity``."""

    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Severity
