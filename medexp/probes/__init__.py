"""Probes: benchmark examples transformed into the questions a model is asked (DESIGN.md,
"Answers and probes"). Probe makers are pure functions, seeded from the cell."""

from medexp.probes.base import Probe, letter_of, option_letters

__all__ = ["Probe", "letter_of", "option_letters"]
