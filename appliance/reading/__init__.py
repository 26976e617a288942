"""How a page reads: reading order and structure from the boxes of recognised lines."""
