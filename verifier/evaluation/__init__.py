"""The evaluation harness: the driver that verifies a benchmark (verifier/benchmarks/) through the Celery path,
exact metrics, and the reports, tables and charts."""
