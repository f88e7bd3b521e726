"""What a newcomer hit in a fresh clone (issue: newcomer report), against the real registry:

- ``sbom -o`` / ``report --svg`` into a missing folder create it; a file in the way is exit 8
  naming the path (was a FileNotFoundError traceback);
- ``bases update --matrix M`` changes only M's entries of bases.lock.json (it rewrote the lock
  to ``"bases": {}``, dropping every other matrix's pinned entry).
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from typing import TYPE_CHECKING

import pytest

from builder.registry import OCI_MANIFEST, RegistryClient, canonical_json, sha256_digest
from builder.registry.manifest import OCI_INDEX
from tests.conftest import ROOT
from tests.integration.test_build_bases import CONFIG, LAYER, push_base

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Cli

DEMO_TAG = "jax0.7-cpu-py3.11-debian12"
UBUNTU_PINNED = "sha256:" + "1" * 64
CDX = "https://cyclonedx.org/bom"


def project(root: Path, registry: str, matrices: dict[str, str] | None = None) -> Path:
    (root / "matrices").mkdir(parents=True, exist_ok=True)
    for name, text in (matrices or {}).items():
        (root / "matrices" / name).write_text(text)
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\n')
    return root


@pytest.fixture
def demo(demo_cpu_image: str) -> str:
    return demo_cpu_image


def test_sbom_output_into_a_missing_folder_creates_it(
    cli: Cli, tmp_path: Path, registry_address: str, demo: str
) -> None:
    root = project(tmp_path / "p", registry_address)
    out = tmp_path / "new" / "dir" / "sbom.json"
    cli("-C", str(root), "sbom", demo, "-o", str(out))
    assert json.loads(out.read_text())["bomFormat"] == "CycloneDX"


def test_sbom_output_that_cannot_be_written_is_exit_8(
    cli: Cli, tmp_path: Path, registry_address: str, demo: str
) -> None:
    root = project(tmp_path / "p", registry_address)
    (tmp_path / "file").write_text("x")
    result = cli("-C", str(root), "sbom", demo, "-o", str(tmp_path / "file" / "sbom.json"), code=8)
    assert f"{tmp_path / 'file' / 'sbom.json'}" in result.stderr and "Traceback" not in result.stderr


def test_report_svg_that_cannot_be_written_is_exit_8(cli: Cli, tmp_path: Path, registry_address: str) -> None:
    root = project(tmp_path / "p", registry_address)
    shutil.rmtree(root / "matrices")
    for folder in ("policies", "fleets", "matrices"):
        shutil.copytree(ROOT / folder, root / folder)
    (tmp_path / "file").write_text("x")
    svg = tmp_path / "file" / "chart.svg"
    result = cli("-C", str(root), "report", DEMO_TAG, "--svg", str(svg), code=8)
    assert str(svg) in result.stderr and "Traceback" not in result.stderr
    made = tmp_path / "new" / "chart.svg"
    cli("-C", str(root), "report", DEMO_TAG, "--svg", str(made))
    assert made.read_text().startswith("<svg")


def matrix(base: str) -> str:
    return (
        "family: tiny\nrepository: nu1/out\n"
        "axes:\n  accelerator:\n    - {kind: cpu}\n"
        "  framework:\n    name: none\n    versions: ['0']\n"
        "  python: ['3.12']\n  os: [ubuntu24.04]\n"
        f"base:\n  cpu: '{base}'\n"
    )


def test_bases_update_of_one_matrix_keeps_the_other_matrices_entries(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    client = RegistryClient(registry_address, insecure=True)
    digest = push_base(client, f"{unique_repo}/plain", "1", ["PATH=/bin"])
    base = f"{registry_address}/{unique_repo}/plain:1"
    root = project(tmp_path, registry_address, {"a.yaml": matrix(base), "b.yaml": matrix("ubuntu:24.04")})
    pinned = {"digest": UBUNTU_PINNED, "pulled_from": "ubuntu:24.04"}
    (root / "bases.lock.json").write_text(json.dumps({"version": 1, "bases": {"ubuntu:24.04": pinned}}))

    cli("-C", str(root), "bases", "update", "--matrix", str(root / "matrices" / "a.yaml"))

    bases = json.loads((root / "bases.lock.json").read_text())["bases"]
    assert bases["ubuntu:24.04"] == pinned  # the other matrix's entry stays as it was
    assert bases[base]["digest"] == digest  # the named matrix's base is pinned


# --platform: a platform the image lacks is exit 8 listing its platforms (it silently read amd64);
# a malformed one is a usage error (exit 2), for every command taking the shared option.


def push_image(client: RegistryClient, repo: str, tag: str, architecture: str) -> str:
    """A one-layer image (a real tar holding /etc/os-release) for ``linux/<architecture>``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
        info = tarfile.TarInfo("etc/os-release")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = buf.getvalue()
    client.put_blob(repo, layer)
    config = canonical_json(
        {
            "architecture": architecture,
            "os": "linux",
            "config": {"Env": ["PATH=/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(layer)]},
        }
    )
    client.put_blob(repo, config)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG, "digest": sha256_digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER, "digest": sha256_digest(layer), "size": len(layer)}],
        }
    )
    return client.put_manifest(repo, tag, manifest, OCI_MANIFEST)


def amd64_only(registry_address: str, unique_repo: str) -> str:
    client = RegistryClient(registry_address, insecure=True)
    push_image(client, f"{unique_repo}/img", "1", "amd64")
    return f"{registry_address}/{unique_repo}/img:1"


def arm64_index(registry_address: str, unique_repo: str) -> str:
    """An index holding only a linux/arm64/v8 image."""
    client = RegistryClient(registry_address, insecure=True)
    repo = f"{unique_repo}/multi"
    digest = push_image(client, repo, "arm", "arm64")
    size = client.get_manifest(repo, digest).size
    index = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": size,
                    "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
                }
            ],
        }
    )
    client.put_manifest(repo, "index", index, OCI_INDEX)
    return f"{registry_address}/{repo}:index"


@pytest.mark.parametrize("command", [("inspect",), ("sbom",), ("check", "--static", "--fleet", "demo")])
def test_a_platform_the_image_lacks_is_exit_8_listing_its_platforms(
    cli: Cli, registry_address: str, unique_repo: str, command: tuple[str, ...]
) -> None:
    ref = amd64_only(registry_address, unique_repo)
    name, *rest = command
    err = cli(name, ref, *rest, "--platform", "linux/arm64", cwd=ROOT, code=8).stderr
    assert "no linux/arm64 image" in err and "linux/amd64" in err and "Traceback" not in err
    doc = cli(name, ref, *rest, "--platform", "linux/arm64", "--json", cwd=ROOT, code=8).json()["error"]
    assert doc["details"]["platforms"] == ["linux/amd64"]


def test_an_index_gives_the_platform_asked_for_or_lists_its_platforms(
    cli: Cli, registry_address: str, unique_repo: str
) -> None:
    ref = arm64_index(registry_address, unique_repo)
    doc = cli("inspect", ref, "--platform", "linux/arm64", "--json", cwd=ROOT).json()
    assert doc["platform"] == "linux/arm64/v8"  # linux/arm64 is linux/arm64/v8
    assert cli("inspect", ref, "--json", cwd=ROOT).json()["platform"] == "linux/arm64/v8"  # its only one
    err = cli("inspect", ref, "--platform", "linux/amd64", cwd=ROOT, code=8).stderr
    assert "no linux/amd64 image (its platforms: linux/arm64/v8)" in err


@pytest.mark.parametrize(
    "command", [("inspect", "REF"), ("sbom", "REF"), ("diff", "REF", "REF"), ("compat", "cuda", "12.8")]
)
def test_a_malformed_platform_is_a_usage_error(cli: Cli, command: tuple[str, ...]) -> None:
    err = cli(*command, "--platform", "garbage", cwd=ROOT, code=2).stderr
    assert "'garbage' is not os/arch[/variant]" in err


# A variant id as REF names the variant's repository and moving tag for every command, as `check`
# always read it (App.image_reference); never `:latest`, never "neither a tag nor a digest".


def test_every_command_reads_a_variant_id_as_its_moving_tag(cli: Cli, tmp_path: Path, demo: str) -> None:
    digest = cli("inspect", demo, "--json", cwd=ROOT).json()["digest"]
    assert cli("inspect", DEMO_TAG, "--json", cwd=ROOT).json()["digest"] == digest
    assert digest in cli("sbom", DEMO_TAG, "--json", cwd=ROOT).json()["reference"]
    assert digest in cli("diff", DEMO_TAG, demo, "--json", cwd=ROOT).json()["a"]
    checked = cli("check", DEMO_TAG, "--static", "--fleet", "demo", "--json", cwd=ROOT).json()
    assert checked["image"]["digest"] == digest
    # verify resolves it too: what fails is the key given, not the reference
    verify = cli("verify", DEMO_TAG, "--key", str(ROOT / "no-such.pub"), cwd=ROOT, code=None).stderr
    assert "neither a tag nor a digest" not in verify and "no-such.pub" in verify
    # approve --strict: the variant's moving tag is a tag (refused as one, not as "no tag")
    cli("keys", "generate", "--no-password", "--output-dir", str(tmp_path / "keys"), cwd=ROOT)
    key = str(tmp_path / "keys" / "builder.key")
    strict = cli("approve", DEMO_TAG, "--stage", "prod", "--key", key, "--unlisted", "--strict", cwd=ROOT, code=2)
    assert f"{demo} is a tag" in strict.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("inspect",),
        ("sbom",),
        ("verify", "--key", "x.pub"),
        ("diff", "x:1"),
        ("approve", "--stage", "prod", "--key", "x.key", "--unlisted"),
    ],
)
def test_an_unknown_variant_id_is_exit_8_for_every_command(cli: Cli, command: tuple[str, ...]) -> None:
    name, *rest = command
    err = cli(name, "no-such-variant", *rest, cwd=ROOT, code=8).stderr
    assert "no variant 'no-such-variant' in the matrices" in err and ":latest" not in err


# `sbom --key` twice adds one CycloneDX attestation (the BOM of the same image is the same
# statement); `verify --attestation TYPE` on a validly signed image names the missing type and the
# types that exist instead of "do not use this digest".


def test_sbom_key_twice_attaches_once_and_a_missing_type_is_named(
    cli: Cli, tmp_path: Path, registry_address: str, unique_repo: str
) -> None:
    ref = amd64_only(registry_address, unique_repo)
    keys = tmp_path / "keys"
    cli("keys", "generate", "--no-password", "--output-dir", str(keys), cwd=ROOT)
    key, pub = str(keys / "builder.key"), str(keys / "builder.pub")
    first = cli("sbom", ref, "--key", key, "--json", cwd=ROOT).json()
    again = cli("sbom", ref, "--key", key, "--json", cwd=ROOT).json()
    assert (first["appended"], again["appended"]) == (True, False)
    assert first["bom"]["serialNumber"] == again["bom"]["serialNumber"]
    verified = cli("verify", ref, "--key", pub, "--attestations-only", "--attestation", CDX, "--json", cwd=ROOT)
    items = [i for i in verified.json()["items"] if i["predicate_type"] == CDX]
    assert len(items) == 1 and items[0]["ok"]

    cli("sign", ref, "--key", key, cwd=ROOT)
    nope = "https://example.com/nope"
    err = cli("verify", ref, "--key", pub, "--attestation", nope, cwd=ROOT, code=18).stderr
    hint = err[err.index("hint:") :]
    assert "the signature is valid" in hint and nope in hint and CDX in hint
    assert "do not use this digest" not in err
    error = cli("verify", ref, "--key", pub, "--attestation", nope, "--json", cwd=ROOT, code=18).json()["error"]
    assert error["details"]["missing_predicate_types"] == [nope]
