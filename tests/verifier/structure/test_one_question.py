"""The tools' one-question scorer gives every entity PyKEEN's own score, for each offered model."""

import pytest
import torch

from verifier.structure import kge


@pytest.mark.parametrize("model", sorted(kge.INTERACTIONS))
def test_one_question_scores_every_entity_as_pykeen_predicts_them(model):
    network = kge.build_model(kge.KGEConfig(model=model, dim=8, seed=3), 40, 5)
    network.eval()
    with torch.no_grad():  # weights away from their initialisation, so no symmetry hides a wrong index
        for parameter in network.parameters():
            parameter.add_(torch.randn_like(parameter))
    scorer = kge.OneQuestion(network)
    with torch.inference_mode():
        for anchor, relation in [(0, 0), (17, 4), (39, 2)]:
            tails = network.predict_t(torch.tensor([[anchor, relation]]))[0]
            heads = network.predict_h(torch.tensor([[relation, anchor]]))[0]
            assert torch.allclose(scorer.scores(anchor, relation, inverse=False), tails, atol=1e-5)
            assert torch.allclose(scorer.scores(anchor, relation, inverse=True), heads, atol=1e-5)
            assert not torch.allclose(tails, heads, atol=1e-3)  # the two directions are different questions
