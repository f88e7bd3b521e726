"""A loaded policy, validated once per content and read back from ``<state_dir>/cache`` by the
commands that only use it (``resolve``, ``status``, ``history``, ``promote``...): no YAML parser,
no pydantic schema, no key parsing on a hit.

``cached_policy(path, variables, cache_dir)`` returns what ``builder.policy.loader.load_policy``
returns for the same files. The cache file ``<cache_dir>/policy-<key>.json`` is keyed by a sha256
over the policy's path (as given and absolute), its bytes, the ``{variables}`` and builder's own
sources that shape a policy (``builder.cachefile.code_stamp``); inside it, the key files, key
globs and fleet files the loader read (``builder.policy.inputs``) are checked on every read: a
replaced key file, a key added to a glob's directory or an edited fleet file is a miss, so a stale
trust decision is never read. A miss loads and validates as before (PolicyError listing the
problems of an invalid policy, nothing cached) and writes the file atomically. ``builder policy
validate`` never reads the cache.

Shapes: the policy's frozen dataclasses (``Policy``, ``Stage``, every ``Rule``, ``KeySet``...) as
tagged JSON: ``{"class": name, "fields": {...}}`` for a dataclass (its init fields; the class must
be one of :data:`CLASSES`), else an object with one key: ``{"tuple": [...]}``,
``{"dict": {...}}``, ``{"path": str}``, ``{"timedelta": [days, seconds, microseconds]}``,
``{"datetime": iso}``, ``{"time": iso}``; lists, strings, numbers, booleans and null as they are.
Decoding calls each class's constructor, so the one model (``builder.policy.model``) and its
checks apply to what is read back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib
import json
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, cast

from builder.cachefile import code_stamp, read_private, write_json
from builder.policy.inputs import read_policy_text, unchanged
from builder.policy.rules import Rule

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from builder.policy.evidence import Context
    from builder.policy.model import Policy
    from builder.policy.results import RuleResult

#: Bumped when the stored shape changes.
CACHE_SCHEMA = 1
#: builder's sources whose change may change the policy loaded from the same files: the policy
#: package, key parsing (fingerprints), fleet validation (a fleet rule's file), YAML locations, and
#: the repository, registry and did-you-mean checks the loader calls, the GPU vendor names (models).
CODE = (
    "policy",
    "signing/keys.py",
    "signing/fingerprints.py",
    "signing/cosign_key.py",
    "compat",
    "yamldoc.py",
    "textfiles.py",
    "config.py",
    "registry/reference.py",
    "suggest.py",
    "predicates.py",
    "errors.py",
    "models",
)
#: Every class a cached policy may hold -> the module of ``builder.policy`` defining it.
CLASSES: dict[str, str] = {
    "Policy": "model",
    "Stage": "model",
    "RollbackRule": "model",
    "Retention": "model",
    "KeySet": "signers",
    "KeyRef": "signers",
    "Approver": "signers",
    "AllOf": "rules_groups",
    "AnyOf": "rules_groups",
    "Unconditional": "rules_groups",
    "SignatureRule": "rules_signature",
    "AttestationRule": "rules_evidence",
    "ProvenanceRule": "rules_evidence",
    "DeviceCheckRule": "rules_evidence",
    "FleetRule": "rules_evidence",
    "ApprovalRule": "rules_change",
    "ChangeTicketRule": "rules_change",
    "FreezeRule": "rules_change",
    "FreezeWindow": "rules_change",
    "SoakRule": "rules_change",
    "TestsRule": "rules_benchmark",
    "BenchmarkRule": "rules_benchmark",
    "CollectiveRule": "rules_benchmark",
    "VulnerabilitiesRule": "rules_vulnerabilities",
}


def cached_policy(path: Path, variables: Mapping[str, str], cache_dir: Path | None) -> Policy:
    """The policy ``path`` with ``variables`` (``load_policy``'s), from ``cache_dir`` when a
    cached copy's key and inputs match (``cache_dir`` None: no cache). Raises what
    ``load_policy`` raises: NotFoundError, PolicyError."""
    text = read_policy_text(path)
    if cache_dir is None:
        return _load(path, text, variables)[0]
    file = cache_dir / f"policy-{cache_key(path, text, variables)}.json"
    found = _read(file, lambda: _load(path, text, variables)[0])
    if found is not None:
        return found
    policy, inputs = _load(path, text, variables)
    try:
        doc = {"schema": CACHE_SCHEMA, "inputs": inputs, "policy": encode(policy)}
    except TypeError:  # a value this cache does not know how to store: loaded each time instead
        return policy
    write_json(file, doc)
    return policy


def cache_key(path: Path, text: str, variables: Mapping[str, str]) -> str:
    """The key of ``path`` holding ``text`` loaded with ``variables``: 40 hex digits of a sha256
    over the schema, builder's sources (:data:`CODE`) with Python's version and the installed
    libraries that parse, validate and read keys (``builder.cachefile.code_stamp``), the path as
    given and absolute, the variables and the text. Raises OSError when a source file vanishes
    while it is read."""
    h = hashlib.sha256(f"schema={CACHE_SCHEMA}\n{code_stamp(CODE)}".encode())
    h.update(json.dumps([str(path), str(Path(path).absolute()), sorted(variables.items())]).encode())
    h.update(b"\n")
    h.update(text.encode())
    return h.hexdigest()[:40]


def _load(path: Path, text: str, variables: Mapping[str, str]) -> tuple[Policy, dict[str, object]]:
    from builder.policy.loader import load_policy_text  # the YAML parser and schema: only on a miss

    policy, inputs = load_policy_text(path, text, variables)
    return policy, inputs.to_json()


def _read(file: Path, reload: Callable[[], Policy]) -> Policy | None:
    """The cached policy, or None when there is no usable file (missing, another schema, another
    shape, an input that changed since, or a file others could have written: then it is loaded again).
    Each stage's ``require`` rule is decoded on first use (:class:`StoredRule`; ``reload`` loads
    the policy from its file should that stored rule not decode)."""
    data = read_private(file, file.parent)
    try:
        doc = json.loads(data) if data is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != CACHE_SCHEMA or not unchanged(doc.get("inputs")):
        return None
    try:
        policy = decode(doc["policy"], lambda name, stored: StoredRule(stored, lambda: reload().stage(name).require))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    from builder.policy.model import Policy

    return policy if isinstance(policy, Policy) else None


def encode(value: object) -> object:
    """``value`` (a policy or any value inside one) as tagged JSON (module docstring). Raises
    TypeError for a value of another type (a class not in :data:`CLASSES` included)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if CLASSES.get(name) is None or _class(name) is not type(value):
            raise TypeError(f"not a policy class: {type(value).__qualname__}")
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return {"class": name, "fields": fields}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a mapping with keys other than text")
        return {"dict": {k: encode(v) for k, v in value.items()}}
    for kind, tag, write in _ENCODERS:
        if isinstance(value, kind):
            return {tag: write(value)}
    raise TypeError(f"cannot store a {type(value).__qualname__} in the policy cache")


def decode(value: object, defer: Callable[[str, object], Rule] | None = None) -> object:
    """The value :func:`encode` gave ``value`` for. ``defer(stage_name, stored)``, when given,
    makes the ``require`` rule of each ``Stage`` from its stored form instead of decoding it (the
    cache's :class:`StoredRule`). Raises TypeError / ValueError / KeyError for another shape (a
    class not in :data:`CLASSES` included)."""
    if isinstance(value, list):
        return [decode(v, defer) for v in value]
    if not isinstance(value, dict):
        return value
    if value.keys() == {"class", "fields"}:
        name, fields = value["class"], value["fields"]
        if not isinstance(name, str) or name not in CLASSES or not isinstance(fields, dict):
            raise TypeError(f"not a policy class: {name!r}")
        if defer is not None and name == "Stage":
            stage, stored = fields["name"], fields["require"]
            if not isinstance(stage, str) or not _stored_rule_shape(stored):
                raise TypeError(f"not a stored stage rule: {stored!r}")
            args = {k: defer(stage, v) if k == "require" else decode(v, defer) for k, v in fields.items()}
            return _class(name)(**args)
        return _class(name)(**{k: decode(v, defer) for k, v in fields.items()})
    if len(value) != 1:
        raise ValueError(f"a tagged value has one key, not {sorted(value)}")
    ((tag, body),) = value.items()
    if tag == "tuple" and isinstance(body, list):
        return tuple(decode(v, defer) for v in body)
    read = _DECODERS.get(tag)
    if read is None:
        raise ValueError(f"unknown tag {tag!r}")
    return read(body)


_ENCODERS: tuple[tuple[type, str, Callable[[Any], object]], ...] = (
    (tuple, "tuple", lambda v: [encode(x) for x in v]),
    (PurePath, "path", str),
    (dt.timedelta, "timedelta", lambda v: [v.days, v.seconds, v.microseconds]),
    (dt.datetime, "datetime", lambda v: v.isoformat()),
    (dt.time, "time", lambda v: v.isoformat()),
)
_DECODERS: dict[str, Callable[[Any], object]] = {
    "tuple": lambda body: tuple(decode(v) for v in body),
    "dict": lambda body: {k: decode(v) for k, v in body.items()},
    "path": Path,
    "timedelta": lambda body: dt.timedelta(*body),
    "datetime": dt.datetime.fromisoformat,
    "time": dt.time.fromisoformat,
}


def _class(name: str) -> type:
    return cast("type", getattr(importlib.import_module(f"builder.policy.{CLASSES[name]}"), name))


def _stored_rule_shape(value: object) -> bool:
    """Whether ``value`` is shaped like a stored rule (a tagged policy class whose name is in
    :data:`CLASSES`); what the class's constructor says of its fields is known when it is decoded."""
    return (
        isinstance(value, dict)
        and value.keys() == {"class", "fields"}
        and value["class"] in CLASSES
        and isinstance(value["fields"], dict)
    )


class StoredRule(Rule):
    """A stage's ``require`` rule as the cache stored it, decoded on first use: a command that
    uses one stage (``resolve``, ``promote --to``) builds only that stage's rules and imports only
    their modules. It behaves as the decoded rule (``evaluate``, ``walk``, ``kind``, ``location``;
    equal to and hashed as it). Read after the cache file's inputs were checked (key files, key
    globs, fleet files), from the same document; should the stored form not decode (a damaged
    file), the rule comes from ``reload`` (the policy loaded from its file) instead. Raises what
    ``reload`` raises (PolicyError, NotFoundError)."""

    def __init__(self, stored: object, reload: Callable[[], Rule]) -> None:  # no dataclass fields of its own
        object.__setattr__(self, "_stored", stored)
        object.__setattr__(self, "_reload", reload)
        object.__setattr__(self, "_rule", None)

    def rule(self) -> Rule:
        """The decoded rule (decoded once)."""
        rule = cast("Rule | None", self.__dict__["_rule"])
        if rule is None:
            try:
                decoded = decode(self.__dict__["_stored"])
            except (KeyError, TypeError, ValueError, AttributeError):
                decoded = None
            rule = decoded if isinstance(decoded, Rule) else cast("Callable[[], Rule]", self.__dict__["_reload"])()
            object.__setattr__(self, "_rule", rule)
        return rule

    @property
    def location(self) -> str:
        return self.rule().location

    @property
    def kind(self) -> str:
        return self.rule().kind

    def evaluate(self, ctx: Context) -> RuleResult:
        return self.rule().evaluate(ctx)

    def walk(self) -> Iterator[Rule]:
        return self.rule().walk()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRule):
            other = other.rule()
        return self.rule() == other

    def __hash__(self) -> int:
        return hash(self.rule())

    def __repr__(self) -> str:
        return repr(self.rule())
