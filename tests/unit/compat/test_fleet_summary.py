"""One fleet verdict (builder.compat.fleets.summarize): the worst over the clusters of the image's vendor;
other vendors' clusters are not-applicable, never blocked. `builder compat fleet` uses it (and
`builder check --static --fleet`, tested in tests/integration/test_check_human.py against a real image)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.cli import main
from builder.compat.fleets import image_vendor, summarize

ROOT = Path(__file__).resolve().parents[3]
DEMO = str(ROOT / "fleets" / "demo.yaml")
ROWS = [
    ("h100-train", "nvidia", "forward-compat"),
    ("a100-inference", "nvidia", "ok"),
    ("ws-4090", "nvidia", "blocked"),
    ("mi300x", "amd", "blocked"),
]


def test_cuda_image_worst_over_nvidia_clusters() -> None:
    s = summarize(ROWS, "nvidia")
    assert s.verdict == "blocked" and s.blocked
    assert s.runs_on == ("h100-train", "a100-inference")
    assert s.blocked_on == ("ws-4090",)
    assert s.not_applicable == ("mi300x",)
    assert dict(s.clusters)["mi300x"] == "not-applicable"
    assert s.reasons == ("cannot run on cluster(s): ws-4090",)
    header = s.header("demo")
    assert header.startswith("fleet demo: blocked") and "not applicable (nvidia image): mi300x" in header


def test_other_vendor_never_blocks_and_worst_applicable_wins() -> None:
    rows = [r for r in ROWS if r[0] != "ws-4090"]
    s = summarize(rows, "nvidia")
    assert s.verdict == "forward-compat" and not s.blocked  # worst of ok and forward-compat
    assert s.blocked_on == () and s.not_applicable == ("mi300x",)
    amd = summarize([("mi300x", "amd", "ok"), ("a100", "nvidia", "blocked")], "amd")
    assert amd.verdict == "ok" and amd.not_applicable == ("a100",)


def test_cpu_image_applies_everywhere_and_no_applicable_cluster_is_blocked() -> None:
    s = summarize(ROWS, image_vendor("cpu"))
    assert s.image_vendor == "none" and s.not_applicable == () and s.verdict == "blocked"
    assert summarize([(n, v, "ok") for n, v, _ in ROWS], None).verdict == "ok"
    none = summarize([("a100", "nvidia", "ok")], "amd")
    assert none.verdict == "blocked" and none.runs_on == () and "GPU vendor" in none.reasons[0]
    assert (image_vendor("cuda"), image_vendor("rocm"), image_vendor(None)) == ("nvidia", "amd", "none")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return (info.value.code if isinstance(info.value.code, int) else 0), out, err


def test_compat_fleet_cli_uses_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "compat", "fleet", DEMO, "--image-cuda", "12.8.1", "--json")
    doc = json.loads(out)
    assert code == 11 and doc["verdict"] == "blocked"
    assert doc["blocked_on"] == ["ws-4090"] and doc["not_applicable"] == ["mi300x"]
    assert {c["cluster"]: c["applies"] for c in doc["clusters"]}["mi300x"] is False
    # without the blocked cluster: the worst applicable verdict, exit 0 (the AMD cluster does not block)
    code, out, err = _run(
        capsys, "compat", "fleet", DEMO, "--image-cuda", "12.8.1", "--cluster", "h100-train", "--cluster", "mi300x"
    )
    assert code == 0, err
    assert "fleet demo: forward-compat  runs on: h100-train  not applicable (nvidia image): mi300x" in err
    # a ROCm image: the NVIDIA clusters do not apply
    code, out, _ = _run(capsys, "compat", "fleet", DEMO, "--rocm", "6.3", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "ok" and doc["runs_on"] == ["mi300x"]
