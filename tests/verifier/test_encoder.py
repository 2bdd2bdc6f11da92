"""The sentence encoder's store of recurring texts: the same vectors as a fresh encoding, each text embedded once."""

import numpy as np

from verifier.memory import encoder


def test_recurring_texts_get_the_vectors_a_fresh_encoding_gives_and_are_embedded_once(monkeypatch):
    texts = ["Budapest is the capital of Hungary.", "place of birth", "Budapest is the capital of Hungary.",
             "Hungarian is the official language of Hungary."]
    stored = encoder.encode_recurring(texts)
    assert stored.shape == (4, encoder.DIMENSIONS)
    np.testing.assert_allclose(stored, encoder.encode(texts), atol=1e-5)

    def no_encoding(texts, **kwargs):
        raise AssertionError(f"embedded again: {texts}")

    monkeypatch.setattr(encoder, "encode", no_encoding)
    np.testing.assert_array_equal(encoder.encode_recurring(texts[::-1]), stored[::-1])
    assert encoder.encode_recurring([]).shape == (0, encoder.DIMENSIONS)


def test_a_store_cleared_by_another_thread_mid_call_does_not_lose_the_answer(monkeypatch):
    known, new = "Jean-Paul Sartre was a French philosopher.", "influenced by"
    expected = encoder.encode([known, new])
    encoder.encode_recurring([known])
    real_encode = encoder.encode

    def encode_while_another_thread_clears(texts, **kwargs):
        vectors = real_encode(texts, **kwargs)
        encoder._recurring.clear()  # what a concurrent call that crossed the size limit does
        return vectors

    monkeypatch.setattr(encoder, "encode", encode_while_another_thread_clears)
    np.testing.assert_allclose(encoder.encode_recurring([known, new]), expected, atol=1e-5)
