"""What an image needs from a host (read from its config) and the one-line cluster verdicts the
fleet rule and ``resolve --cluster`` show; the verdicts themselves come from builder.compat."""

from __future__ import annotations

from builder.promote.fleets import ImageNeeds, cluster_reason, image_requirements


def test_image_requirements_from_labels_and_env() -> None:
    cuda = {
        "config": {
            "Labels": {"io.builder.cuda.version": "12.8", "io.builder.gpu-archs": "sm_80,sm_90"},
            "Env": ["NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471", "PATH=/usr/bin"],
        }
    }
    assert image_requirements(cuda) == ImageNeeds(
        cuda="12.8",
        require="cuda>=12.8 brand=tesla,driver>=470,driver<471",
        rocm=None,
        image_archs=("sm_80", "sm_90"),
    )
    assert image_requirements(cuda).vendor == "nvidia"
    # an official CUDA image without builder labels: CUDA_VERSION from the environment
    official = {"config": {"Env": ["CUDA_VERSION=12.4.1"]}}
    assert image_requirements(official).cuda == "12.4"
    rocm = image_requirements({"config": {"Labels": {"io.builder.rocm.version": "6.4"}}})
    assert rocm.rocm == "6.4" and rocm.vendor == "amd"
    assert image_requirements({}) == ImageNeeds() and ImageNeeds().vendor is None


def test_cluster_reason_names_each_configuration_once() -> None:
    """A cluster's line: each (driver, GPU) with the cluster's verdict once, its reasons grouped;
    configurations with the same reasons merged; better configurations left out."""
    hosts = [
        ("driver 550.144.03, NVIDIA GeForce RTX 4090", "blocked", ["needs driver >= 570.26", "sm_89 not compiled"]),
        ("driver 550.127.08, NVIDIA H100", "blocked", ["needs driver >= 570.26"]),
        ("driver 550.90.07, NVIDIA H100", "blocked", ["needs driver >= 570.26", "needs driver >= 570.26"]),
        ("driver 580.65.06, NVIDIA H100", "ok", ["fine"]),
    ]
    line = cluster_reason("blocked", hosts)
    assert line == (
        "driver 550.144.03, NVIDIA GeForce RTX 4090 (blocked): needs driver >= 570.26; sm_89 not compiled"
        " | driver 550.127.08, NVIDIA H100 and driver 550.90.07, NVIDIA H100 (blocked): needs driver >= 570.26"
    )
    assert "580.65.06" not in line and line.count("GeForce") == 1
