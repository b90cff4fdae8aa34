"""Plugin file registering the block-sparse bugs of ``selection_tile_mutants.json`` (blind set 4's survivors, read)
as ``tile-mutant-<name>``, so that case workers load them too."""

from pathlib import Path

from jfa_verify.fuzz.mutation import load_catalogue, register_catalogue

register_catalogue(load_catalogue(str(Path(__file__).with_name("selection_tile_mutants.json"))), prefix="tile-mutant-")
