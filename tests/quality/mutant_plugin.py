"""Plugin file (``--plugin`` / ``--jfa-plugin``) registering every mutant as ``mutant-<name>``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels.registry import register_kernel  # noqa: E402
from kernels.triton_jfa import CAPABILITIES  # noqa: E402
from tests.quality.mutants import MUTANTS, make_mutant_kernel  # noqa: E402

for _name, _mutant in MUTANTS.items():
    register_kernel(f"mutant-{_name}", capabilities=CAPABILITIES, description=_mutant.description,
                    requires=("triton",))(lambda _n=_name: make_mutant_kernel(_n))
