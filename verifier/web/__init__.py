"""The curator workbench: server-rendered pages, one module per area."""
