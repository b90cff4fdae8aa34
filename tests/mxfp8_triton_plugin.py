"""Plugin file registering planted MXFP8 bugs of ``triton_jfa_mxfp8`` as ``mxfp8-mutant-<name>``: one-line edits of
its kernels (``tests/mxfp8_mutants.json``): scales read per row instead of per 32-element block (Q, K, V), K and V
read with the neighbouring key row's scales, P V divided by the wrong power of two after P's e4m3 rounding, K/V
scale rows strided by the query heads instead of the KV heads (GQA)."""

from pathlib import Path

from jfa_verify.fuzz.mutation import load_catalogue, register_catalogue

CATALOGUE = load_catalogue(str(Path(__file__).resolve().with_name("mxfp8_mutants.json")))
register_catalogue(CATALOGUE, prefix="mxfp8-mutant-")
