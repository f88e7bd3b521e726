"""Repository tags listed once for a batch of promotions or a ``status`` query (issue 19 item 2).

With many rows or promotions in one repository, one ``GET /v2/<name>/tags/list`` (paginated: OCI
distribution spec v1.1, "Listing Tags":
https://github.com/opencontainers/distribution-spec/blob/v1.1.0/spec.md#listing-tags) answers which
stage pointers, ``.sig``/``.att`` tags and ``sha256-<hex>`` fallback referrers indexes exist, so the
absent ones are never asked for one by one (each would be a 404). A tag that is listed is still read
(its content, never taken from the listing); a tag created after the listing is seen as absent by
that batch: evidence can only be missing (rules then deny), and a pointer is checked again under
the stage lock before it moves. A repository with a single row is not listed (the listing would
cost what it saves).

Errors: registry errors of the listing (exit 5-7) propagate to the row or promotion that needed it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from builder.promote.pool import Once

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.promote.context import PromotionContext
    from builder.promote.location import Location


class TagLists:
    """The tags of each repository named at least twice in ``locations``, listed on first use, once
    (threads asking at once share the listing)."""

    def __init__(self, ctx: PromotionContext, locations: Iterable[Location]) -> None:
        self._ctx = ctx
        self._rows = Counter((loc.registry, loc.repository) for loc in locations)
        self._lists: Once[tuple[str, str], frozenset[str]] = Once()
        self._unknown: frozenset[str] = frozenset()
        self._unknown_in: tuple[str, str] | None = None

    def tags(self, loc: Location) -> frozenset[str] | None:
        """Every tag of ``loc``'s repository; None when that repository is not listed (one row)."""
        key = (loc.registry, loc.repository)
        if self._rows[key] < 2:
            return None
        listed = self._lists.get(key, lambda: frozenset(self._ctx.client(loc.registry).list_tags(loc.repository)))
        return listed | self._unknown if key == self._unknown_in else listed

    def reading(self, loc: Location, *tags: str) -> TagLists:
        """These listings (shared, listed once), except that ``tags`` of ``loc``'s repository count as
        possibly there, so they are read rather than answered from the listing: what one promotion
        must read under a lock it took after the listing was made."""
        view = TagLists.__new__(TagLists)
        view._ctx, view._rows, view._lists = self._ctx, self._rows, self._lists
        view._unknown, view._unknown_in = frozenset(tags), (loc.registry, loc.repository)
        return view

    def absent(self, loc: Location, tag: str) -> bool:
        """True when the listing of ``loc``'s repository shows ``tag`` is not there (False: there, or unknown)."""
        listed = self.tags(loc)
        return listed is not None and tag not in listed
