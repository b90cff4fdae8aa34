"""Fuzz campaigns, the corpus of reproducers, and replay."""

from .campaign import CampaignFailure, CampaignSummary, run_campaign
from .corpus import Corpus, environment, read_case_file

__all__ = ["CampaignFailure", "CampaignSummary", "Corpus", "environment", "read_case_file", "run_campaign"]
