"""Start-up budget per command (issue 19 item 3): each command runs in a fresh interpreter under
``python -X importtime`` (https://docs.python.org/3/using/cmdline.html#cmdoption-X) and may import
at most its budget of modules, and never the modules it does not need. Module counts, not wall
time: they do not move with the machine's load.

The registry-reaching commands are pointed at a closed port (``127.0.0.1:9``, retries off), so
they import everything up to their first registry request and stop there (exit 5); that path
holds the imports that matter (policy, matrices, registry client, evidence verification). Each
command runs once before it is measured, as a user's second command does: the validated matrices
and policy are then read from ``<state_dir>/cache`` (``builder.matrix.index``,
``builder.policy.cache``), never parsed with the YAML parser and pydantic schemas.

When a change needs more modules, first make the import lazy where the command does not use it
(``builder.promote`` resolves its names on first use; sigstore is imported on the first keyless
layer); raise a budget only for a module the command really needs, in the same commit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

VARIANT = "jax0.7-cpu-py3.11-debian12"
#: No registry, policy, GPU or Sigstore machinery for help and version.
LIGHT = ("requests", "urllib3", "pydantic", "cryptography", "ruamel", "sigstore", "docker", "jinja2")
#: What a query of the registry (resolve, status, history) must not import.
QUERY = (
    "sigstore",
    "docker",
    "jinja2",
    "builder.promote.apply",
    "builder.promote.transfer",
    "builder.promote.rollback",
    "builder.signing.sign",
    "builder.signing.attest",
    "builder.signing.keyless",
    # the fleet checker's image-layer cache: only when a fleet rule judges an image
    "builder.image.layers",
    # file locks: only a writer takes them
    "filelock",
    # the rendering, locking and base-image modules: the matrices' policy comes from the index
    "builder.variants",
    "builder.render",
    "builder.locks",
    # the policy and the matrices are read back from the cache: no YAML parser, no schemas
    "pydantic",
    "ruamel",
    "builder.policy.loader",
    "builder.policy.schema",
    "builder.matrix.load",
    # fleet files only with --cluster or a fleet rule judging an image; the ledger only for writers
    "builder.compat.fleets",
    "sqlite3",
    "builder.ledger",
    # imported where used: suggestions only for a name not found, time zones only for a freeze rule
    "difflib",
    "zoneinfo",
)
#: What ``resolve --no-verify`` must not import besides: the record check's evidence reading and
#: signature verification (cryptography included: fingerprints are text, builder.signing.fingerprints).
NO_VERIFY = (
    *QUERY,
    "cryptography",
    "builder.promote.records",
    "builder.promote.evidence",
    "builder.signing.verify",
    "builder.signing.keys",
    # the records, plans and documents (Location and Target are builder.promote.location's)
    "builder.promote.model",
    "subprocess",  # nothing runs an external program
)

#: What a device check that passes must not import: the diagnosis rules (compiled regular expressions,
#: only for a failure), pydantic's fleet/host/policy schemas and YAML (static verdicts, promotion).
CHECK = ("pydantic", "ruamel", "sigstore", "builder.checks.diagnosis.rules", "builder.compat.fleets", "builder.policy")

#: argv -> (most modules imported, module prefixes never imported). Measured on 2026-12-02 03:48 UTC
#: (Location/Target apart from builder.promote.model; the policy cache builds a stage's rules on first
#: use, whose modules -X importtime does not list as they come from importlib.import_module):
#: resolve --no-verify 314 (subprocess imported on first use). Measured on 2026-12-02 03:35 UTC
#: (difflib, zoneinfo, tempfile and secrets imported where used): --help 137, --version 129,
#: check --help 140, matrix list 328, resolve --no-verify 324, history 338, status 338, check REF 326.
#: Measured on 2026-12-02 03:05 UTC
#: (the policy cached per content, resolve in builder.promote.resolution, fingerprints without
#: cryptography): resolve --no-verify 334 (566 before), history 346 and status 345 (566/570), each
#: with rich's 42 modules for the error. Measured on 2026-12-02 01:00 UTC:
#: --help 140, --version 132, check --help 140, matrix list 337, check REF 421 (507 before the
#: diagnosis rules and the static verdicts' schemas became lazy), resolve/history/status 558 (these
#: three on their error path, which adds rich's 42 modules; resolve's success path imports 508,
#: down from 553 at 00:48 with the fleet checker, the matrices' bindings and filelock imported on
#: first use).
BUDGETS: dict[tuple[str, ...], tuple[int, tuple[str, ...]]] = {
    ("--help",): (140, LIGHT),
    ("--version",): (132, LIGHT),
    ("check", "--help"): (143, LIGHT),
    ("matrix", "list", "--json"): (332, ("requests", "cryptography", "sigstore", "docker")),
    ("resolve", VARIANT, "--stage", "dev", "--no-verify"): (316, NO_VERIFY),
    ("history", VARIANT, "--stage", "dev"): (342, QUERY),
    ("status", "--select", VARIANT): (342, QUERY),
    # pinned before anything runs: the closed port ends it there, after the engine's `docker info`
    ("check", f"127.0.0.1:9/demo/jax:{VARIANT}"): (350, CHECK),  # 343 on 2026-12-02 03:05 UTC
}


def imported(argv: tuple[str, ...]) -> dict[str, int]:
    """Module -> self time (µs) of everything ``builder argv`` imports, in a fresh interpreter,
    after one run that fills the caches a first run fills."""
    env = {**os.environ, "BUILDER_REGISTRY": "127.0.0.1:9", "BUILDER_REGISTRY_RETRIES": "0", "NO_COLOR": "1"}
    subprocess.run([sys.executable, "-m", "builder", *argv], cwd=ROOT, env=env, capture_output=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "builder", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1, 2, 5, 8, 18), proc.stderr[-2000:]
    out: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, _cumulative, name = line[len("import time:") :].split("|")
            if self_us.strip().isdigit():
                out[name.strip()] = int(self_us)
    return out


@pytest.mark.parametrize("argv", list(BUDGETS), ids=lambda a: " ".join(a[:2]))
def test_command_imports_stay_within_budget(argv: tuple[str, ...]) -> None:
    budget, forbidden = BUDGETS[argv]
    modules = imported(argv)
    assert modules, "python -X importtime reported nothing"
    assert "builder" in modules
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert not bad, f"`builder {' '.join(argv)}` imports what it does not need: {bad[:12]}"
    assert len(modules) <= budget, (
        f"`builder {' '.join(argv)}` imports {len(modules)} modules (budget {budget}); "
        "make the new imports lazy where this command does not use them"
    )
