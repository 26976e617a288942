"""Output quality: Markdown handling, repair and confidence."""
