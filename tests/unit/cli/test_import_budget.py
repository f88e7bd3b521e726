"""Start-up budget per command (issue 19 item 3): each command runs in a fresh interpreter and may
have at most its budget of modules in ``sys.modules`` when it exits, and never the modules it does
not need. Module counts, not wall time: they do not move with the machine's load. ``sys.modules``
counts every module, those a package imports on first use through ``importlib.import_module``
(``builder.lazy``) included, which ``python -X importtime`` does not list
(https://docs.python.org/3/using/cmdline.html#cmdoption-X reports only import statements), and the
interpreter's own start-up modules (``python -c pass`` has about 30).

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
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

VARIANT = "jax0.7-cpu-py3.11-debian12"
#: No registry, policy, GPU or Sigstore machinery for help and version.
LIGHT = ("requests", "urllib3", "pydantic", "cryptography", "ruamel", "sigstore", "docker", "jinja2")
#: ``--help`` and ``--version`` besides: the JSON documents' TypedDicts (``builder.error_documents``)
PLAIN = (*LIGHT, "typing_extensions")
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
    # file locks: only a writer takes them (builder.lockfile, fcntl.flock; filelock is a test tool now)
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
    "builder.yamldoc",  # the files' texts are read (builder.textfiles) and hashed, not parsed
    # a stage's rules are built when a decision evaluates them: a query builds none
    "builder.policy.rules_groups",
    "builder.matrix.load",
    # fleet files only with --cluster or a fleet rule judging an image; the ledger only for writers
    "builder.compat.fleets",
    "sqlite3",
    "builder.ledger",
    # imported where used: suggestions only for a name not found, time zones only for a freeze rule
    "difflib",
    "zoneinfo",
    # a registry reached directly is spoken to with http.client (builder.registry.connections):
    # urllib3 (about 40 ms of imports) only when a proxy applies
    "urllib3",
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
    # the other promotion commands' module, the evidence and result classes a decision builds, the
    # copy code (builder.registry resolves its names on first use)
    "builder.cli.promote",
    "builder.policy.evidence",
    "builder.policy.results",
    "builder.registry.copy",
    # the JSON documents' TypedDicts: raising or reporting an error does not need them (resolve
    # prints a reference; --json writes the same shape as a plain dict)
    "typing_extensions",
    "builder.error_documents",
    # what the steps make of a variant (rendered, built, a summary line): resolve decodes variants only
    "builder.models.images",
    "builder.models.summary",
    # image labels: read for an image reference, never for a variant id
    "builder.labels",
    # a variant id's repository is read from the matrix index without decoding any variant
    "builder.models",
    # a token service's request: only for a registry answering with a Bearer challenge
    "builder.registry.token",
    # the registry client's thread pool: parallel mounts and copies only
    "concurrent.futures",
    # the content model's classes: a manifest HEAD names media types only (builder.registry.media)
    "builder.registry.manifest",
    # builder.toml is read with rtoml: tomllib compiles its regular expressions at import
    "tomllib",
    # a reference and a warning (or an error) are lines of text: builder.cli.plaintext writes them
    "rich",
)

#: What a device check that passes must not import: the diagnosis rules (compiled regular expressions,
#: only for a failure), pydantic's fleet/host/policy schemas and YAML (static verdicts, promotion).
CHECK = ("pydantic", "ruamel", "sigstore", "builder.checks.diagnosis.rules", "builder.compat.fleets", "builder.policy")

#: argv -> (most modules in ``sys.modules`` at exit, module prefixes never imported). Measured on
#: 2026-12-02 06:05 UTC, ``sys.modules`` counted (the interpreter's start-up modules and those loaded
#: through ``importlib.import_module`` included; the same trees counted this way before round 5:
#: --help 138, --version 130, check --help 143, matrix list 336, resolve --no-verify 323, history 342,
#: status 342, check REF 332), after ``builder.registry`` resolved its names on first use, ``resolve``
#: moved to ``builder.cli.resolve`` and ``BUILD_STAGE`` to ``builder.policy.model``: --help 138,
#: --version 130, check --help 143, matrix list 324, resolve --no-verify 320, history 341, status 341,
#: check REF 332; then 321 for resolve when the lock files' one definition became
#: ``builder.lockfile`` (imported by the modules that take locks; 2026-12-02 06:40 UTC). Earlier
#: figures (``python -X importtime``, which does not list modules imported through ``importlib``):
#: resolve --no-verify 314 on 03:48 UTC, 334 on 03:05, 558 on 01:00 (error path with rich's 42
#: modules; 508 on the success path). Round 7 (2026-12-02 12:00 UTC), after the JSON TypedDicts
#: moved to ``builder.error_documents`` (no ``typing_extensions`` to raise an error) and
#: ``builder.registry.auth`` imports ``shutil`` for a credential helper only: --help 136, --version
#: 128, check --help 143, matrix list 324, resolve 319, history 342, status 342, check REF 333; then
#: ``RenderedImage``/``BuiltImage`` and ``SummaryRow`` in modules of their own under ``builder.models``
#: (imported on first use): one module more where a command uses them (matrix list 325, status 343,
#: check REF 334), four dataclasses fewer for resolve; resolve 318 without ``builder.labels``; the
#: read limit in ``builder.textfiles``: resolve 318 without ``builder.yamldoc``, matrix list 326
#: (it parses: both modules); variant ids and the matrices' policy read from the index without
#: decoding a variant (``builder.matrix.index.variant_names`` / ``matrix_names``): resolve 317, history
#: 341; resolve 314 when the registry client imports its thread pool's module where it makes one;
#: the media types and JSON helpers in ``builder.registry.media``: history 342 and status 344 (both
#: modules), check REF 332; ``builder.toml`` read with rtoml instead of ``tomllib`` (4 modules and
#: their regular expressions, 2 modules): every command that reads it 2 fewer. ``builder.toml`` read
#: with the hand-written files' size limit (``builder.textfiles``, round 7 F4): check REF 331.
#: Round 8 (H): a registry reached directly through ``http.client`` (builder.registry.connections),
#: urllib3 only for proxies: resolve 214 (was 312), history 241 (340), status 244 (342). Round 8 (S):
#: text lines to a pipe written without rich (``builder.cli.plaintext``), so an error printed on the
#: closed port no longer imports rich's 42 modules: check REF 237 (with H's change; 331 before).
#: Round 8 (F5): the interruption state in ``builder.interruption`` (below ``builder.lockfile``,
#: whose lock waits end at a signal) and ``shlex`` imported on first use: matrix list 325, check
#: REF 238 (both import ``shlex`` elsewhere), every other command the same count.
#: Round 8 (F1): the one definition of loopback (``builder.hosts``, used by config's plain-HTTP rule,
#: the proxy bypass, errors' hints and Podman's TLS flag), imported by the first registry client:
#: resolve 215, history 242, status 245, check REF 239, promote --confirm 294 (one module each).
BUDGETS: dict[tuple[str, ...], tuple[int, tuple[str, ...]]] = {
    ("--help",): (136, PLAIN),
    ("--version",): (128, PLAIN),
    ("check", "--help"): (143, LIGHT),
    ("matrix", "list", "--json"): (325, ("requests", "cryptography", "sigstore", "docker")),
    ("resolve", VARIANT, "--stage", "dev", "--no-verify"): (215, NO_VERIFY),
    ("history", VARIANT, "--stage", "dev"): (242, QUERY),
    ("status", "--select", VARIANT): (245, QUERY),
    # pinned before anything runs: the closed port ends it there, after the engine's `docker info`
    ("check", f"127.0.0.1:9/demo/jax:{VARIANT}"): (239, CHECK),
}


#: Most of builder's own dataclasses defined by ``resolve --no-verify`` (each one costs more at start-up
#: than most modules: ``dataclasses`` compiles its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``
#: and, frozen, ``__setattr__`` / ``__delattr__``, about 1 ms each on the 2-core machine). Counted on
#: the closed port's error path (``builder.cli.github`` reports the failure): 55 before round 5
#: (2026-12-02 05:30 UTC), 47 after (06:10): no evidence, result or copy classes; 46 in round 7
#: (targets' private ``_Matrices`` adapter a plain class), 42 with ``RenderedImage``, ``BuiltImage``
#: and ``SummaryRow`` imported on first use and ``builder.cli.github.GitHub`` a named tuple, 41 without
#: ``builder.labels`` (its ``SourceFacts``), 38 with ``all_of``/``any_of``/``unconditional`` in
#: ``builder.policy.rules_groups`` (built with a stage's rules, on first use), 36 without
#: ``builder.yamldoc``'s ``Problem`` and ``Document`` (the read limit is ``builder.textfiles``'), 31
#: without decoding variants (no ``builder.models``: ``Variant`` and its four parts), 30 with the
#: token request in ``builder.registry.token`` (a Bearer challenge only), 27 without the content
#: model's ``Platform``, ``Descriptor`` and ``Manifest`` (media types: ``builder.registry.media``).
RESOLVE_DATACLASSES = 27

#: run ``builder`` as ``python -m builder`` does, then list ``sys.modules`` on stderr at exit (after
#: builder's own exit handlers), and the dataclasses builder's modules define
PROGRAM = """
import atexit, dataclasses, runpy, sys
def report():
    classes = {
        f"{m}.{k}" for m, mod in list(sys.modules.items()) if m == "builder" or m.startswith("builder.")
        for k, v in vars(mod).items()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == m
    }
    sys.stderr.write("\\nmodules: " + " ".join(sorted(sys.modules)) + "\\n")
    sys.stderr.write("dataclasses: " + " ".join(sorted(classes)) + "\\n")
atexit.register(report)
sys.argv = ["builder", *sys.argv[1:]]
runpy.run_module("builder", run_name="__main__", alter_sys=True)
"""


def imported(argv: tuple[str, ...], cwd: Path = ROOT) -> tuple[set[str], set[str]]:
    """Every module in ``sys.modules`` when ``builder argv`` exits (in ``cwd``) and the dataclasses
    builder's modules define (``module.Class``), in a fresh interpreter, after one run that fills
    the caches a first run fills."""
    env = {**os.environ, "BUILDER_REGISTRY": "127.0.0.1:9", "BUILDER_REGISTRY_RETRIES": "0", "NO_COLOR": "1"}
    env["PYTHONPATH"] = str(ROOT)  # builder from this checkout in any cwd
    subprocess.run([sys.executable, "-m", "builder", *argv], cwd=cwd, env=env, capture_output=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode in (0, 1, 2, 5, 8, 18), proc.stderr[-2000:]
    found = {}
    for line in proc.stderr.splitlines():
        name, sep, names = line.partition(": ")
        if sep and name in ("modules", "dataclasses"):
            found[name] = set(names.split())
    assert found.keys() == {"modules", "dataclasses"}, f"no module list: {proc.stderr[-2000:]}"
    return found["modules"], found["dataclasses"]


@pytest.mark.parametrize("argv", list(BUDGETS), ids=lambda a: " ".join(a[:2]))
def test_command_imports_stay_within_budget(argv: tuple[str, ...]) -> None:
    budget, forbidden = BUDGETS[argv]
    modules, _ = imported(argv)
    assert "builder" in modules
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert not bad, f"`builder {' '.join(argv)}` imports what it does not need: {bad[:12]}"
    assert len(modules) <= budget, (
        f"`builder {' '.join(argv)}` imports {len(modules)} modules (budget {budget}); "
        "make the new imports lazy where this command does not use them"
    )


def test_resolve_defines_few_dataclasses() -> None:
    """``resolve --no-verify`` defines only the dataclasses it uses (the start-up cost that is not a
    module count: the policy's evidence and results, the copy statistics are never defined)."""
    _, classes = imported(("resolve", VARIANT, "--stage", "dev", "--no-verify"))
    assert "builder.promote.context.PromotionContext" in classes
    assert not {c for c in classes if c.startswith(("builder.policy.evidence.", "builder.policy.results."))}
    assert len(classes) <= RESOLVE_DATACLASSES, (
        f"`builder resolve` defines {len(classes)} dataclasses (budget {RESOLVE_DATACLASSES}): {sorted(classes)}"
    )


#: What ``promote --confirm`` must not import: the YAML parser and schemas (the policy comes from
#: the cache), other commands' machinery, the promotion documents' TypedDicts (``builder.promote.documents``:
#: type checking and schemas only; ``typing_extensions`` still comes with the evidence and signing
#: modules' own documents), rich (text lines to a pipe are written by
#: ``builder.cli.plaintext``), filelock (locks are ``fcntl.flock``, ``builder.lockfile``), urllib3
#: (a registry reached directly), the other rule kinds of a stage whose one rule is a signature.
PROMOTE = (
    "sigstore",
    "docker",
    "jinja2",
    "pydantic",
    "ruamel",
    "rich",
    "filelock",
    "urllib3",
    "builder.promote.documents",
    "builder.policy.loader",
    "builder.policy.schema",
    "builder.policy.rules_benchmark",
    # a signature-only stage: builder.policy.rules_signature, not the other evidence rules
    "builder.policy.rules_evidence",
    # no matrices, no variant decoded
    "builder.models",
    "builder.compat.fleets",
    "builder.render",
    "builder.variants",
    "builder.image.layers",
)
#: ``promote SRC --variant-id V --to rel --confirm`` of a stage whose one rule is a signature, on the
#: closed port: it has imported the batch, plan, evidence, apply and signing modules when its first
#: registry request fails: 293 modules, 67 dataclasses (round 8 S, 2026-12-02 14:26 UTC). On the open
#: registry's success path (``benchmarks/promote_cli.py``'s command) the same counting gives 302 and
#: 69; 430 and 87 before round 8 (rich, filelock and urllib3 among them, and every evidence rule).
PROMOTE_BUDGET = 294  # 293 before builder.hosts (round 8 F1)
PROMOTE_DATACLASSES = 68  # 67 before promote.model.StageAfter (round 8 F2: what a failed apply leaves in the stage)


def test_promote_confirm_imports_stay_within_budget(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    from builder.signing.keys import write_key_pair
    from tests.projects import build_key_policy

    key, pub, _ = write_key_pair(tmp_path / "keys", ec.generate_private_key(ec.SECP256R1()), None)
    (tmp_path / "builder.toml").write_text('registry = "127.0.0.1:9"\nstate_dir = ".builder"\n')
    (tmp_path / "matrices").mkdir()
    policy = tmp_path / "policy.yaml"
    stages = """\
        rel:
          from: build
          require:
            signature: {signers: [build]}
        """
    policy.write_text(build_key_policy(pub, stages))
    argv = ("promote", "127.0.0.1:9/bench/src:v1", "--variant-id", "v1", "--to", "rel", "--confirm")
    modules, classes = imported((*argv, "--policy", str(policy), "--key", str(key)), cwd=tmp_path)
    assert "builder.promote.apply" in modules and "builder.lockfile" in modules, sorted(modules)
    bad = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in PROMOTE))
    assert not bad, f"`builder promote --confirm` imports what it does not need: {bad[:12]}"
    assert len(modules) <= PROMOTE_BUDGET, (
        f"`builder promote --confirm` imports {len(modules)} modules (budget {PROMOTE_BUDGET}); "
        "make the new imports lazy where this command does not use them"
    )
    assert len(classes) <= PROMOTE_DATACLASSES, (
        f"`builder promote --confirm` defines {len(classes)} dataclasses (budget {PROMOTE_DATACLASSES})"
    )


#: run ``builder matrix list --json`` as the console script does (``builder.__main__.run``) and record
#: each collection of the cyclic garbage collector: had the invoked command's module been imported?
COLLECTOR = """
import atexit, gc, sys
seen = []
gc.callbacks.append(lambda phase, info: phase == "start" and seen.append("builder.cli.matrix" in sys.modules))
atexit.register(lambda: sys.stderr.write(
    f"\\ncollector: {len(seen)} {seen.count(False)} {gc.isenabled()}\\n"
))
sys.argv = ["builder", "matrix", "list", "--json"]
from builder.__main__ import run
run()
"""


def test_process_collects_garbage_only_after_start_up() -> None:
    """The ``builder`` process pauses the cyclic garbage collector while it imports (builder.__main__)
    and resumes it before the command's own work (builder.cli.main): no collection before the
    invoked command's module is imported, at least one after it (a long command keeps collecting),
    and the collector on at exit."""
    proc = subprocess.run(
        [sys.executable, "-c", COLLECTOR], cwd=ROOT, env={**os.environ, "NO_COLOR": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line.split()[1:] for line in proc.stderr.splitlines() if line.startswith("collector: ")]
    assert lines, f"no collector report: {proc.stderr[-2000:]}"
    collections, during_start_up, enabled = lines[-1]
    assert during_start_up == "0", f"{during_start_up} collections while builder imported"
    assert int(collections) >= 1, "the command ran without the collector"
    assert enabled == "True"
