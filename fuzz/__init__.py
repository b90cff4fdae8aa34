"""Fuzz campaigns, the corpus of reproducers, and replay."""

from .corpus import Corpus, environment, read_case_file

__all__ = ["Corpus", "environment", "read_case_file"]
