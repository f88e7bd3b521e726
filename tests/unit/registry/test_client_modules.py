"""The registry client's operations live in modules of their own (blob writes, tag listing,
referrers), imported when a client first uses them: a command that only resolves tags
(``builder resolve``) never loads them, nor the file-lock module the fallback-index writer needs."""

from __future__ import annotations

import subprocess
import sys

OPERATIONS = ("builder.registry.uploads", "builder.registry.tag_list", "builder.registry.referrers")


def _modules_after(code: str) -> set[str]:
    program = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_client_alone_loads_no_operation_module() -> None:
    loaded = _modules_after("from builder.registry.client import RegistryClient\nRegistryClient('r.example')")
    assert "builder.registry.client" in loaded
    unwanted = {*OPERATIONS, "builder.registry.api", "builder.lockfile"}
    assert not loaded & unwanted, loaded & unwanted


def test_each_operation_module_is_loaded_by_its_first_use() -> None:
    loaded = _modules_after(
        "from builder.registry.client import RegistryClient\nc = RegistryClient('r.example')\n"
        "assert c.uploads is c.uploads  # one per client: the mounts made and the stream bound are shared"
    )
    assert "builder.registry.uploads" in loaded
    assert "builder.registry.referrers" not in loaded and "builder.registry.tag_list" not in loaded
