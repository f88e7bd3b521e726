"""What a failed check step shows: the engine's real error, not its pull progress (builder.checks.device
PULL_NOISE), while the step's detail keeps the whole stderr; and the honest line `builder check` prints
before it runs (describe_run)."""

from __future__ import annotations

from pathlib import Path

from builder.checks.device import container_step, describe_run, meaningful_lines
from builder.checks.host.model import HostInfo
from builder.checks.image import ImageFacts
from builder.engine import ContainerResult

DATA = Path(__file__).resolve().parents[2] / "data" / "checks"
ENGINE_ERROR = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]]'


def recorded() -> str:
    text = (DATA / "gpus-all-after-pull.stderr").read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# "))


def test_recorded_pull_then_failure_keeps_only_the_error() -> None:
    assert meaningful_lines(recorded()) == [ENGINE_ERROR, "Run 'docker run --help' for more information"]


def test_every_pull_progress_shape_is_dropped_but_real_errors_stay() -> None:
    layer = "0123456789ab"
    noise = [
        "Unable to find image 'reg:5000/a/b@sha256:" + "1" * 64 + "' locally",
        "sha256:" + "1" * 64 + ": Pulling from a/b",
        "latest: Pulling from library/debian",
        *(
            f"{layer}: {s}"
            for s in (
                "Pulling fs layer",
                "Waiting",
                "Downloading",
                "Downloading [=====>        ]  1.2MB/30MB",
                "Verifying Checksum",
                "Download complete",
                "Extracting",
                "Extracting [==>   ]  2MB/30MB",
                "Pull complete",
                "Already exists",
            )
        ),
        "Digest: sha256:" + "2" * 64,
        "Status: Downloaded newer image for reg:5000/a/b:x",
        "Status: Image is up to date for reg:5000/a/b:x",
    ]
    real = [
        "Waiting for the GPU to become available failed: timeout",  # contains "Waiting", not a progress line
        "Error: Status: 500 from the registry",
        ENGINE_ERROR,
    ]
    assert meaningful_lines("\n".join([*noise[:5], real[0], *noise[5:], real[1], real[2]])) == real


def test_failed_step_error_is_meaningful_and_detail_keeps_everything() -> None:
    stderr = recorded()
    r = ContainerResult(125, "", stderr, 0.4, ("docker", "run", "--gpus", "all", "x"))
    step = container_step("container-start+nvidia-smi", r)
    assert not step.ok
    assert step.error is not None and step.error.startswith(ENGINE_ERROR)
    assert "Unable to find image" not in step.error and "Pulling" not in step.error
    assert step.detail["stderr"] == stderr  # the whole stderr for --json and the attestation
    ok = container_step("x", ContainerResult(0, "fine", "", 0.1, ("docker",)))
    assert ok.ok and ok.error is None
    only_noise = container_step("x", ContainerResult(1, "", "Digest: sha256:" + "3" * 64 + "\n", 0.1, ("docker",)))
    assert only_noise.error == "exit code 1"


def _facts(digest: str, platform_digest: str, accelerator: str = "cuda") -> ImageFacts:
    return ImageFacts(
        repository="demo/jax", digest=digest, platform_digest=platform_digest, platform="linux/amd64",
        accelerator=accelerator,
    )  # fmt: skip


def test_describe_run_says_what_runs_and_which_manifest() -> None:
    index, manifest = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    ref = f"reg:5000/demo/jax@{manifest}"
    line = describe_run(_facts(index, manifest), HostInfo(), ref)
    assert line == (
        f"running device checks (mode nvidia, GPUs requested with --gpus all) in fresh containers from {ref} "
        f"(the linux/amd64 platform manifest of image index {index})"
    )
    assert not line.startswith("+") and "docker run" not in line  # a description, not a pseudo-command
    cdi = describe_run(_facts(index, manifest), HostInfo(), ref, cdi=True)
    assert "--device nvidia.com/gpu=all (CDI)" in cdi
    single = describe_run(_facts(manifest, manifest, "cpu"), HostInfo(), ref)
    assert "(mode cpu, no devices requested)" in single and f"(image manifest {manifest}, linux/amd64)" in single
    amd = describe_run(_facts(manifest, manifest, "rocm"), HostInfo(), ref)
    assert "mode amd, GPUs requested with --device /dev/kfd --device /dev/dri" in amd
