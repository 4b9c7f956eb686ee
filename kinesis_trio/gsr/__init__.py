"""Glue Schema Registry: typed records any GSR reader decodes (in progress, issue 52)."""
