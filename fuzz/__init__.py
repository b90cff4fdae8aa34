"""Fuzz campaigns and mutation testing (installed as ``jfa_verify.fuzz``)."""

from .campaign import CampaignFailure, CampaignSummary, run_campaign

__all__ = ["CampaignFailure", "CampaignSummary", "run_campaign"]
