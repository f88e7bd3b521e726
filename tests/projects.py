"""Throwaway projects for tests that run builder end to end: matrix text of one CPU variant
without packages (fast to build FROM the mirrored Debian base)."""

from __future__ import annotations

import textwrap

#: a matrix of one variant ``<family>-cpu-py3.11-debian12`` (format with ``family`` and ``repo``)
CPU_MATRIX = """\
family: {family}
repository: {repo}
axes:
  accelerator:
    - {{kind: cpu}}
  framework:
    name: none
    versions: ["0"]
  python: ["3.11"]
  os: [debian12]
base:
  default: "mirror:debian:bookworm"
"""


def cpu_matrix(family: str, repo: str) -> str:
    """The text of :data:`CPU_MATRIX` for ``family`` in repository ``repo``."""
    return CPU_MATRIX.format(family=family, repo=repo)


#: a matrix of one JAX variant ``jax0.7-cpu-py3.11-debian12`` (format with ``repo``): the reference
#: the demo builds (``127.0.0.1:5000/demo/jax:jax0.7-cpu-py3.11-debian12``), used by promotion
#: tests that push their own content under that variant id
JAX_MATRIX = """\
family: jax
repository: {repo}
axes:
  accelerator: [{{kind: cpu}}]
  framework: {{name: jax, versions: ["0.7"]}}
  python: ["3.11"]
  os: [debian12]
packages:
  cpu: ["jax=={{framework_version}}.*"]
base:
  default: "mirror:debian:bookworm"
"""


def jax_matrix(repo: str) -> str:
    """The text of :data:`JAX_MATRIX` in repository ``repo``."""
    return JAX_MATRIX.format(repo=repo)


def build_key_policy(pub: object, stages: str) -> str:
    """A ``version: 1`` policy whose one key group and promoter is ``build`` (the public key file
    ``pub``), with ``stages``: the YAML of the stages (dedented, then placed under ``stages:``)."""
    head = f"version: 1\nkeys:\n  build: [{{file: {pub}}}]\npromoters: [build]\nstages:\n"
    return head + textwrap.indent(textwrap.dedent(stages).strip("\n") + "\n", "  ")
