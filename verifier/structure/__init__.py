"""Structural evidence: what the graph itself says about a triple.

- ``folds``, ``dataset``: the triples each network learns from — every KG triple outside its fold — so every
  triple is scored by a network that never saw it;
- ``kge``: knowledge-graph embeddings trained with PyKEEN, chosen by validation MRR;
- ``calibration``: scores → probabilities per relation, and the calibration error;
- ``scoring``: a trained model loaded once per process, answering plausibility questions;
- ``rules``: Horn rules of length ≤ 2 mined from the KG (AMIE's measures) and their groundings;
- ``training``: the job that trains, validates, calibrates and mines for a KG version.
"""
