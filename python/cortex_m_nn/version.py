"""The package's version: recorded in every .pte and report, read by the packaging."""

__version__ = "0.1.0"
