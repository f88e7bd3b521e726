"""``builder policy validate``: every problem of the policy files, with its location.

Each file is loaded with :func:`builder.policy.loader.check_policy`, which collects every problem
(:class:`builder.yamldoc.Problem`, the one shape of validation problems of matrices, policies and
fleets) instead of stopping at the first. Pure apart from reading the files.

Errors: ``PolicyError`` (30) when there is no policy file to validate, or (from
:meth:`PolicyValidation.raise_for_problems`) when a file has problems of severity ``error``
(``details['files']``: each file's :class:`PolicyFileDocument`); ``NotFoundError`` (8) for a
named file that does not exist.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from builder.error_documents import ProblemDocument
from builder.errors import PolicyError
from builder.policy.loader import check_policy
from builder.yamldoc import Problem

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from builder.policy.model import Policy


class PolicyFileDocument(TypedDict):
    """One policy file: ``valid`` when it loads with no error, its ``stages`` in order (empty when
    it does not load) and every problem, warnings included."""

    file: str
    valid: bool
    stages: list[str]
    problems: list[ProblemDocument]


class PolicyValidateDocument(TypedDict):
    """``builder policy validate --json``: one entry per file, in the order validated."""

    files: list[PolicyFileDocument]


@dataclasses.dataclass(frozen=True)
class PolicyFileCheck:
    """One file's result: the loaded ``policy`` (None when it has errors) and every problem."""

    file: Path
    policy: Policy | None
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> int:
        """How many problems have severity ``error``."""
        return sum(1 for p in self.problems if p.severity == "error")

    @property
    def valid(self) -> bool:
        return self.policy is not None and self.errors == 0

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(self.policy.stage_names) if self.policy is not None else ()

    def to_json(self) -> PolicyFileDocument:
        return {
            "file": str(self.file),
            "valid": self.valid,
            "stages": list(self.stages),
            "problems": [p.to_json() for p in self.problems],
        }


@dataclasses.dataclass(frozen=True)
class PolicyValidation:
    """Every file validated, in order."""

    files: tuple[PolicyFileCheck, ...]

    @property
    def errors(self) -> int:
        """Problems of severity ``error`` over all files."""
        return sum(f.errors for f in self.files)

    def to_json(self) -> PolicyValidateDocument:
        return {"files": [f.to_json() for f in self.files]}

    def raise_for_problems(self) -> None:
        """PolicyError (30) naming how many errors in how many files, with every file's document
        under ``details['files']``; nothing when no file has an error (warnings do not fail)."""
        if self.errors:
            raise PolicyError(
                f"{self.errors} problem(s) in {len(self.files)} policy file(s)",
                files=[f.to_json() for f in self.files],
            )


def policy_files(policies_dir: Path) -> list[Path]:
    """The ``*.yaml`` / ``*.yml`` files of ``policies_dir``, sorted. Raises PolicyError (30) when
    there is none."""
    paths = sorted([*policies_dir.glob("*.yaml"), *policies_dir.glob("*.yml")])
    if not paths:
        raise PolicyError(f"no policy files in {policies_dir}", hint="write policies/default.yaml")
    return paths


def validate_policies(files: Sequence[Path], variables: Mapping[str, str]) -> PolicyValidation:
    """Check each of ``files`` (``variables``: values for ``${name}`` in key and fleet paths).
    Never raises for problems inside a file (they are in the result); NotFoundError (8) for a
    file that does not exist, PolicyError (30) for one that cannot be read."""
    checked = []
    for path in files:
        policy, problems = check_policy(path, variables)
        more = shared_key_warnings(policy, str(path)) if policy is not None else []
        checked.append(PolicyFileCheck(path, policy, (*problems, *more)))
    return PolicyValidation(tuple(checked))


def shared_key_warnings(policy: Policy, file: str) -> list[Problem]:
    """A warning at each ``signature`` rule whose signers share a key with the policy's
    ``promoters``: builder marks the signature a promotion writes (its signed payload names the
    promotion role, ``builder.labels.PROMOTION_ROLE``) and never counts it for a ``signature``
    rule, but other verifiers cannot tell the two apart by key (``cosign verify --key``;
    containers/image ``signedBy``, which checks the key and identity only:
    https://github.com/containers/image/blob/main/docs/containers-policy.json.5.md). One warning
    per key; none when no key is shared."""
    from builder.policy.rules_signature import SignatureRule
    from builder.signing.fingerprints import short_fingerprint

    promoting = {k.fingerprint: ks.name for ks in policy.promoters for k in ks.keys if k.fingerprint}
    out: list[Problem] = []
    seen: set[str] = set()
    for stage in policy.stages:
        for rule in stage.require.walk():
            if not isinstance(rule, SignatureRule):
                continue
            for ks in rule.signers:
                for k in ks.keys:
                    if k.fingerprint is None or k.fingerprint not in promoting or k.fingerprint in seen:
                        continue
                    seen.add(k.fingerprint)
                    name, line, col = _split_location(rule.location, file)
                    key = f"{k.file or 'key'} ({short_fingerprint(k.fingerprint)})"
                    out.append(
                        Problem(
                            name,
                            line,
                            col,
                            f"stages.{stage.name}.require",
                            f"key {key} signs builds (key set '{ks.name}', named by this signature rule) and "
                            f"promotions (promoters '{promoting[k.fingerprint]}'): builder never counts a promotion "
                            "signature for a signature rule, but cosign and containers/image cannot tell the two "
                            "apart; give promoters their own key (`builder keys generate --output-dir DIR`)",
                            "warning",
                        )
                    )
    return out


def _split_location(location: str, file: str) -> tuple[str, int, int]:
    """``file:line:col`` as (file, line, col); ``file`` with 0, 0 when it names no line."""
    head, _, col = location.rpartition(":")
    name, _, line = head.rpartition(":")
    if name and line.isdigit() and col.isdigit():
        return name, int(line), int(col)
    return file, 0, 0
