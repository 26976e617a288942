"""What a field's table chooses besides its kind (``fields.schema``): which of several
labelled values is taken, and where its value is looked for. Nothing is imported here,
so that the configuration checks a table without importing the schema."""

from __future__ import annotations

PICKS = ("first", "last", "largest")
LOCATES = ("label", "header", "below_header")
