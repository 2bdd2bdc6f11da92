"""The REST API (Django REST framework): tasks, runs, steps, reviews, memory bank, exports."""
