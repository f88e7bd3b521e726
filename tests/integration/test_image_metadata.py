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
from typing import TYPE_CHECKING, Any

from tests.conftest import ROOT, Cli, require_tool
from tests.projects import cpu_matrix

if TYPE_CHECKING:
    from pathlib import Path

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


def test_standard_labels_and_annotations(
    cli: Cli, registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path, docker_engine: str
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
    }
    doc = cli("build", "--no-sign", "--json", cwd=root, env=env).json()
    (image,) = doc["images"]
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

    raw = subprocess.run(
        [docker, "buildx", "imagetools", "inspect", "--raw", ref], capture_output=True, text=True, check=True
    ).stdout
    index = json.loads(raw)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    for key in ("created", "source", "revision", "licenses", "url", "base.name", "title"):
        assert f"org.opencontainers.image.{key}" in index["annotations"], key
    assert index["annotations"]["io.github.builder-project.variant"] == "tiny-cpu-py3.11-debian12"
    # the platform manifest and the attestation manifest are buildx's own, untouched
    platforms = [m for m in index["manifests"] if m.get("platform", {}).get("os") == "linux"]
    assert len(platforms) == 1 and all(m["mediaType"].endswith("manifest.v1+json") for m in index["manifests"])
    # the variant and content tags name the annotated index
    for tag in ("tiny-cpu-py3.11-debian12", image["content_tag"]):
        tagged = subprocess.run(
            [docker, "buildx", "imagetools", "inspect", "--raw", f"{image['reference']}:{tag}"],
            capture_output=True,
            check=True,
        ).stdout
        assert json.loads(tagged)["annotations"] == index["annotations"]
