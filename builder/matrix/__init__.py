"""Build matrices (``matrices/*.yaml``): load, validate and expand them into variants.

A matrix names a template family, a repository (relative to the configured registry), axes and
include/exclude rules; the cross product of the axes, minus ``exclude``, plus ``include``, is the
list of variants (cells). Every cell is checked against the compatibility knowledge base when the
matrix is loaded, so an impossible cell fails in milliseconds instead of twenty minutes into a build.

Modules: :mod:`~builder.matrix.schema` (the file schema), :mod:`~builder.matrix.validate`
(validation), :mod:`~builder.matrix.expand` (axes -> variants), :mod:`~builder.matrix.compatibility`
(cell rules from :mod:`builder.compat`), :mod:`~builder.matrix.load` (files -> :class:`Matrix`, with
every problem located), :mod:`~builder.matrix.formats` (JSON shapes). Reference: ``docs/matrices.md``.

The package exports the loading entry points; OS and base-image facts are in :mod:`builder.bases`,
selecting variants in :mod:`builder.selection`.
"""

from builder.matrix.expand import variant_id
from builder.matrix.formats import github_matrix, variant_json
from builder.matrix.load import Matrix, load_matrices, load_matrix, matrix_paths

__all__ = [
    "Matrix",
    "github_matrix",
    "load_matrices",
    "load_matrix",
    "matrix_paths",
    "variant_id",
    "variant_json",
]
