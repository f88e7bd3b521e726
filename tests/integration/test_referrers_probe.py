"""The referrers API probe of a promotion context sends one GET and uses its answer as the listing
(it sent the same GET twice: once to learn whether the registry has the API, once more to list).
Counted with ``RegistryClient.requests_sent`` and at the registry's door, against the real registry
behind :class:`tests.referrers_api.ReferrersApiProxy` (the referrers API of distribution-spec v1.1
over the real registry's data) and against the real registry alone (no API: one 404, then the
fallback tag)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from builder.ledger import open_ledger
from builder.policy import load_policy
from builder.promote import PromotionContext
from builder.promote import referrers as referrers_module
from builder.promote.location import Location
from builder.registry import Descriptor, RegistryClient
from tests.integration.test_promote_support import Clients, make_keys, push_image
from tests.projects import build_key_policy
from tests.referrers_api import ReferrersApiProxy

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

ARTIFACT = "application/vnd.dev.sigstore.bundle.v0.3+json"


def _context(registry: str, tmp: Path) -> tuple[PromotionContext, Clients]:
    state = tmp / "state"
    state.mkdir(exist_ok=True)
    keys = make_keys(state)
    policy = tmp / "policy.yaml"
    policy.write_text(build_key_policy(keys.pub("build"), "dev: {from: build, require: {unconditional: x}}"))
    clients = Clients()
    ctx = PromotionContext(
        policy=load_policy(policy, {"state_dir": str(state)}),
        registry=registry,
        clients=clients,
        lock_dir=state / "locks",
        ledger=open_ledger(state / "ledger.sqlite"),
        signer=keys.signer("build"),
    )
    return ctx, clients


def _with_a_referrer(client: RegistryClient, repo: str) -> tuple[str, str]:
    """A subject image and one referrer manifest of it, listed in its fallback index (real writes)."""
    subject = push_image(client, repo, "subject", content=b"the subject")
    referrer = push_image(client, repo, "referrer", content=b"a referrer")
    raw = client.get_manifest(repo, referrer).raw
    client.add_referrer_to_fallback_index(
        repo,
        subject,
        Descriptor(client.get_manifest(repo, referrer).media_type, referrer, len(raw), artifact_type=ARTIFACT),
    )
    return subject, referrer


def test_the_probe_of_a_registry_with_the_api_is_the_listing(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ReferrersApiProxy(registry_address) as registry:
        subject, referrer = _with_a_referrer(RegistryClient(registry.address, insecure=True), unique_repo)
        monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())  # a new process
        ctx, clients = _context(registry.address, tmp_path)
        listed = referrers_module.referrers(ctx, Location(registry.address, unique_repo), subject)
        assert [(d.digest, d.artifact_type) for d in listed] == [(referrer, ARTIFACT)]
        assert registry.referrers_gets == 1 and clients.sent == 1, (registry.referrers_gets, clients.sent)
        assert not referrers_module.lacks_referrers_api(ctx, registry.address)
        again = referrers_module.referrers(ctx, Location(registry.address, unique_repo), subject)  # API known
        assert again == listed and registry.referrers_gets == 2 and clients.sent == 2


def test_the_probe_of_a_registry_without_the_api_falls_back_once(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subject, referrer = _with_a_referrer(RegistryClient(registry_address, insecure=True), unique_repo)
    monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
    ctx, clients = _context(registry_address, tmp_path)
    listed = referrers_module.referrers(ctx, Location(registry_address, unique_repo), subject)
    assert [d.digest for d in listed] == [referrer]
    assert clients.sent == 2, clients.sent  # the probe (404: distribution 2.8), the fallback index
    assert referrers_module.lacks_referrers_api(ctx, registry_address)
    referrers_module.referrers(ctx, Location(registry_address, unique_repo), subject)
    assert clients.sent == 3, clients.sent  # known: the fallback index only


def test_the_clients_listing_filters_through_the_api_in_one_request(registry_address: str, unique_repo: str) -> None:
    with ReferrersApiProxy(registry_address) as registry:
        client = RegistryClient(registry.address, insecure=True)
        subject, referrer = _with_a_referrer(client, unique_repo)
        before = client.requests_sent
        assert [d.digest for d in client.referrers(unique_repo, subject, ARTIFACT)] == [referrer]
        assert client.referrers(unique_repo, subject, "application/other") == []
        assert client.requests_sent - before == 2 and registry.referrers_gets == 2
