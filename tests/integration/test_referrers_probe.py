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
from builder.promote import evidence as evidence_module
from builder.promote import referrers as referrers_module
from builder.promote.evidence import gather
from builder.promote.listing import TagLists
from builder.promote.location import Location
from builder.registry import Descriptor, RegistryClient
from tests.integration.test_promote_support import Clients, make_keys, push_image
from tests.projects import build_key_policy
from tests.referrers_api import PickyReferrersApiProxy, ReferrersApiProxy

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


def _batch_read(ctx: PromotionContext, registry: str, repo: str, subject: str) -> tuple[bool, ...]:
    """What a batch's plan reads (``builder.promote.plan``): the source known to hold ``subject``,
    a destination repository on the same registry, both named twice so the batch lists their tags
    (the listing makes the destination's read learn whether the registry has the referrers API)."""
    src, dst = Location(registry, repo), Location(registry, f"{repo}-rel")
    push_image(ctx.client(registry), dst.repository, "other", content=b"the destination exists")
    got = gather(ctx, subject, "dev", [src, dst], source_known=True, listed=TagLists(ctx, [src, dst, src, dst]))
    assert not got.evidence.problems or got.evidence.problems == ("no public key or identity given to verify with",)
    return got.present


@pytest.mark.parametrize("missing", [404, 400], ids=["harbor-2.10-404", "quay-3.12-400"])
def test_the_probe_asks_about_the_digest_being_promoted(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: int
) -> None:
    """A registry with the referrers API that refuses a digest it does not hold (Harbor before 2.11:
    404, goharbor/harbor#20014; Quay 3.12: 400) is learnt to have the API: the probe lists the
    digest being promoted (it asked about the SHA-256 of no bytes, and took Harbor's 404 for "no
    API" and Quay's 400 out of the plan as exit 7). The probe's listing is the source's answer:
    one referrers GET in all, none refused."""
    with PickyReferrersApiProxy(registry_address, missing=missing) as registry:
        subject, referrer = _with_a_referrer(RegistryClient(registry.address, insecure=True), unique_repo)
        monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())  # a new process
        ctx, _clients = _context(registry.address, tmp_path)
        src, dst = Location(registry.address, unique_repo), Location(registry.address, f"{unique_repo}-rel")
        push_image(ctx.client(registry.address), dst.repository, "other", content=b"the destination exists")
        listed = TagLists(ctx, [src, dst, src, dst])
        # the destination's read learns first (what a batch's first plans do): with the API, a
        # referrer may refer to an untagged digest, so the listing alone cannot answer
        assert evidence_module._nothing_listed(ctx, dst, subject, listed, src) is False
        assert not referrers_module.lacks_referrers_api(ctx, registry.address)
        found = referrers_module.referrers(ctx, src, subject)  # the source's read: the probe's listing
        assert [(d.digest, d.artifact_type) for d in found] == [(referrer, ARTIFACT)]
        assert (registry.referrers_gets, registry.refused) == (1, 0)


@pytest.mark.parametrize("missing", [404, 400], ids=["harbor-2.10-404", "quay-3.12-400"])
def test_a_batch_plan_on_such_a_registry_reads_the_api_once(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: int
) -> None:
    """The same through ``gather`` as a batch's plan calls it (source and destination read at once):
    one referrers GET in all, whichever read asks first, and no listing left kept afterwards."""
    with PickyReferrersApiProxy(registry_address, missing=missing) as registry:
        subject, _ = _with_a_referrer(RegistryClient(registry.address, insecure=True), unique_repo)
        monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())  # a new process
        ctx, _clients = _context(registry.address, tmp_path)
        assert _batch_read(ctx, registry.address, unique_repo, subject) == (True, False)
        assert not referrers_module.lacks_referrers_api(ctx, registry.address)
        assert (registry.referrers_gets, registry.refused) == (1, 0)
        assert not referrers_module._MEMORY.kept.get(ctx.client(registry.address))


def test_a_referrers_api_answering_neither_200_nor_404_leaves_it_unknown(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A referrers API that answers 400 (or any status but 200/404) is not taken as "no API" nor
    raised: that read uses the fallback index (the referrer is found), and the next read asks again."""
    with PickyReferrersApiProxy(registry_address, always=400) as registry:
        subject, referrer = _with_a_referrer(RegistryClient(registry.address, insecure=True), unique_repo)
        monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
        ctx, clients = _context(registry.address, tmp_path)
        loc = Location(registry.address, unique_repo)
        assert [d.digest for d in referrers_module.referrers(ctx, loc, subject)] == [referrer]
        assert clients.sent == 2 and registry.refused == 1  # the refused GET, the fallback index
        assert not referrers_module.lacks_referrers_api(ctx, registry.address)
        assert [d.digest for d in referrers_module.referrers(ctx, loc, subject)] == [referrer]
        assert clients.sent == 4 and registry.refused == 2
        assert _batch_read(ctx, registry.address, unique_repo, subject) == (True, False)  # no exit 7


def test_the_probe_of_a_registry_without_the_api_lists_the_digest_once(
    registry_address: str, unique_repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real registry (distribution 2.8: 404 for every referrers request): the batch's probe of
    the promoted digest finds no API, and the source's read then reads the fallback index only."""
    subject, _ = _with_a_referrer(RegistryClient(registry_address, insecure=True), unique_repo)
    monkeypatch.setattr(referrers_module, "_MEMORY", referrers_module._NoReferrersApi())
    ctx, _clients = _context(registry_address, tmp_path)
    assert _batch_read(ctx, registry_address, unique_repo, subject) == (True, False)
    assert referrers_module.lacks_referrers_api(ctx, registry_address)
