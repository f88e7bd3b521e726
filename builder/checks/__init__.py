"""Host probes, image probes, static compatibility, in-container device checks and diagnosis.

Modules: :mod:`~builder.checks.host` (parse nvidia-smi / rocm-smi / amd-smi / docker info output;
probe the live host), :mod:`~builder.checks.image` (what an image needs, read from the registry
without running it), :mod:`~builder.checks.static` (verdicts against a host or a fleet),
:mod:`~builder.checks.diagnosis` (name the layer at fault for a GPU/container error),
:mod:`~builder.checks.context` (the facts a diagnosis uses), :mod:`~builder.checks.probe` (the
stdlib-only program that runs inside the checked container), :mod:`~builder.checks.device` (run the
checks, build the ``device-check/v1`` predicate) and :mod:`~builder.checks.run` (``builder check``
as one call). Documentation: docs/checks.md, docs/diagnosis.md.
"""
