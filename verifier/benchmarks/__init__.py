"""Benchmarks: labelled triple sets a KG is measured on — the reference datasets' splits, files of labelled triples
and the type-constrained negatives drawn for them (seeded, the same on every machine). Evaluations, the structural
calibration, the confidence model and the claims benchmark all draw from here."""
