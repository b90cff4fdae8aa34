"""Plugin file (``--plugin`` / ``--jfa-plugin``) registering every mutant of the packaged
``triton_jfa`` catalogue as a kernel ``mutant-<name>``."""

from jfa_verify.fuzz.mutation import load_catalogue, register_catalogue

register_catalogue(load_catalogue("triton_jfa"))
