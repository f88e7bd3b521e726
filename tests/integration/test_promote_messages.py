"""Messages that fit the case, through ``builder promote`` as a user runs it: a denial where only
soak time is left says when the promotion will be allowed (not "provide the missing evidence"),
and a key is shown by the name the policy gives it and a short fingerprint that cannot be taken
for an image digest."""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

import pytest

from builder.errors import PolicyDeniedError
from builder.predicates import DEVICE_CHECK_V1
from builder.registry import RegistryClient
from builder.signing.attest import attest_image
from builder.signing.fingerprints import short_fingerprint
from builder.signing.keys import load_signer
from tests.conftest import unset_builder_settings
from tests.integration.test_promote_cli import VARIANT, _build, _project
from tests.integration.test_promote_support import device_check

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli, CliResult

pytestmark = pytest.mark.integration

POLICY = """\
version: 1
keys:
  build: [{{file: {keys}/build/builder.pub}}]
  check-runners: [{{file: {keys}/check-runner/builder.pub}}]
promoters: [build]
stages:
  dev:
    from: build
    require:
      unconditional: dev takes every build
  staging:
    from: dev
    require:
      soak: {{min: 6h, signers: [build]}}
  qa:
    from: dev
    require:
      all_of:
        - soak: {{min: 6h, signers: [build]}}
        - device_check: {{signers: [check-runners], vendors: [nvidia]}}
"""


@pytest.fixture
def project(tmp_path: Path, registry_address: str, unique_repo: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    unset_builder_settings(monkeypatch)
    root = _project(tmp_path / "project", registry_address, unique_repo)
    keys = root / "state" / "keys"
    (root / "policies" / "default.yaml").write_text(textwrap.dedent(POLICY.format(keys=keys)))
    return root


def _in(cli: Cli, project: Path, *args: str, code: int = 0) -> CliResult:
    return cli(*args, code=code, env={"HOME": str(project), "COLUMNS": "400"}, cwd=project)


def test_a_denial_where_only_soak_time_is_left_says_when(
    cli: Cli, project: Path, registry_address: str, unique_repo: str
) -> None:
    digest = _build(project, registry_address, unique_repo, b"soak hint")
    _in(cli, project, "promote", VARIANT, "--to", "dev", "--confirm")

    error = _in(cli, project, "promote", VARIANT, "--to", "staging", "--confirm", "--json", code=31).json()["error"]
    assert error["kind"] == "policy-denied"
    assert re.search(r"only soak time is left: allowed from \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in 5h59m", error["hint"])
    assert "missing evidence" not in error["hint"]
    human = _in(cli, project, "promote", VARIANT, "--to", "staging", code=31).stderr
    assert "only soak time is left" in human and "missing evidence" not in human and "None" not in human

    # soak and a missing device check: more than time is missing, the usual hint
    error = _in(cli, project, "promote", VARIANT, "--to", "qa", "--confirm", "--json", code=31).json()["error"]
    assert error["hint"] == PolicyDeniedError.default_hint

    # a device check by the check runner on the wrong vendor: the key by its policy name
    runner = load_signer(project / "state" / "keys" / "check-runner" / "builder.key", None)
    client = RegistryClient(registry_address, insecure=True)
    predicate = device_check("none", digest=digest)
    attest_image(client, unique_repo, digest, DEVICE_CHECK_V1, predicate, runner, lock_dir=project / "state" / "locks")
    human = _in(cli, project, "promote", VARIANT, "--to", "qa", code=31).stderr
    named = f"device check by check-runners ({short_fingerprint(runner.fingerprint)}) ran on vendor none"
    assert named in human, human
    assert short_fingerprint(runner.fingerprint).startswith("SHA256:") and runner.fingerprint[:19] not in human
