"""Host-output parsers on real recorded outputs (tests/data/nvidia-smi*, rocm-smi; sources on line 1).

Every expected value of these recordings (the facts each source shows) is asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.checks.host.model import HostInfo, clean
from builder.checks.host.probing import detect_vendor, probe_host
from builder.checks.host.reading import load_hostinfo, parse_text
from builder.errors import HostProbeError, NotFoundError

DATA = Path(__file__).resolve().parents[3] / "data"


def nv(n: str) -> HostInfo:
    return load_hostinfo(DATA / "nvidia-smi" / f"nvidia-smi-{n}.txt")


def q(n: str) -> HostInfo:
    return load_hostinfo(DATA / "nvidia-smi-query" / f"nvidia-smi-query-{n}.txt")


def rocm(n: str) -> HostInfo:
    return load_hostinfo(DATA / "rocm-smi" / f"rocm-smi-{n}.txt")


def test_every_data_file_starts_with_its_source() -> None:
    for d in ("nvidia-smi", "nvidia-smi-query", "rocm-smi", "errors"):
        for f in (DATA / d).iterdir():
            first = f.read_text().splitlines()[0]
            assert first.startswith(("# Source: http", "# Source: recorded on this project's")), f


# --- nvidia-smi default table (tests/data/nvidia-smi/, source on each file's first line) ---------


@pytest.mark.parametrize(
    ("n", "driver", "cuda", "count", "name"),
    [
        ("01", "525.60.13", "12.0", 2, "GRID A100-40C"),
        ("02", "470.57.02", "11.4", 2, "NVIDIA A100 80G"),
        ("03", "550.90.07", "12.4", 1, "GRID A100D-1-20C"),
        ("04", "550.40.07", "12.4", 1, "NVIDIA GeForce RTX 4070"),
        ("05", "550.135", "12.4", 1, "Tesla P4"),
        ("06", "535.161.08", "12.2", 1, "NVIDIA H100 80GB HBM3"),
        ("08", "580.126.09", "13.0", 2, "NVIDIA A100-SXM4-40GB"),
        ("16", "575.64.03", None, 1, "NVIDIA GeForce RTX 5070"),
    ],
)
def test_nvidia_smi_tables(n: str, driver: str, cuda: str | None, count: int, name: str) -> None:
    h = nv(n)
    assert h.vendor == "nvidia"
    assert h.driver_version == driver
    assert h.cuda_version == cuda
    assert len(h.gpus) == count
    assert all(g.name == name for g in h.gpus)
    assert h.diagnosis is None


def test_legacy_vgpu_layout_reads_na_as_unknown() -> None:
    h = nv("01")
    assert [g.memory_mib for g in h.gpus] == [40960, 40960]
    assert [g.bus_id for g in h.gpus] == ["0000:02:01.0", "0000:02:02.0"]
    assert all(g.mig_mode == "Disabled" for g in h.gpus)
    assert h.gpus[0].brand == "GRID"


def test_truncated_names_are_flagged() -> None:
    h = nv("02")
    assert all(g.name_truncated for g in h.gpus)
    assert h.gpus[1].bus_id == "0000:ca:00.0"
    assert h.gpus[0].memory_mib == 80994


def test_mig_on_vgpu() -> None:
    h = nv("03")
    assert h.gpus[0].mig_mode == "Enabled"
    assert h.mig_enabled


def test_consumer_brand_from_name() -> None:
    g = nv("04").gpus[0]
    assert g.brand == "GeForce" and g.brand_source == "name"
    assert g.compute_capability == "8.9"
    assert "brand" in g.derived


def test_two_part_driver_version() -> None:
    h = nv("05")
    assert h.driver_version == "550.135"
    assert h.gpus[0].brand == "Tesla"


def test_h100_next_to_nvcc_is_not_confused() -> None:
    h = nv("06")
    assert h.cuda_version == "12.2"  # the driver's, not nvcc's 12.4
    assert h.gpus[0].compute_capability == "9.0"
    assert h.gpus[0].bus_id == "0001:00:00.0"


def test_driver_not_loaded() -> None:
    h = nv("11")
    assert h.diagnosis == "driver-not-loaded"
    assert h.driver_version is None and h.gpus == ()


def test_mig_devices_table_only() -> None:
    h = nv("13")
    assert h.diagnosis is None and h.driver_version is None
    gpu1 = next(g for g in h.gpus if g.index == 1)
    assert len(gpu1.mig_devices) == 3
    assert {m.memory_mib for m in gpu1.mig_devices} == {19968}
    assert [m.gi for m in gpu1.mig_devices] == [3, 5, 6]


def test_cuda_na_is_unknown_not_failure() -> None:
    h = nv("16")
    assert h.cuda_version is None
    assert any("N/A" in n for n in h.notes)
    assert h.gpus[0].compute_capability == "12.0"


# --- queries ---------------------------------------------------------------------------------


def test_query_csv_and_invalid_field() -> None:
    h = q("01")
    assert h.driver_version == "570.133.07" and h.cuda_version == "12.8"
    assert h.gpus[0].compute_capability == "8.9"
    assert any("compute_cap" in n for n in h.notes)


def test_old_smi_binary_newer_driver_trusts_driver_field() -> None:
    h = q("02")
    assert h.smi_version == "470.256.02"
    assert h.driver_version == "580.95.05" and h.cuda_version == "13.0"
    g = h.gpus[0]
    assert g.name == "NVIDIA RTX PRO" and g.name_truncated and g.brand == "NVIDIA RTX"


def test_q_layout_product_brand_and_vbios() -> None:
    g = q("03").gpus[0]
    assert (g.name, g.brand, g.brand_source) == ("NVIDIA GeForce GTX 1650", "GeForce", "nvidia-smi -q")
    assert g.vbios == "90.17.3D.00.4E" and g.architecture == "Turing" and g.mig_mode is None
    assert q("03").driver_version == "510.68.02" and q("03").cuda_version == "11.6"


def test_q_with_interleaved_noise() -> None:
    h = q("04")
    assert h.driver_version == "535.86.10" and h.cuda_version == "12.2"
    assert h.gpus[0].brand == "Tesla" and h.gpus[0].vbios == "88.00.1A.00.03"


def test_q_fragment_gsp_firmware() -> None:
    g = q("05").gpus[0]
    assert g.vbios == "92.00.45.00.05"
    assert g.firmware == "535.104.05"
    assert g.virtualization == "Pass-Through"


# --- rocm-smi / amd-smi ----------------------------------------------------------------------


def test_rocm_csv_driver_and_products() -> None:
    h = rocm("01")
    assert h.vendor == "amd"
    assert h.driver_version == "4.18.0-348.12.2.el8_5.x86_64"
    assert "AMD Instinct MI100" in h.gpu_names


def test_rocm_hex_series_uses_device_table_only_when_known() -> None:
    h = rocm("02")
    assert h.vendor == "amd" and len(h.gpus) == 1
    # rocm-smi 4.0 prints the PCI device id as "Card series": "0x738c" is not a name, but a listed device id
    g = h.gpus[0]
    assert (g.device_id, g.name, g.gfx_target) == ("0x738c", "AMD Instinct MI100", "gfx908")
    assert {"name", "gfx_target"} <= set(g.derived)


def test_rocm_concise_with_log_prefix() -> None:
    assert len(rocm("03").gpus) == 8


def test_partitioned_counts_physical_gpus() -> None:
    h = rocm("04")
    assert h.partition_mode == "DPX"
    assert h.physical_gpu_count == 4
    assert len(h.gpus) > h.physical_gpu_count


def test_amd_smi_version_and_mi300x_partitions() -> None:
    h = rocm("05")
    assert h.rocm_version == "6.4.1" and h.driver_version == "6.10.5"
    assert all(g.name == "AMD Instinct MI300X" for g in h.gpus)
    assert h.physical_gpu_count == 3 and len(h.gpus) == 6
    assert h.gpus[0].gfx_target == "gfx942" and "gfx_target" in h.gpus[0].derived


def test_rocm_all_info() -> None:
    h = rocm("08")
    assert h.driver_version == "5.6.19"
    assert h.gpus[0].vbios == "111" and h.gpus[0].device_id == "0x731f"


def test_rocm_smi_works_nonroot_case_parses() -> None:
    h = rocm("12")
    assert h.vendor == "amd" and len(h.gpus) == 4 and h.diagnosis is None


# --- JSON round trip, detection, errors --------------------------------------------------------


def test_json_round_trip(tmp_path: Path) -> None:
    h = nv("08")
    p = tmp_path / "h.json"
    p.write_text(json.dumps(h.to_json()))
    back = load_hostinfo(p)
    assert back == h
    assert h.to_json()["gpus"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert h.to_json()["diagnosis"] is None


def test_bad_json_vendor() -> None:
    with pytest.raises(HostProbeError):
        parse_text('{"vendor": "intel"}')


def test_missing_file() -> None:
    with pytest.raises(NotFoundError):
        load_hostinfo("/nonexistent/host.txt")


def test_r610_header_and_other_layouts() -> None:
    text = (
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 610.12          KMD Version: 610.12.01     CUDA UMD Version: 13.2            |\n"
        "+-----------------------------------------+------------------------+----------------------+\n"
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
        "|=========================================+========================+======================|\n"
        "|   0  NVIDIA B200                    On  |   00000000:1B:00.0 Off |                    0 |\n"
        "| N/A   30C    P0            140W / 1000W |       0MiB / 183359MiB |      0%      Default |\n"
        "|                                         |                        |             Disabled |\n"
        "+-----------------------------------------+------------------------+----------------------+\n"
    )
    h = parse_text(text)
    assert (h.driver_version, h.cuda_version) == ("610.12.01", "13.2")
    g = h.gpus[0]
    assert g.name == "NVIDIA B200" and g.memory_mib == 183359 and g.compute_capability == "10.0"
    assert g.brand == "NVIDIA"


def test_docker_info_json() -> None:
    h = parse_text(
        json.dumps({"ServerVersion": "26.1.5", "Runtimes": {"runc": {}, "runsc": {}}, "DefaultRuntime": "runsc"})
    )
    assert h.engine is not None and h.engine.version == "26.1.5"
    assert h.engine.oci_runtime_kind == "runsc"


def test_unknown_markers() -> None:
    for v in ("N/A", "[N/A]", "Not Found", " Unknown ", "[Not Supported]"):
        assert clean(v) is None
    assert clean("535.104.05") == "535.104.05"


def test_live_probe_never_crashes_without_tools(tmp_path: Path) -> None:
    """On a root with no device nodes and a runner where every tool is missing."""

    def missing(argv: object, timeout: float) -> tuple[int, str, str]:
        return 127, "", "command not found"

    h = probe_host(run=missing, root=tmp_path)
    assert h.vendor == "none" and h.gpus == ()


def test_vendor_from_sysfs(tmp_path: Path) -> None:
    dev = tmp_path / "sys/bus/pci/devices/0000:03:00.0"
    dev.mkdir(parents=True)
    (dev / "class").write_text("0x030200\n")
    (dev / "vendor").write_text("0x1002\n")
    vendor, evidence = detect_vendor(tmp_path)
    assert vendor == "amd" and evidence
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidiactl").write_text("")
    assert detect_vendor(tmp_path)[0] == "nvidia"


def test_xml_layout_including_escaped_copy() -> None:
    xml = (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n<nvidia_smi_log>\n'
        "<driver_version>591.74</driver_version>\n<cuda_version>13.1</cuda_version>\n<attached_gpus>1</attached_gpus>\n"
        '<gpu id="00000000:01:00.0">\n<product_name>NVIDIA GeForce RTX 4090</product_name>\n'
        "<product_brand>GeForce</product_brand>\n<product_architecture>Ada Lovelace</product_architecture>\n"
        "<fb_memory_usage><total>24564 MiB</total></fb_memory_usage>\n"
        "<mig_mode><current_mig>N/A</current_mig></mig_mode>\n"
        "</gpu>\n</nvidia_smi_log>\n"
    )
    h = parse_text(xml)
    assert (h.driver_version, h.cuda_version) == ("591.74", "13.1")
    g = h.gpus[0]
    assert (g.name, g.brand, g.memory_mib, g.bus_id, g.mig_mode) == (
        "NVIDIA GeForce RTX 4090",
        "GeForce",
        24564,
        "0000:01:00.0",
        None,
    )
    # as pasted into an issue (HTML-escaped, truncated): source https://github.com/1Panel-dev/1Panel/issues/11910
    escaped = xml.replace("<", "&lt;").replace(">", "&gt;").replace("</gpu>", "")[:600]
    h2 = parse_text(escaped)
    assert h2.driver_version == "591.74" and h2.gpus[0].brand == "GeForce"


def test_list_and_version_outputs_from_h200_misc() -> None:
    h = load_hostinfo(DATA / "h200" / "misc.txt")  # --version, -L, topo -m ... as recorded
    assert h.smi_version == "580.159.04" and h.driver_version == "580.159.04" and h.cuda_version == "13.0"
    assert [g.name for g in h.gpus] == ["NVIDIA H200"]
    assert h.gpus[0].uuid and h.gpus[0].uuid.startswith("GPU-")


def test_other_table_variants() -> None:
    wddm = (
        "| NVIDIA-SMI 551.78                 Driver Version: 551.78         CUDA Version: 12.4     |\n"
        "|-----------------------------------------+------------------------+----------------------+\n"
        "| GPU  Name                     TCC/WDDM  | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
        "|=========================================+========================+======================|\n"
        "|   0  NVIDIA GeForce RTX 3090      WDDM  |   00000000:01:00.0  On |                  N/A |\n"
        "|  0%   45C    P8             22W /  350W |    1162MiB /  24576MiB |      2%      Default |\n"
        "+-----------------------------------------+------------------------+----------------------+\n"
    )
    h = parse_text(wddm)
    assert h.gpus[0].name == "NVIDIA GeForce RTX 3090" and h.gpus[0].memory_mib == 24576
    old = (
        "+------------------------------------------------------+\n"
        "| NVIDIA-SMI 340.29     Driver Version: 340.29         |\n"
        "|-------------------------------+----------------------+----------------------+\n"
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "|===============================+======================+======================|\n"
        "|   0  Tesla K80           Off  | 0000:04:00.0     Off |                    0 |\n"
        "| N/A   32C    P8    26W / 149W |     55MiB / 11519MiB |      0%      Default |\n"
        "+-------------------------------+----------------------+----------------------+\n"
    )
    h = parse_text(old)
    assert h.driver_version == "340.29" and h.cuda_version is None
    assert h.gpus[0].name == "Tesla K80" and h.gpus[0].bus_id == "0000:04:00.0"
    assert parse_text("No devices were found\n").diagnosis == "no-gpu-visible"


def test_unrecognised_file_is_a_probe_error(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\nthis is not tool output\n")
    with pytest.raises(HostProbeError):
        load_hostinfo(p)
