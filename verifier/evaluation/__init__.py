"""The evaluation harness: benchmarks (datasets, type-constrained negative sampling), the runner that
verifies them through the Celery path, exact metrics, and the reports, tables and charts."""
