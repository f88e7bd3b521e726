"""Where ``builder hostinfo`` and ``builder check`` get a host's facts: saved output (a file or text read from
standard input), or the live host with the engine's ``docker info``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.checks.host.probing import probe_host
from builder.errors import BuilderError

if TYPE_CHECKING:
    from pathlib import Path

    from builder.checks.host.model import HostInfo


def live_host(*, engine_required: bool = True) -> HostInfo:
    """Probe this host (:func:`builder.checks.host.probing.probe_host`) with the engine's ``docker info``.
    Raises EngineUnavailableError / EngineCommandError when the engine does not answer and
    ``engine_required``; otherwise such a host is described without its engine."""
    from builder import engine

    try:
        info = engine.info_json()
    except BuilderError:
        if engine_required:
            raise
        return probe_host(engine_info=None)
    return probe_host(engine_info=info)


def host_facts(source: Path | None = None, *, text: str | None = None) -> HostInfo:
    """``builder hostinfo``: the facts of saved output ``text`` (standard input: raw tool output or hostinfo
    JSON), else of the saved file ``source``, else of this host (:func:`live_host`, the engine optional).
    Raises NotFoundError (no such file) and HostProbeError (nothing recognisable, an invalid document)."""
    from builder.checks.host.reading import load_hostinfo, parse_saved  # pydantic: only for saved output

    if text is not None:
        return parse_saved(text, "<stdin>")
    if source is not None:
        return load_hostinfo(source)
    return live_host(engine_required=False)


__all__ = ["host_facts", "live_host"]
