"""The agent's tools: one module per tool, declared once in the registry (verifier/tools/registry.py)."""
