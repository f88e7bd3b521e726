"""The policy validated once per content (``builder.policy.cache``): read back equal to what the
loader gives, without the YAML parser or pydantic, and never stale: a replaced key file, a key
added to a glob's directory, a removed key, an edited fleet file or policy are each seen on the
next load."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from builder.errors import PolicyError
from builder.policy import Policy, Rule, load_policy
from builder.policy.cache import CLASSES, StoredRule, cached_policy, decode, encode
from builder.predicates import SLSA_PROVENANCE_V1
from builder.signing.keys import generate_key_pair
from tests.unit.policy.support import POLICY, ROOT, Keys, write

if TYPE_CHECKING:
    from pathlib import Path

#: Every rule kind, a freeze window of each form, retention, a key glob and a fleet file.
EVERY_RULE = """\
version: 1
keys:
  build: [{{file: {build}}}]
  runners:
    - file: "{{root}}/runners/*.pub"
approvers:
  alice: {{file: {alice}}}
promoters: [build]
retention: {{content_tags: 10d, pending_tags: 2h}}
stages:
  dev:
    from: build
    require:
      all_of:
        - signature: {{signers: [build], count: 1}}
        - attestation: {{type: {slsa}, signers: [build], where: {{a.b: [1, "x"], c: {{d: 2.5}}}}}}
        - provenance: {{signers: [build], source: "git+https://example.com/*", builder_id: b}}
        - device_check: {{signers: [runners], vendors: [nvidia], driver_branches: [570], clusters: [c1]}}
        - tests: {{signers: [runners]}}
        - benchmark: {{signers: [runners], metric: m, max_regression: 5%, same: [vendor]}}
        - collective: {{signers: [runners], min_busbw_ratio: 0.7, single_gpu: not-applicable}}
        - vulnerabilities: {{signers: [build], max_severity: medium, max_age: 7d, ignore: [CVE-1-*]}}
        - fleet: {{file: {fleet}, allow: [ok]}}
    rollback: {{allowed: [build]}}
  prod:
    from: dev
    require:
      any_of:
        - approvals: {{count: 1, approvers: [alice], same_ticket: true}}
        - change_ticket: {{pattern: "CHG-[0-9]+"}}
        - soak: {{min: 1h, signers: [build]}}
        - freeze:
            timezone: Europe/Berlin
            windows:
              - {{reason: holidays, start: "2026-12-24T00:00:00", end: "2026-12-27T00:00:00"}}
              - {{days: [fri], from: "16:00", to: "23:59"}}
        - unconditional: why not
    rollback: {{allowed: [alice]}}
"""


def _key(dir_: Path, name: str) -> tuple[Path, str]:
    _, pub, fp = generate_key_pair(dir_ / name, None)
    return pub, fp


@pytest.fixture
def every_rule(tmp_path: Path, keys: Keys) -> tuple[Path, dict[str, str]]:
    (tmp_path / "runners").mkdir()
    shutil.copy(keys["runner"][0], tmp_path / "runners" / "one.pub")
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(ROOT / "fleets" / "demo.yaml", fleet)
    text = EVERY_RULE.format(build=keys["build"][0], alice=keys["alice"][0], slsa=SLSA_PROVENANCE_V1, fleet=fleet)
    return write(tmp_path, text), {"root": str(tmp_path), "state_dir": str(tmp_path)}


def test_every_rule_kind_reads_back_equal(every_rule: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, variables = every_rule
    loaded = load_policy(path, variables)
    assert decode(json.loads(json.dumps(encode(loaded)))) == loaded
    cache = tmp_path / "cache"
    first = cached_policy(path, variables, cache)
    assert first == loaded
    assert len(list(cache.glob("policy-*.json"))) == 1
    assert cached_policy(path, variables, cache) == loaded  # from the file


def test_the_shipped_policies_read_back_equal(tmp_path: Path) -> None:
    variables = {"root": str(ROOT), "state_dir": str(ROOT / ".builder")}
    for path in sorted((ROOT / "policies").glob("*.yaml")):
        loaded = load_policy(path, variables)
        cached_policy(path, variables, tmp_path)
        assert cached_policy(path, variables, tmp_path) == loaded, path


def test_every_rule_class_can_be_stored() -> None:
    for module in {f"builder.policy.{m}" for m in CLASSES.values()}:
        importlib.import_module(module)
    kinds: list[type] = [Rule]
    seen: set[type] = set()
    while kinds:
        cls = kinds.pop()
        seen.add(cls)
        kinds.extend(cls.__subclasses__())
    # StoredRule is the cache's own stand-in for a stored rule, never stored itself
    missing = sorted(c.__name__ for c in seen - {Rule, StoredRule} if c.__module__.startswith("builder.policy."))
    assert [m for m in missing if m not in CLASSES] == []


def test_a_hit_imports_neither_yaml_nor_pydantic_nor_the_loader(
    every_rule: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, variables = every_rule
    cache = tmp_path / "cache"
    cached_policy(path, variables, cache)
    code = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from builder.policy.cache import cached_policy
        p = cached_policy(Path({str(path)!r}), {variables!r}, Path({str(cache)!r}))
        assert p.stage_names == ("dev", "prod"), p.stage_names
        print(" ".join(sorted(sys.modules)))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    for heavy in ("builder.policy.loader", "builder.policy.schema", "pydantic", "ruamel.yaml", "builder.compat.fleets"):
        assert heavy not in out, heavy


def _runners(policy: Policy) -> set[str]:
    (runners,) = [s for s in policy.keysets if s.name == "runners"]
    return {k.fingerprint for k in runners.keys if k.fingerprint}


def _build(policy: Policy) -> set[str | None]:
    (build,) = [s for s in policy.keysets if s.name == "build"]
    return {k.fingerprint for k in build.keys}


def test_a_hit_builds_only_the_rules_of_the_stage_it_uses(
    every_rule: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, variables = every_rule
    cache = tmp_path / "cache"
    loaded = load_policy(path, variables)
    cached_policy(path, variables, cache)
    code = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from builder.policy.cache import cached_policy
        p = cached_policy(Path({str(path)!r}), {variables!r}, Path({str(cache)!r}))
        before = set(sys.modules)
        kinds = [r.kind for r in p.stage("prod").require.walk()]
        print(" ".join(sorted(before)))
        print(" ".join(kinds))
        """)
    modules, kinds = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    # prod's rules (approvals, change ticket, soak, freeze) and dev's evidence rules: not built on reading the file
    for module in (
        "builder.policy.rules_change",
        "builder.policy.rules_evidence",
        "builder.policy.rules_signature",
        "builder.policy.rules_benchmark",
    ):
        assert module not in modules.split(), module
    assert kinds.split() == [r.kind for r in loaded.stage("prod").require.walk()]
    assert kinds.split()[:3] == ["any_of", "approvals", "change_ticket"]


def test_a_stored_stage_rule_that_does_not_decode_is_loaded_again(
    every_rule: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, variables = every_rule
    cache = tmp_path / "cache"
    loaded = load_policy(path, variables)
    cached_policy(path, variables, cache)
    (file,) = cache.glob("policy-*.json")
    doc = json.loads(file.read_text())
    (prod,) = [s for s in doc["policy"]["fields"]["stages"]["tuple"] if s["fields"]["name"] == "prod"]
    prod["fields"]["require"]["fields"]["rules"] = {"tuple": []}  # an empty any_of: its constructor refuses it
    file.write_text(json.dumps(doc))
    policy = cached_policy(path, variables, cache)
    assert isinstance(policy.stage("prod").require, StoredRule)
    assert policy.stage("prod").require.kind == "any_of"
    assert policy == loaded
    prod["fields"]["require"] = {"class": "Popen", "fields": {"args": "true"}}  # not a policy class: a miss at once
    file.write_text(json.dumps(doc))
    assert not isinstance(cached_policy(path, variables, cache).stage("prod").require, StoredRule)
    assert cached_policy(path, variables, cache) == loaded


def test_a_replaced_key_file_is_seen(tmp_path: Path, keys: Keys) -> None:
    build = tmp_path / "build.pub"
    shutil.copy(keys["build"][0], build)
    path = write(tmp_path, POLICY.format(**{k: v[0] for k, v in keys.items()} | {"build": build}, slsa="x"))
    cache = tmp_path / "cache"
    assert _build(cached_policy(path, {}, cache)) == {keys["build"][1]}
    shutil.copy(keys["mallory"][0], build)  # same path, another key
    assert _build(cached_policy(path, {}, cache)) == {keys["mallory"][1]}
    build.unlink()  # gone: the key set's entry is unusable (its rules deny)
    (ref,) = next(s for s in cached_policy(path, {}, cache).keysets if s.name == "build").keys
    assert ref.fingerprint is None and ref.problem and "not found" in ref.problem
    shutil.copy(keys["build"][0], build)
    assert _build(cached_policy(path, {}, cache)) == {keys["build"][1]}


def test_a_key_added_to_or_removed_from_a_glob_is_seen(every_rule: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, variables = every_rule
    cache = tmp_path / "cache"
    before = _runners(cached_policy(path, variables, cache))
    assert len(before) == 1
    pub, fp = _key(tmp_path / "made", "second")
    shutil.copy(pub, tmp_path / "runners" / "second.pub")
    assert _runners(cached_policy(path, variables, cache)) == before | {fp}
    (tmp_path / "runners" / "second.pub").unlink()
    assert _runners(cached_policy(path, variables, cache)) == before


def test_an_edited_fleet_file_is_seen(every_rule: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, variables = every_rule
    cache = tmp_path / "cache"
    cached_policy(path, variables, cache)
    (tmp_path / "fleet.yaml").write_text("clusters: [[not a cluster\n")
    with pytest.raises(PolicyError) as exc:
        cached_policy(path, variables, cache)
    assert "fleet file" in exc.value.message
    (tmp_path / "fleet.yaml").unlink()
    with pytest.raises(PolicyError, match="does not exist"):
        cached_policy(path, variables, cache)


def test_an_edited_policy_or_other_variables_are_another_entry(tmp_path: Path, keys: Keys) -> None:
    text = POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa="x")
    path = write(tmp_path, text)
    cache = tmp_path / "cache"
    assert cached_policy(path, {}, cache).stage("prod").repository == "prod/{repository}"
    path.write_text(text.replace('"prod/{repository}"', '"live/{repository}"'))
    assert cached_policy(path, {}, cache).stage("prod").repository == "live/{repository}"
    cached_policy(path, {"root": "/elsewhere"}, cache)
    assert len(list(cache.glob("policy-*.json"))) == 3


def test_an_invalid_policy_is_never_cached(tmp_path: Path, keys: Keys) -> None:
    path = write(tmp_path, "version: 1\nstages: {dev: {from: build}}\n")
    cache = tmp_path / "cache"
    for _ in range(2):
        with pytest.raises(PolicyError, match="require"):
            cached_policy(path, {}, cache)
    assert not cache.exists() or not list(cache.glob("policy-*.json"))


def test_a_damaged_or_foreign_cache_file_is_loaded_again(tmp_path: Path, keys: Keys) -> None:
    path = write(tmp_path, POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa="x"))
    cache = tmp_path / "cache"
    want = cached_policy(path, {}, cache)
    (file,) = cache.glob("policy-*.json")
    for damaged in ("{not json", '{"schema": 1, "inputs": {"files": {}, "globs": {}}, "policy": {"class": "os"}}'):
        file.write_text(damaged)
        assert cached_policy(path, {}, cache) == want
    doc = json.loads(file.read_text())
    doc["policy"] = {"class": "Popen", "fields": {"args": "true"}}  # only the policy's own classes are built
    file.write_text(json.dumps(doc))
    assert cached_policy(path, {}, cache) == want


def test_an_unwritable_cache_directory_only_costs_the_speed_up(tmp_path: Path, keys: Keys) -> None:
    path = write(tmp_path, POLICY.format(**{k: v[0] for k, v in keys.items()}, slsa="x"))
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the directory would be")
    assert cached_policy(path, {}, blocker).stage_names == ("dev", "staging", "prod")


def test_a_project_sees_a_promoter_key_added_under_its_glob(tmp_path: Path, keys: Keys) -> None:
    """Through the promotion context, as ``resolve`` and ``promote`` open it: the policy is read
    from ``<state_dir>/cache`` the second time, and a key added to ``{root}/keys/promoters`` is
    trusted at once (a removed one no longer is)."""
    from builder.config import load_config
    from builder.promote.context import load_stage_policy

    (tmp_path / "builder.toml").write_text('registry = "127.0.0.1:5000"\nstate_dir = ".state"\n')
    (tmp_path / "policies").mkdir()
    (tmp_path / "keys" / "promoters").mkdir(parents=True)
    shutil.copy(keys["alice"][0], tmp_path / "keys" / "promoters" / "alice.pub")
    (tmp_path / "policies" / "default.yaml").write_text(
        textwrap.dedent("""\
            keys:
              promoters: [{file: "{root}/keys/promoters/*.pub"}]
            promoters: [promoters]
            stages:
              dev: {from: build, require: {unconditional: x}, rollback: {allowed: [promoters]}}
            """)
    )
    cfg = load_config(tmp_path, {})

    def trusted() -> set[str | None]:
        (promoters,) = load_stage_policy(cfg, None).promoters
        return {k.fingerprint for k in promoters.keys}

    assert trusted() == {keys["alice"][1]}
    assert list((tmp_path / ".state" / "cache").glob("policy-*.json"))
    assert trusted() == {keys["alice"][1]}  # from the cache
    shutil.copy(keys["mallory"][0], tmp_path / "keys" / "promoters" / "mallory.pub")
    assert trusted() == {keys["alice"][1], keys["mallory"][1]}
    (tmp_path / "keys" / "promoters" / "alice.pub").unlink()
    assert trusted() == {keys["mallory"][1]}


def test_a_key_replaced_between_two_reads_of_one_load_is_never_cached(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy naming one key file twice (``build`` and ``promoters``, as policies/default.yaml
    names ``keys/builder.pub``) binds the same key to both, even when another process replaces the
    file while the policy loads; the cached copy is then stale and is loaded again."""
    from builder.policy import loader
    from builder.signing.keys import PublicKey, parse_public_key

    build = tmp_path / "build.pub"
    shutil.copy(keys["build"][0], build)
    path = write(
        tmp_path,
        f"""\
version: 1
keys:
  build: [{{file: {build}}}]
  promoters: [{{file: {build}}}]
promoters: [promoters]
stages:
  dev: {{from: build, require: {{signature: {{signers: [build]}}}}, rollback: {{allowed: [promoters]}}}}
""",
    )
    parsed: list[str] = []

    def rotating(data: bytes, file: Path) -> PublicKey:  # the key rotated right after its first parse
        pub = parse_public_key(data, file)
        parsed.append(pub.fingerprint)
        if len(parsed) == 1:
            shutil.copy(keys["mallory"][0], tmp_path / "new.pub")
            (tmp_path / "new.pub").replace(build)
        return pub

    monkeypatch.setattr(loader, "parse_public_key", rotating)
    raced = cached_policy(path, {}, tmp_path / "cache")
    monkeypatch.undo()
    assert len(parsed) == 2
    fingerprints = {s.name: {k.fingerprint for k in s.keys} for s in raced.keysets}
    assert fingerprints["build"] == fingerprints["promoters"] == {keys["build"][1]}
    again = cached_policy(path, {}, tmp_path / "cache")
    assert again == load_policy(path, {})
    assert _build(again) == {keys["mallory"][1]}


def test_the_fleet_file_validated_is_the_one_hashed(
    every_rule: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An invalid fleet file made valid by another process right after the loader hashed it is
    refused (the hashed bytes are the ones validated), so no cache entry binds the invalid bytes'
    hash to a valid policy."""
    from builder.policy.inputs import PolicyInputs

    path, variables = every_rule
    fleet = tmp_path / "fleet.yaml"
    valid = fleet.read_text()
    fleet.write_text("clusters: [[not a cluster\n")
    read = PolicyInputs.read

    def fixed_after_read(self: PolicyInputs, file: Path) -> bytes:
        data = read(self, file)
        if str(file) == str(fleet):
            fleet.write_text(valid)
        return data

    monkeypatch.setattr(PolicyInputs, "read", fixed_after_read)
    with pytest.raises(PolicyError, match="fleet file"):
        cached_policy(path, variables, tmp_path / "cache")
    monkeypatch.undo()
    fleet.write_text("clusters: [[not a cluster\n")  # as it was hashed: no entry may say it is valid
    with pytest.raises(PolicyError, match="fleet file"):
        cached_policy(path, variables, tmp_path / "cache")


def test_a_key_or_fleet_file_is_read_only_up_to_the_size_limit(
    every_rule: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Key and fleet files are read as the loader reads YAML (at most ``yamldoc.MAX_BYTES``): a
    larger one, or an endless one (``/dev/zero``, a FIFO), is refused instead of read into memory,
    on a load and on each check of a cached copy's inputs."""
    from builder.policy.inputs import PolicyInputs, unchanged
    from builder.yamldoc import MAX_BYTES

    path, variables = every_rule
    fleet = tmp_path / "fleet.yaml"
    os.truncate(fleet, 4 * MAX_BYTES)  # the valid fleet, then zeros (a sparse file)
    inputs = PolicyInputs()
    with pytest.raises(OSError, match="larger than"):
        inputs.read(fleet)
    assert inputs.files == {str(fleet): None}
    assert unchanged(inputs.to_json())  # still too large: still unreadable
    with pytest.raises(PolicyError, match="larger than"):
        cached_policy(path, variables, tmp_path / "cache")
