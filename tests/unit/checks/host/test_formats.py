"""Host tool formats beyond nvidia-smi's table: real recorded outputs in tests/data/host-formats/ (source URL on
line 1 of each file), read through `builder --json hostinfo --from FILE` as a user would.

Each case asserts the GPU count, the names, and that no driver version is made of garbage (an absent or
unreadable version is null, never text such as amd-smi's cut-off ``Linuxver``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.checks.host.accumulator import read_version
from builder.checks.host.reading import load_hostinfo, parse_text
from builder.compat import amd_device, amd_device_from_uuid, normalize_gfx
from builder.errors import HostProbeError

if TYPE_CHECKING:
    from tests.conftest import Cli

DATA = Path(__file__).resolve().parents[3] / "data" / "host-formats"

# file, vendor, driver, gpu names (in order), gfx targets or compute capabilities (None: not printed)
CASES: list[tuple[str, str, str | None, list[str | None], list[str | None]]] = [
    ("nvidia-container-cli-01", "nvidia", "390.87", ["GeForce GTX 1080 with Max-Q Design"], ["6.1"]),
    ("nvidia-container-cli-02", "nvidia", "384.130", ["GeForce 920M"], ["3.5"]),
    ("nvidia-container-cli-03", "nvidia", None, ["Xavier"], ["7.2"]),  # Jetson: "NVRM version: (null)"
    ("nvidia-smi-noheader-01", "nvidia", None, ["NVIDIA H100L-2-24C"], [None]),
    ("nvidia-smi-noheader-02", "nvidia", None, [None], [None]),  # only memory/temperature were queried
    ("rocm-smi-json-01", "amd", None, ["AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"], ["gfx90a"]),  # gfx9010
    ("rocm-smi-json-02", "amd", None, ["Radeon RX 7900 XT"], ["gfx1100"]),
    ("rocm-smi-csv-01", "amd", None, ["Radeon RX 7900 XT"], ["gfx1100"]),
    ("rocm-smi-productname-01", "amd", None, ["AMD Radeon R9 FURY / NANO Series"], [None]),
    ("rocm-smi-productname-02", "amd", None, ["AMD Instinct MI100"], ["gfx908"]),  # "Card series: 0x738c"
    ("amd-smi-table-01", "amd", None, ["AMD Radeon RX 9070 XT"], ["gfx1201"]),  # "amdgpu version: Linuxver"
    ("amd-smi-table-02", "amd", "6.16.6", ["AMD Instinct MI300X VF"], ["gfx942"]),
    ("amd-smi-table-03", "amd", None, ["AMD Instinct MI325X"], ["gfx942"]),
    ("amd-smi-static-01", "amd", "6.18.3", ["AMD Instinct MI350X"], ["gfx950"]),
    ("amd-smi-static-json-01", "amd", None, ["AMD Radeon RX 7800 XT"], ["gfx1101"]),  # cut-off paste
    ("amd-smi-list-static-01", "amd", None, ["AMD Instinct MI210"], ["gfx90a"]),  # an AI NIC is no GPU
    ("amd-smi-list-01", "amd", None, ["AMD Instinct MI210"], ["gfx90a"]),  # no name printed: the UUID's device id
    ("amd-smi-list-02", "amd", None, ["AMD Instinct MI300X"] * 3, ["gfx942"] * 3),
    ("rocm-smi-legacy-igpu-01", "amd", None, [None], [None]),  # Intel iGPU row 0 is not counted
    ("rocm-smi-legacy-igpu-02", "amd", None, [None], [None]),
    ("rocm-smi-legacy-igpu-03", "amd", None, [None], [None]),
]


def _target(gpu: dict[str, Any]) -> str | None:
    target: str | None = gpu["gfx_target"] or gpu["compute_capability"]
    return target


@pytest.mark.parametrize(("name", "vendor", "driver", "names", "targets"), CASES, ids=[c[0] for c in CASES])
def test_hostinfo_from_reads_each_format(
    cli: Cli, name: str, vendor: str, driver: str | None, names: list[str | None], targets: list[str | None]
) -> None:
    doc = cli("--json", "hostinfo", "--from", str(DATA / f"{name}.txt")).json()
    assert doc["vendor"] == vendor
    assert doc["gpu_count"] == len(names), doc["gpus"]
    assert [g["name"] for g in doc["gpus"]] == names
    assert [_target(g) for g in doc["gpus"]] == targets
    assert doc["driver_version"] == driver
    assert doc["driver_version"] is None or read_version(doc["driver_version"]) == doc["driver_version"]


def test_every_format_file_names_its_source() -> None:
    files = sorted(DATA.iterdir())
    assert len(files) >= len(CASES)
    for f in files:
        assert f.read_text().startswith("# Source: https://"), f


def test_facts_read_besides_names() -> None:
    cli_info = load_hostinfo(DATA / "nvidia-container-cli-01.txt")
    assert cli_info.cuda_version == "9.1" and cli_info.gpus[0].bus_id == "0000:01:00.0"
    assert cli_info.gpus[0].uuid == "GPU-e572b8ee-523e-f7be-a359-33149791a02a"
    assert cli_info.gpus[0].brand == "GeForce"
    assert load_hostinfo(DATA / "nvidia-smi-noheader-01.txt").gpus[0].memory_mib == 24576  # nounits: MiB
    table = load_hostinfo(DATA / "amd-smi-table-02.txt")
    assert (table.rocm_version, table.gpus[0].partition, table.gpus[0].memory_mib) == ("7.1.1", "SPX", 196288)
    json_gpu = load_hostinfo(DATA / "rocm-smi-json-01.txt").gpus[0]
    assert json_gpu.device_id == "0x7408"
    listed = load_hostinfo(DATA / "amd-smi-list-static-01.txt").gpus[0]
    assert (listed.bus_id, listed.uuid) == ("0000:23:00.0", "67ff740f-0000-1000-80e6-b5bb3c3ce0db")
    static = load_hostinfo(DATA / "amd-smi-static-json-01.txt").gpus[0]
    assert (static.device_id, static.bus_id) == ("0x747e", "0000:03:00.0")


def test_garbage_driver_versions_are_notes_not_versions() -> None:
    cut = load_hostinfo(DATA / "amd-smi-table-01.txt")
    assert cut.driver_version is None and any("Linuxver" in n for n in cut.notes)
    banner = load_hostinfo(DATA / "amd-smi-version-garbage-01.txt")
    assert banner.driver_version is None and banner.rocm_version == "6.4.0"
    assert any("not a version" in n for n in banner.notes)


def test_non_amd_drm_rows_are_noted() -> None:
    h = load_hostinfo(DATA / "rocm-smi-legacy-igpu-01.txt")
    assert [g.index for g in h.gpus] == [1]
    assert any("non-AMD" in n for n in h.notes)


@pytest.mark.parametrize(
    ("printed", "llvm"),
    [
        ("gfx9010", "gfx90a"),  # rocm-smi's decimal stepping (rocm_smi_lib#159)
        ("gfx90a", "gfx90a"),
        ("gfx942", "gfx942"),
        ("gfx1100", "gfx1100"),
        ("gfx1201", "gfx1201"),
        ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a"),  # rocminfo ISA name
        ("90010", "gfx90a"),  # KFD gfx_target_version
        ("gfx11-generic", None),
        ("N/A", None),
        ("0x738c", None),
    ],
)
def test_gfx_names_as_tools_print_them(printed: str, llvm: str | None) -> None:
    assert normalize_gfx(printed) == llvm


def test_pci_device_id_to_product() -> None:
    for device_id, gfx in (("0x7408", "gfx90a"), ("0x75A0", "gfx950"), ("0x747e", "gfx1101"), ("0x740f", "gfx90a")):
        row = amd_device(device_id)
        assert row is not None and row.gfx_target == gfx
    assert amd_device("0x0c34") is None  # a subsystem id is not a device


def test_json_that_is_no_known_format_names_the_formats(tmp_path: Path, cli: Cli) -> None:
    p = tmp_path / "other.json"
    p.write_text('{"temperature": 41, "fan": "30%"}\n')
    with pytest.raises(HostProbeError) as exc:
        load_hostinfo(p)
    assert "not one builder knows" in exc.value.message and "amd-smi" in str(exc.value.hint)
    res = cli("hostinfo", "--from", str(p), code=21)
    assert "Traceback" not in res.stderr and "nvidia-container-cli" in res.stderr


def test_hostinfo_json_is_still_a_hostinfo_document() -> None:
    assert parse_text('{"vendor": "nvidia", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}').gpus[0].name == (
        "NVIDIA H100 80GB HBM3"
    )


def test_amd_smi_list_names_the_gpu_by_the_device_id_in_its_uuid(tmp_path: Path, cli: Cli) -> None:
    listed = load_hostinfo(DATA / "amd-smi-list-01.txt").gpus[0]
    assert (listed.device_id, listed.uuid, listed.bus_id) == (
        "0x740f",
        "67ff740f-0000-1000-80c6-3ac3c3c637f9",
        "0000:03:00.0",
    )
    assert listed.derived == ("device_id", "name", "gfx_target")
    # `amd-smi list --json` (keys of amd-smi's CLI help: gpu, bdf, uuid, kfd_id, node_id, partition_id) with the
    # values of that real recording: no real JSON paste of `list` was found, the reader is the static/list one
    as_json = tmp_path / "amd-smi-list.json"
    as_json.write_text(
        '[{"gpu": 0, "bdf": "0000:03:00.0", "uuid": "67ff740f-0000-1000-80c6-3ac3c3c637f9", "kfd_id": 12261, '
        '"node_id": 2, "partition_id": 0}]'
    )
    doc = cli("--json", "hostinfo", "--from", str(as_json)).json()
    assert (doc["gpu_count"], doc["gpus"][0]["name"], doc["driver_version"]) == (1, "AMD Instinct MI210", None)


@pytest.mark.parametrize(
    "uuid",
    [
        "GPU-bc72dbee-b875-cb38-2616-92494f5b3120",  # NVIDIA (tests/data/h200)
        "00000000-0000-0000-0000-000000000000",  # device-metrics-exporter's unknown UUID
        "67ff740f-1234-1000-80c6-3ac3c3c637f9",  # not amd-smi's layout (time_mid is 0 there)
        "afff0000-0000-1000-8054-e92b0a5d57c8",  # a device id not in the table
        None,
    ],
)
def test_a_uuid_of_another_form_names_no_amd_gpu(uuid: str | None) -> None:
    assert amd_device_from_uuid(uuid) is None
