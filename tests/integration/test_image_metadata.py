"""Labels and annotations as the ecosystem reads them: ``builder build`` of a real image, then
``skopeo inspect`` (the image config's labels, as GHCR and scanners read them) and
``docker buildx imagetools inspect --raw`` (manifest and index annotations).

The five labels docker/metadata-action sets (``created``, ``source``, ``url``, ``revision``,
``licenses``: https://github.com/docker/metadata-action#outputs), a fully qualified ``base.name``,
the project's own keys under ``io.github.builder-project.`` and the same keys as annotations."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from builder.build.tags import annotate_image
from builder.registry import RegistryClient
from builder.signing.sign import sign_image
from tests.conftest import ROOT, Cli, require_tool
from tests.integration.test_sign import new_signer
from tests.projects import cpu_matrix

SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # a commit id, as $GITHUB_SHA holds one
EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z


def project(root: Path, registry: str, repo: str, mirror_base: str) -> Path:
    (root / "matrices").mkdir(parents=True)
    (root / "images").mkdir()
    shutil.copytree(ROOT / "images" / "_common", root / "images" / "_common")
    shutil.copytree(ROOT / "images" / "tiny", root / "images" / "tiny")
    (root / "matrices" / "tiny.yaml").write_text(cpu_matrix("tiny", repo))
    (root / "builder.toml").write_text(f'registry = "{registry}"\nstate_dir = "state"\nimage_licenses = "Apache-2.0"\n')
    (root / "state").mkdir()
    reference, _, digest = mirror_base.partition("@")
    (root / "state" / "mirror.json").write_text(
        json.dumps({"debian:bookworm": {"reference": reference, "digest": digest}})
    )
    return root


def run_json(*cmd: str) -> Any:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def inspect_raw(docker: str, ref: str) -> dict[str, Any]:
    out = subprocess.run([docker, "buildx", "imagetools", "inspect", "--raw", ref], capture_output=True, check=True)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def cosign_verify(cosign_bin: str, pub: Path, ref: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cosign_bin, "verify", "--key", str(pub), "--insecure-ignore-tlog", "--allow-http-registry", ref],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_standard_labels_and_annotations(
    cli: Cli,
    registry_address: str,
    mirror_base: str,
    unique_repo: str,
    tmp_path: Path,
    docker_engine: str,
    cosign_bin: str,
) -> None:
    skopeo = require_tool("skopeo")
    docker = require_tool("docker")
    del docker_engine  # the build needs the daemon
    root = project(tmp_path / "p", registry_address, unique_repo, mirror_base)
    env = {
        "GITHUB_REPOSITORY": "acme/images",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_SHA": SHA,
        "SOURCE_DATE_EPOCH": str(EPOCH),
        "BUILDER_KEY_PASSWORD": "labels-test",
    }
    cli("keys", "generate", "--output-dir", str(tmp_path / "keys"), env=env)
    key, pub = tmp_path / "keys" / "builder.key", tmp_path / "keys" / "builder.pub"
    doc = cli("build", "--sign", "--key", str(key), "--json", cwd=root, env=env).json()
    (image,) = doc["images"]
    assert image["status"] == "built"
    ref = f"{image['reference']}@{image['digest']}"

    labels = run_json(skopeo, "inspect", "--tls-verify=false", f"docker://{ref}")["Labels"]
    assert labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"
    assert labels["org.opencontainers.image.source"] == "https://github.com/acme/images"
    assert labels["org.opencontainers.image.url"] == "https://github.com/acme/images"
    assert labels["org.opencontainers.image.revision"] == SHA
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.base.name"] == "docker.io/library/debian:bookworm"
    assert labels["io.github.builder-project.base.mirror-digest"] == mirror_base.partition("@")[2]
    assert labels["io.github.builder-project.variant"] == "tiny-cpu-py3.11-debian12"
    assert labels["io.github.builder-project.gpu-archs"] == "none"
    assert not any(k.startswith("io.builder.") for k in labels)

    index = inspect_raw(docker, ref)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    for key_name in ("created", "source", "revision", "licenses", "url", "base.name", "title"):
        assert f"org.opencontainers.image.{key_name}" in index["annotations"], key_name
    assert index["annotations"]["io.github.builder-project.variant"] == "tiny-cpu-py3.11-debian12"
    # the platform manifest carries the same keys, written by buildx itself (one --annotation flag
    # per level), so builder had nothing to write again
    log = Path(image["log"]).read_text()
    assert "--annotation index:io.github.builder-project.variant=" in log
    assert "--annotation manifest:io.github.builder-project.variant=" in log
    assert "annotations written" not in log
    (platform,) = [m for m in index["manifests"] if m.get("platform", {}).get("os") == "linux"]
    platform_ref = f"{image['reference']}@{platform['digest']}"
    manifest = inspect_raw(docker, platform_ref)
    assert manifest["annotations"] == index["annotations"]
    assert platform["size"] == len(
        subprocess.run(
            [docker, "buildx", "imagetools", "inspect", "--raw", platform_ref], capture_output=True, check=True
        ).stdout
    )
    # buildx's attestation manifest still names its platform manifest (the new digest)
    for att in (m for m in index["manifests"] if m.get("platform", {}).get("os") == "unknown"):
        assert att["annotations"]["vnd.docker.reference.digest"] == platform["digest"]
    # skopeo pulls the annotated platform manifest: every blob it names is there
    copied = subprocess.run(
        [skopeo, "copy", "--src-tls-verify=false", f"docker://{platform_ref}", f"oci:{tmp_path / 'oci'}:x"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert copied.returncode == 0, copied.stderr
    # the index and the final platform manifest are signed (what podman/CRI-O verify), nothing else
    assert cosign_verify(cosign_bin, pub, ref).returncode == 0
    signed_platform = cosign_verify(cosign_bin, pub, platform_ref)
    assert signed_platform.returncode == 0, signed_platform.stderr
    assert json.loads(signed_platform.stdout)[0]["critical"]["image"]["docker-manifest-digest"] == platform["digest"]
    # the variant and content tags name the annotated index
    for tag in ("tiny-cpu-py3.11-debian12", image["content_tag"]):
        assert inspect_raw(docker, f"{image['reference']}:{tag}")["annotations"] == index["annotations"]
    # the content tag is the cache: a second run rebuilds and rewrites nothing
    again = cli("build", "--sign", "--key", str(key), "--json", cwd=root, env=env).json()
    (same,) = again["images"]
    assert (same["status"], same["digest"]) == ("up-to-date", image["digest"])


def test_annotations_written_where_the_builder_dropped_them(
    registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path, docker_engine: str, cosign_bin: str
) -> None:
    """A real buildx image pushed without annotations (as a builder that does not export them leaves
    it): :func:`annotate_image` writes the platform manifest and the index again, before any tag
    and signature; skopeo pulls the result, the signatures cover the final digests, and a second
    pass changes nothing (the same digests)."""
    skopeo = require_tool("skopeo")
    docker = require_tool("docker")
    del docker_engine
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {mirror_base}\nLABEL purpose=annotate-test\n")
    pushed_ref = f"{registry_address}/{unique_repo}:pending"
    subprocess.run(
        [
            docker,
            "buildx",
            "build",
            "--provenance=true",
            "--output",
            f"type=image,name={pushed_ref},push=true",
            str(context),
        ],
        capture_output=True,
        check=True,
        timeout=300,
    )
    client = RegistryClient(registry_address, insecure=True)
    pushed = client.resolve(unique_repo, "pending")
    before = inspect_raw(docker, f"{registry_address}/{unique_repo}@{pushed}")
    (old_platform,) = [m for m in before["manifests"] if m["platform"]["os"] == "linux"]
    assert "annotations" not in inspect_raw(docker, f"{registry_address}/{unique_repo}@{old_platform['digest']}")

    wanted = (("org.opencontainers.image.revision", SHA), ("io.github.builder-project.variant", "annotate-test"))
    final = annotate_image(client, unique_repo, pushed, wanted)
    assert final != pushed
    assert annotate_image(client, unique_repo, final, wanted) == final  # nothing missing: nothing written
    assert annotate_image(client, unique_repo, pushed, wanted) == final  # the same push: the same digests

    index = inspect_raw(docker, f"{registry_address}/{unique_repo}@{final}")
    assert index["annotations"] == dict(wanted)
    (platform,) = [m for m in index["manifests"] if m["platform"]["os"] == "linux"]
    assert platform["digest"] != old_platform["digest"]
    platform_ref = f"{registry_address}/{unique_repo}@{platform['digest']}"
    raw = subprocess.run(
        [docker, "buildx", "imagetools", "inspect", "--raw", platform_ref], capture_output=True, check=True
    )
    manifest = json.loads(raw.stdout)
    assert manifest["annotations"] == dict(wanted) and platform["size"] == len(raw.stdout)
    old_manifest = inspect_raw(docker, f"{registry_address}/{unique_repo}@{old_platform['digest']}")
    assert (manifest["config"], manifest["layers"]) == (old_manifest["config"], old_manifest["layers"])
    (attestation,) = [m for m in index["manifests"] if m["platform"]["os"] == "unknown"]
    assert attestation["annotations"]["vnd.docker.reference.digest"] == platform["digest"]
    for ref in (f"{registry_address}/{unique_repo}@{final}", platform_ref):
        copied = subprocess.run(
            [skopeo, "copy", "--src-tls-verify=false", f"docker://{ref}", f"oci:{tmp_path / 'oci'}:{ref[-12:]}"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert copied.returncode == 0, copied.stderr

    sign_image(client, unique_repo, final, new_signer(tmp_path / "k"), lock_dir=tmp_path)
    pub = tmp_path / "k" / "builder.pub"
    for ref, digest in ((f"{registry_address}/{unique_repo}@{final}", final), (platform_ref, platform["digest"])):
        verified = cosign_verify(cosign_bin, pub, ref)
        assert verified.returncode == 0, verified.stderr
        assert json.loads(verified.stdout)[0]["critical"]["image"]["docker-manifest-digest"] == digest
    # the manifest buildx pushed is not what was signed
    assert cosign_verify(cosign_bin, pub, f"{registry_address}/{unique_repo}@{old_platform['digest']}").returncode != 0
