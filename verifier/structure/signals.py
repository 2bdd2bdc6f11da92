"""What the structural-model job announces to the parts above it that follow the model in force."""

from django.dispatch import Signal

# Sent by ``training.train`` inside the transaction that makes a newly trained model its KG's ready one, with the
# keyword arguments ``kg`` and ``model``: what follows the structural model (the KG's label-free confidence model,
# verifier/confidence.py) changes in the same transaction. Its receivers are connected when the app is ready.
model_ready = Signal()
