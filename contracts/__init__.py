"""Pydantic contracts shared by every stage. This package never imports pipeline/."""
