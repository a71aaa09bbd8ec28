"""toolbox: small, dependency-free helpers for everyday scripts."""

__version__ = "0.4.0"
