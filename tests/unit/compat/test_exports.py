"""builder.compat imports its modules on first use: a caller of one table (the driver branch of a
device check, a GPU name) does not load every module of the package (the table of public names:
tests/unit/test_lazy.py)."""

from __future__ import annotations

import subprocess
import sys


def test_one_module_loads_alone() -> None:
    code = (
        "import sys\n"
        "from builder.compat.branches import driver_branch\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('builder.compat.'))\n"
        "assert loaded == ['builder.compat.branches'], loaded\n"
        "from builder.compat.drivers import branch\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('builder.compat.'))\n"
        "assert loaded == ['builder.compat._data', 'builder.compat.branches', 'builder.compat.drivers'], loaded\n"
        "from builder import compat\n"
        "compat.gpu_info\n"
        "assert 'builder.compat.gpus' in sys.modules and 'builder.compat.fleets' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
