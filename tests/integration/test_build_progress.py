"""BuildKit steps reach the progress callback during a real build, and the log file keeps every line."""

from __future__ import annotations

import re
from pathlib import Path

from builder.build.plan import BuildOptions
from builder.build.run import build_variants
from builder.registry import RegistryClient
from tests.integration.test_build import make_rendered


def test_build_reports_each_buildkit_step_and_logs_everything(
    docker_engine: str, registry_address: str, mirror_base: str, unique_repo: str, tmp_path: Path
) -> None:
    del docker_engine
    rendered = make_rendered("tiny-steps", unique_repo, mirror_base, "RUN echo stepping > /which")
    events: list[tuple[str, str, str]] = []
    run = build_variants(
        [rendered],
        BuildOptions(registry=registry_address, state_dir=tmp_path, workers=1, source_date_epoch=0, no_cache=True),
        client=RegistryClient(registry_address, insecure=True),
        on_progress=lambda v, e, d: events.append((v, e, d)),
    )
    assert [r.status for r in run.results] == ["built"], [r.error for r in run.results]
    steps = [d for v, e, d in events if e == "step" and v == "tiny-steps"]
    assert all(re.match(r"#\d+ \[[^\]]+\] \S", s) for s in steps)
    assert any("RUN echo stepping" in s for s in steps), steps
    names = [e for _v, e, _d in events]
    assert names.index("building") < names.index("step") < names.index("built")
    log = Path(run.results[0].log_path or "").read_text()
    assert all(s in log for s in steps)  # the log file still has every line
