"""Plugin file (``--plugin`` / ``--jfa-plugin``) registering the planted-bug kernels of the packaged
catalogues: ``triton_jfa``'s as ``mutant-<name>``, ``gluon_jfa``'s (GPU only) as ``mutant-gluon-<name>``."""

from jfa_verify.fuzz.mutation import load_catalogue, register_catalogue

register_catalogue(load_catalogue("triton_jfa"))
register_catalogue(load_catalogue("gluon_jfa"), prefix="mutant-gluon-")
