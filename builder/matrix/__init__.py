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

from typing import TYPE_CHECKING

from builder.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (``__getattr__``)
    from builder.matrix.expand import variant_id
    from builder.matrix.files import matrix_paths
    from builder.matrix.formats import github_matrix, variant_json
    from builder.matrix.load import Matrix, load_matrices, load_matrix

#: Public name -> the module that defines it: ``builder.matrix.index`` (the cached variant list of
#: ``resolve`` and ``status``) does not import the schema, validation and compatibility modules
#: when its cache answers (PEP 562 module ``__getattr__``: https://peps.python.org/pep-0562/).
_EXPORTS = {
    "Matrix": "load",
    "github_matrix": "formats",
    "load_matrices": "load",
    "load_matrix": "load",
    "matrix_paths": "files",
    "variant_id": "expand",
    "variant_json": "formats",
}


#: Import the module that defines a name on first use; AttributeError for other names.
__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "Matrix",
    "github_matrix",
    "load_matrices",
    "load_matrix",
    "matrix_paths",
    "variant_id",
    "variant_json",
]
