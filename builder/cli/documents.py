"""The JSON documents ``--json`` prints: one declared model per command, and their JSON Schemas.

Each command's document is a ``TypedDict`` declared next to the value that produces it (its
``to_json``); :data:`DOCUMENTS` maps the command (``"status"``, ``"bases update"``) to it.
``python -m builder.cli.documents docs/schemas`` writes ``<command>.json`` (JSON Schema 2020-12,
https://json-schema.org/draft/2020-12) for each, plus ``error.json`` for the document every
failure prints (``{"error": {...}}``, docs/exit-codes.md). A test keeps the committed schemas
equal to the generated ones, and every ``--json`` output the tests see is validated against them.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

#: command -> "module:TypedDict" of the document it prints with ``--json``
DOCUMENTS: dict[str, str] = {
    "doctor": "builder.doctor:ReportDocument",
    "matrix list": "builder.matrix.formats:MatrixListDocument",
    "compat check": "builder.compat.verdict:VerdictDocument",
    "compat fleet": "builder.compat.fleet_verdicts:FleetCheckDocument",
    "compat cuda": "builder.compat.releases:CudaReleaseDocument",
    "compat wheels": "builder.compat.releases:WheelsDocument",
    "render": "builder.render:RenderDocument",
    "lock": "builder.locks:LockDocument",
    "hostinfo": "builder.checks.host.model:HostInfoDocument",
    "check": "builder.checks.clusters:CheckCommandDocument",
    "diagnose": "builder.checks.diagnosis.model:DiagnosisDocument",
    "inspect": "builder.image.inspection:InspectDocument",
    "diff": "builder.image.diff:DiffDocument",
    "sbom": "builder.sbom:SbomDocument",
    "keys generate": "builder.signing.operations:KeysGenerateDocument",
    "keys import": "builder.signing.operations:KeysImportDocument",
    "keys export": "builder.signing.operations:KeysExportDocument",
    "sign": "builder.signing.operations:SignDocument",
    "attest": "builder.signing.operations:SignDocument",
    "verify": "builder.signing.report:VerifyDocument",
    "policy validate": "builder.policy.validation:PolicyValidateDocument",
    "approve": "builder.promote.approve:ApproveDocument",
    "promote": "builder.promote.documents:PromoteDocument",
    "rollback": "builder.promote.documents:RollbackDocument",
    "status": "builder.promote.documents:StatusDocument",
    "history": "builder.promote.documents:HistoryDocument",
    "report": "builder.promote.report:ReportDocument",
    "resolve": "builder.promote.documents:ResolveDocument",
    "fleet audit": "builder.promote.audit:FleetAuditDocument",
    "gc": "builder.promote.gc:GcDocument",
    "ledger verify": "builder.promote.ledger_check:LedgerVerifyDocument",
    "build": "builder.build.results:BuildDocument",
    "bases update": "builder.bases:BasesUpdateDocument",
    "run": "builder.pipeline:RunDocument",
}

#: the document of every failure (usage errors and bugs included)
ERROR = "builder.error_documents:ErrorDocument"
SCHEMA_ID = "https://builder-project.github.io/schemas/{name}.json"


def model(target: str) -> type:
    """The TypedDict ``module:Name`` names."""
    module, _, attr = target.partition(":")
    found: type = getattr(importlib.import_module(module), attr)
    return found


def file_name(command: str) -> str:
    """``bases update`` -> ``bases-update`` (the schema's file name without ``.json``)."""
    return command.replace(" ", "-")


def schema(command: str) -> dict[str, Any]:
    """The JSON Schema of ``command``'s document (``"error"``: the failure document). Objects
    allow no properties beyond the declared ones, so a renamed key is a schema change."""
    from pydantic import TypeAdapter

    target = ERROR if command == "error" else DOCUMENTS[command]
    doc = TypeAdapter(model(target)).json_schema(mode="serialization")
    _close_objects(doc)
    title = "builder --json: failure" if command == "error" else f"builder {command} --json"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID.format(name=file_name(command)),
        **doc,
        "title": title,
    }


def _close_objects(node: object) -> None:
    """Set ``additionalProperties: false`` on every object schema in ``node`` (in place) that does not say."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)


def render(command: str) -> str:
    """The schema file's text (stable: sorted keys, two-space indent, final newline)."""
    return json.dumps(schema(command), indent=2, sort_keys=True) + "\n"


def write_all(directory: Path) -> list[Path]:
    """Write every schema into ``directory``; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for command in ["error", *DOCUMENTS]:
        path = directory / f"{file_name(command)}.json"
        path.write_text(render(command))
        out.append(path)
    return out


if __name__ == "__main__":  # python -m builder.cli.documents docs/schemas
    for written in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(written)
