"""Audit: construction exclusion by bounded shortcut policies, each lacking one capability."""
