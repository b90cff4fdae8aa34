"""Plugin (``--plugin ci/catalogue_mutant_plugin.py``) registering every mutant of one catalogue as a kernel
``mutant-<catalogue>-<mutant>``: the catalogue is ``$JFA_MUTANT_CATALOGUE`` (a packaged name such as
``gluon_jfa_races``, or a file path; default ``gluon_jfa_races``). ``ci/gpu_gluon_mutants.sh`` uses it for any
catalogue but ``gluon_jfa``; each mutant keeps its base kernel's capabilities and sanitizer control
(:meth:`jfa_verify.fuzz.mutation.Catalogue.kernel_of`)."""

import os

from jfa_verify.fuzz.mutation import load_catalogue, register_catalogue

CATALOGUE = load_catalogue(os.environ.get("JFA_MUTANT_CATALOGUE", "gluon_jfa_races"))
NAMES = register_catalogue(CATALOGUE, prefix=f"mutant-{CATALOGUE.name}-")
