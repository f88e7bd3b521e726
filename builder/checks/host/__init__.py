"""Host facts: what GPUs, driver, fabric manager, container toolkit and engine a host has.

Modules: ``model`` (the frozen values), ``schema`` (the saved-JSON schema, pydantic), ``nvidia`` /
``amd`` / ``dockerinfo`` (tool output parsers), ``accumulator`` (what the parsers share),
``assemble`` (parsed facts -> HostInfo, with what ``builder.compat`` derives), ``reading`` (saved files,
format detected), ``probing`` (the live host), ``gather`` (saved output or the live host with its engine:
what the commands call), ``cpu`` (the CPU model from ``/proc/cpuinfo``, here or a cluster node's).
``python -m builder.checks.host`` prints this host's JSON.

Nothing is imported here, so that the live probe runs without the CLI's dependencies.
"""
