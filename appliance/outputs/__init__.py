"""Outputs built from a finished document's page trees: hOCR and ALTO (and, next,
the searchable PDF)."""
