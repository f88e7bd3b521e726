"""The host values (stdlib frozen dataclasses, so ``python -m builder.checks.host`` runs on a
GPU host without the CLI) and their pydantic validation models (outside JSON) declare the same fields: a field
added to one side only would be dropped silently on a ``--from FILE`` round trip."""

from __future__ import annotations

import dataclasses

import pytest

from builder.checks.host import model as values
from builder.checks.host import schema


@pytest.mark.parametrize(
    ("value", "model"),
    [
        (values.HostInfo, schema.HostInfoDoc),
        (values.HostGpu, schema.GpuDoc),
        (values.MigDevice, schema.MigDeviceDoc),
        (values.ToolkitInfo, schema.ToolkitDoc),
        (values.CdiSpec, schema.CdiSpecDoc),
        (values.EngineInfo, schema.EngineDoc),
    ],
)
def test_value_and_model_declare_the_same_fields(value: type, model: type) -> None:
    assert [f.name for f in dataclasses.fields(value)] == list(model.model_fields)


def test_round_trip_keeps_every_field() -> None:
    gpu = values.HostGpu(index=0, name="NVIDIA H200", memory_mib=143771, derived=("brand",), fabric_state="Completed")
    host = values.HostInfo(vendor="nvidia", driver_version="570.133.20", gpus=(gpu,), notes=("n",))
    assert values.HostInfo.from_json(host.to_json()) == host
