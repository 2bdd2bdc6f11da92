"""Structural evidence: what the graph itself says about a triple.

- ``dataset``: the triples a model learns from — the KG without every queued triple and without a
  calibration slice, so no verdict rests on a model that saw the triple under test;
- ``kge``: knowledge-graph embeddings trained with PyKEEN, chosen by validation MRR;
- ``calibration``: scores → probabilities per relation, and the calibration error;
- ``scoring``: a trained model loaded once per process, answering plausibility questions;
- ``rules``: Horn rules of length ≤ 2 mined from the KG (AMIE's measures) and their groundings;
- ``training``: the job that trains, validates, calibrates and mines for a KG version.
"""
