"""Key fields read from a document: kinds, schemas, extraction, validation."""
