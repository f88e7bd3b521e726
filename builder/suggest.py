"""Did-you-mean suggestions for names the user typed (variant ids, rule names, stages), defined once.

Uses :func:`difflib.get_close_matches` (https://docs.python.org/3/library/difflib.html#difflib.get_close_matches):
candidates scored by ``SequenceMatcher.ratio()`` at or above ``cutoff``, best first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Default similarity threshold (difflib's own default).
CUTOFF = 0.6


def close_matches(word: str, candidates: Iterable[str], *, n: int = 5, cutoff: float = CUTOFF) -> list[str]:
    """Up to ``n`` of ``candidates`` that look like ``word`` (ratio >= ``cutoff``), best first;
    ``[]`` when none does."""
    import difflib  # only when a name is not found (difflib and heapq: start-up, issue 19)

    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=cutoff)


def did_you_mean(word: str, candidates: Iterable[str], *, cutoff: float = CUTOFF) -> str:
    """The message tail ``"; did you mean 'torch'?"`` naming the closest candidate; ``""`` when none is close."""
    close = close_matches(word, candidates, n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""
