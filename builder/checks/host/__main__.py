"""``python -m builder.checks.host [FILE]``: print hostinfo JSON of this host (the live probe) or of a saved
FILE, for machines without the builder CLI (a GPU runner with a checkout of this repository).

The live probe needs the standard library, ``packaging`` (``builder.compat``) and ``typing_extensions``
(the declared JSON documents); reading a FILE also needs ``pydantic`` (the saved-JSON schema), imported only
then.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from builder.checks.host.probing import probe_host

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Print the hostinfo JSON of the live host, or of ``argv[0]`` when given; 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        from builder.checks.host.reading import load_hostinfo  # pydantic: only for saved files

        info = load_hostinfo(args[0])
    else:
        info = probe_host()
    sys.stdout.write(json.dumps(info.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
