"""`builder hostinfo --from FILE` with JSON that is not a hostinfo document: HostProbeError (exit 21)
naming the file and the field, never an AttributeError; valid documents still load."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from builder.checks.host.reading import load_hostinfo, parse_text
from builder.errors import HostProbeError
from tests.conftest import ROOT, Cli

if TYPE_CHECKING:
    from pathlib import Path

DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ('{"gpus": "x"}', "gpus"),
        ("{}", "vendor"),
        ('{"vendor": "nvidia", "gpus": ["A100"]}', "gpus[0]"),
        ('{"vendor": "nvidia", "gpus": [{"name": "A100", "memory_mib": "lots"}]}', "gpus[0].memory_mib"),
        ('{"vendor": "nvidia", "driver_version": 550}', "driver_version"),
        ('{"vendor": "intel"}', "vendor"),
        ('{"vendor": "nvidia", "toolkit": {"cdi_specs": "none"}}', "toolkit.cdi_specs"),
        ('{"vendor": "nvidia", "engine": "docker"}', "engine"),
    ],
)
def test_invalid_documents_name_file_and_field(tmp_path: Path, doc: str, field: str, cli: Cli) -> None:
    p = tmp_path / "bad.json"
    p.write_text(doc)
    with pytest.raises(HostProbeError) as exc:
        load_hostinfo(p)
    assert str(p) in exc.value.message
    assert field in exc.value.message
    res = cli("hostinfo", "--from", str(p), "--json", code=21)
    assert "Traceback" not in res.stderr
    err = res.json()["error"]
    assert err["kind"] == "host-probe" and str(p) in err["message"]
    assert any(pr["field"].startswith(field) for pr in err["details"]["problems"]), err


def test_broken_json_and_unrecognised_text_exit_21(tmp_path: Path, cli: Cli) -> None:
    for text in ('{"vendor": "nvidia",', "hello, this is not tool output\n", "[1, 2]\n"):
        p = tmp_path / "x.txt"
        p.write_text(text)
        res = cli("hostinfo", "--from", str(p), code=21)
        assert str(p) in res.stderr and "Traceback" not in res.stderr


def test_saved_output_prints_the_hostinfo_document(cli: Cli) -> None:
    """`--from FILE` and `--from -` (standard input) print the same document, schema-checked by the fixture."""
    q = DATA / "h200" / "nvidia-smi-q.txt"
    doc = cli("hostinfo", "--from", str(q), "--json").json()
    assert doc["schema"] == "builder/hostinfo/v1" and doc["gpus"][0]["name"] == "NVIDIA H200"
    assert doc["gpu_count"] == len(doc["gpus"]) and doc == load_hostinfo(q).to_json()
    assert cli("hostinfo", "--from", "-", "--json", stdin=q.read_text()).json()["gpus"] == doc["gpus"]
    human = cli("hostinfo", "--from", str(q))
    assert "NVIDIA H200" in human.stderr and human.stdout == ""


def test_valid_documents_still_load() -> None:
    a100 = load_hostinfo(DATA / "compat" / "fleets" / "hosts" / "a100-hostinfo.json")  # hand-written, minimal
    assert a100.vendor == "nvidia" and len(a100.gpus) == 2 and a100.gpus[0].compute_capability == "8.0"
    live = load_hostinfo(DATA / "h200" / "hostinfo.json")  # written by to_json on the H200
    assert live.gpus[0].name == "NVIDIA H200"
    assert parse_text(json.dumps(live.to_json())) == live
    assert parse_text('{"vendor": "none"}').gpus == ()


@pytest.mark.parametrize("junk", ["garbage\n", "", "   \n"])
def test_junk_on_standard_input_is_refused_as_from_a_file(cli: Cli, junk: str) -> None:
    """A failed `ssh host nvidia-smi | builder hostinfo --from -` must not become a host without GPUs."""
    out = cli("hostinfo", "--from", "-", "--json", stdin=junk, code=21)
    assert "no nvidia-smi, rocm-smi" in out.json()["error"]["message"]
