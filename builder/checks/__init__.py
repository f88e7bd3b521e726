"""Host probes, image probes, static compatibility, in-container device checks and diagnosis.

Modules: ``hostinfo`` (parse nvidia-smi / rocm-smi / amd-smi / docker info output; probe the live
host), ``image`` (what an image needs, read from the registry without running it),
``diagnose`` (name the layer at fault for a GPU/container error), ``probe`` (the stdlib-only
program that runs inside the checked container), ``device`` (run the checks, build the
``device-check/v1`` predicate). Documentation: docs/checks.md, docs/diagnosis.md.
"""
