"""The KG audit: every triple of a KG ranked by how likely it is wrong, with its reasons (not the audit log)."""
