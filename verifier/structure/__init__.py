"""Structural evidence: what the graph itself says about a triple.

- ``folds``: which fold a triple belongs to; network k of a model learns every triple outside fold k, and any
  triple is scored by the network of its own fold, so no verdict rests on a network that saw the triple;
- ``dataset``: a KG version's triples as the networks learn them, with their folds;
- ``kge``: knowledge-graph embeddings trained with PyKEEN, chosen by validation MRR, within a budget;
- ``calibration``: scores → probabilities per relation, and the calibration error;
- ``scoring``: a trained model loaded once per process, answering plausibility questions;
- ``rules``: Horn rules of length ≤ 2 mined from the KG (AMIE's measures) and their groundings;
- ``fitting``: what the calibration is fitted on (labelled triples, or a KG's own facts against corruptions);
- ``training``: the job that trains one network per fold, then mines the rules and calibrates, for a KG version.
"""
