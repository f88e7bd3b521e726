"""GitHub Actions output: step outputs, step summaries and workflow-command annotations.

Active only when ``GITHUB_ACTIONS=true`` (GitHub sets it on every runner); the command line reads
the environment here, the core never does. What it writes:

- ``$GITHUB_OUTPUT``: the step's outputs, ``name=value`` lines (``name<<DELIMITER`` blocks for
  values that span lines). Every result with summary rows gives ``digests``: compact JSON
  ``{"<variant>": "sha256:<hex>"}`` of the rows that have a digest (``builder build``, ``run``,
  ``promote``, ``check``); a result with ``outputs()`` adds its own (``builder resolve``:
  ``reference=<registry>/<repository>@sha256:<hex>``).
- ``$GITHUB_STEP_SUMMARY``: a Markdown table per command (variant, digest, status, stage),
  appended.
- workflow commands on stderr: ``::error file=F,line=L,col=C,title=T::message`` (``::warning``
  for warnings) for each validation problem of a failure (matrix, policy, fleet files), then
  ``::error title=<kind>::<message>`` for the failure itself. The runner reads workflow commands
  from both output streams; stderr keeps ``--json`` stdout one JSON document.

Formats and escaping: https://docs.github.com/en/actions/using-workflows/workflow-commands-for-github-actions
(data: ``%`` ``\\r`` ``\\n`` as ``%25`` ``%0D`` ``%0A``; properties also ``:`` ``,`` as ``%3A``
``%2C``), ``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY`` on the same page.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from builder.error_documents import ProblemDocument
    from builder.models import SummaryRow


@runtime_checkable
class Summarised(Protocol):
    """A result that lists what happened to each variant (``BuildRun``, ``RunReport``, ``Batch``, ...)."""

    def summary_rows(self) -> Sequence[SummaryRow]: ...


@runtime_checkable
class WithOutputs(Protocol):
    """A result with named single values for a CI step (``Resolved``: ``reference``)."""

    def outputs(self) -> Mapping[str, str]: ...


class GitHub(NamedTuple):
    """Where this GitHub Actions step takes outputs (``output``) and its summary (``summary``);
    None when the runner did not set the variable. A named tuple, not a dataclass: every command's
    ``emit`` imports this module, and a frozen dataclass costs about 1 ms of start-up to create
    (``dataclasses`` compiles six methods; issue 19), a named tuple a fraction of it."""

    output: Path | None
    summary: Path | None


def detect(environ: Mapping[str, str]) -> GitHub | None:
    """The GitHub Actions step this process runs in, or None outside GitHub Actions
    (``GITHUB_ACTIONS`` is not ``true``)."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return None
    output = environ.get("GITHUB_OUTPUT")
    summary = environ.get("GITHUB_STEP_SUMMARY")
    return GitHub(Path(output) if output else None, Path(summary) if summary else None)


# --------------------------------------------------------------------------------------------- escaping


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, ``\\r``, ``\\n`` percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, and ``:`` ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(name: str, message: str, **properties: str | int) -> str:
    """One workflow command line: ``::name k=v,k=v::message`` (properties with empty values left out)."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v not in ("", 0))
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def problem_command(problem: ProblemDocument, title: str) -> str:
    """``::error`` (or ``::warning``) for one validation problem, located at its file, line and column."""
    name = "warning" if problem.get("severity") == "warning" else "error"
    path = problem.get("path", "")
    message = f"{path}: {problem['message']}" if path else problem["message"]
    return workflow_command(
        name, message, file=problem["file"], line=problem.get("line", 0), col=problem.get("col", 0), title=title
    )


def failure_commands(kind: str, message: str, problems: Iterable[object] = ()) -> list[str]:
    """The workflow commands of one failure: one per located problem, then ``::error title=kind``
    (with the message's first line only when the problems were annotated: the rest lists them)."""
    lines = [problem_command(p, kind) for p in problems if _is_problem(p)]  # type: ignore[arg-type]
    if lines:
        message = message.splitlines()[0] if message else message
    lines.append(workflow_command("error", message, title=kind))
    return lines


def _is_problem(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("file"), str) and isinstance(value.get("message"), str)


def problems_of(details: Mapping[str, object]) -> list[object]:
    """The located problems of an error's ``details``: ``problems`` (matrix, fleet, policy loads)
    and each ``files[].problems`` (``builder policy validate``)."""
    found: list[object] = []
    problems = details.get("problems")
    if isinstance(problems, list):
        found.extend(problems)
    files = details.get("files")
    if isinstance(files, list):
        for f in files:
            if isinstance(f, dict) and isinstance(f.get("problems"), list):
                found.extend(f["problems"])
    return found


# --------------------------------------------------------------------------------------------- files


def output_lines(name: str, value: str) -> str:
    """One ``$GITHUB_OUTPUT`` entry: ``name=value``, or a ``name<<DELIMITER`` block when ``value``
    spans lines (the delimiter random, so no value can end the block early)."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    import secrets  # only for a multi-line output

    delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def digests(rows: Iterable[SummaryRow]) -> str:
    """Compact JSON ``{"<variant>": "<digest>"}`` of the rows that have a digest (first one per variant)."""
    found: dict[str, str] = {}
    for row in rows:
        if row.digest:
            found.setdefault(row.variant, row.digest)
    return json.dumps(found, separators=(",", ":"), sort_keys=True)


def summary_markdown(title: str, rows: Sequence[SummaryRow]) -> str:
    """A Markdown section: ``### title`` and a table of variant, digest, status and stage."""
    lines = [f"### {_cell(title)}", "", "| variant | digest | status | stage |", "| --- | --- | --- | --- |"]
    for r in rows:
        digest = f"`{_cell(r.digest)}`" if r.digest else "-"
        lines.append(f"| `{_cell(r.variant)}` | {digest} | {_cell(r.status)} | {_cell(r.stage) or '-'} |")
    if not rows:
        lines.append("| - | - | nothing selected | - |")
    return "\n".join(lines) + "\n\n"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").replace("`", "'")


def _append(path: Path, text: str) -> None:
    """Append to a runner file; ConfigError (exit 2) naming it when it cannot be written."""
    from builder.errors import ConfigError

    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the GitHub Actions file {path}: {exc.strerror or exc}",
            hint="GITHUB_OUTPUT and GITHUB_STEP_SUMMARY must name writable files (the runner sets them)",
        ) from exc


# --------------------------------------------------------------------------------------------- hooks


def report_result(result: object, title: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """``emit``'s hook: write ``result``'s outputs and summary table for this step (nothing outside
    GitHub Actions). ``result`` describes itself through :class:`Summarised` / :class:`WithOutputs`;
    ``title``: the summary's heading (default: the command, ``builder build``). Raises ConfigError
    when a runner file cannot be written."""
    gh = detect(os.environ if environ is None else environ)
    if gh is None:
        return
    if title is None:
        import click

        title = click.get_current_context().command_path
    outputs: dict[str, str] = {}
    if isinstance(result, Summarised):
        rows = list(result.summary_rows())
        outputs["digests"] = digests(rows)
        if gh.summary is not None:
            _append(gh.summary, summary_markdown(title, rows))
    if isinstance(result, WithOutputs):
        outputs.update(result.outputs())
    if gh.output is not None and outputs:
        _append(gh.output, "".join(output_lines(k, v) for k, v in outputs.items()))


def report_failure(
    kind: str, message: str, details: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> None:
    """``main``'s hook on a failure: print its workflow commands on stderr (nothing outside
    GitHub Actions); ``details``: the error's details, whose :func:`problems_of` are annotated."""
    if detect(os.environ if environ is None else environ) is None:
        return
    problems = problems_of(details or {})
    sys.stderr.write("".join(line + "\n" for line in failure_commands(kind, message, problems)))
    sys.stderr.flush()


__all__ = [
    "GitHub",
    "Summarised",
    "WithOutputs",
    "detect",
    "digests",
    "escape_data",
    "escape_property",
    "failure_commands",
    "output_lines",
    "problem_command",
    "problems_of",
    "report_failure",
    "report_result",
    "summary_markdown",
    "workflow_command",
]
