"""How much each signal lifts the verdict: cross-validated on a KG's labelled calibration triples.

Before building a new kind of evidence into the agent, measure whether it separates true from false
triples beyond what the plausibility already does. This takes the triples the structural calibration is
fitted on (CoDEx-S: its 3,654 labelled validation triples; verifier/structure/fitting.py) with their
folds, and reports for each combination the out-of-fold accuracy as drawn, relation-matched (what a
relation-matched benchmark measures) and ECE:

- the embedding's and the text's features, Platt-scaled per relation (the plausibility before the rule
  features joined it);
- those and the rule evidence's features in one such calibration;
- gradient-boosted trees (scikit-learn) on all of them, the relation as a category: the calibration
  KG_Plausibility keeps where it predicts better out of fold (verifier/structure/calibration.py);
- where the KG has reference KGs (``manage.py references``), the trees with what they hold beside.

One draw of the folds moves a row's relation-matched accuracy by about ±0.3 points on CoDEx-S, about as much
as many a candidate signal lifts it: ``--fold-draws N`` cross-validates every row over N draws and prints each
row's spread and its lift over the row above, draw by draw, so a lift is read against its noise.
``--candidates`` adds rows for signals measured and not built in (``candidate_features``, ``meaning_votes``,
``value_likeness``), each with its lift over the shipped features: a new signal earns its place here first.

With ``--probe-pairs N``, N relation-matched (true, false) pairs of those triples are also asked of the
configured language model (the embedded one unless LLM_BASE_URL is set), one call each, the head's passage
in the prompt. ``--probe verdict`` (the agent's article reading): the tail's description and the triple,
answered in one word, its log-odds of Correct against Incorrect read from the first token
(``weighing.probe_logit``). ``--probe choice``: which of five values is the head's <relation> — the
claimed tail and the four the embedding prefers, shuffled — answered with a letter, the claimed option's
log-probability (renormalised over the letters) kept; a choice has no yes-bias. ``--probe cloze`` (the
embedded model's weights read directly: an OpenAI-compatible endpoint does not return a prompt's
log-probabilities): how much more likely the model finds the claimed tail after "the <relation> of <head> is"
than after "the <relation> of this entity is" — pointwise mutual information, which discounts values likely
for anyone (a country, a common occupation) and asks the model what it knows about this head. Reported:
the probe's ROC AUC, its correlation with the plausibility's logit, and the cross-validated accuracy of the
plausibility with and without it on those pairs. Each answer is cached in ``--cache`` so an interrupted run resumes.

    make install && DEBUG=1 .venv/bin/python bench/verdict_signals.py codex-s [--fold-draws 6] [--candidates] [--by-relation]
    DEBUG=1 .venv/bin/python bench/verdict_signals.py codex-s --probe-pairs 100 [--probe choice|cloze]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from verifier.agent import prompts  # noqa: E402
from verifier.agent.steps import Claim  # noqa: E402
from verifier.agent.weighing import logit, probe_logit  # noqa: E402
from verifier.memory.encoder import DIMENSIONS  # noqa: E402
from verifier.models import Entity, KnowledgeGraph, Passage, Relation, StructuralModel  # noqa: E402
from verifier.structure.calibration import cross_fit, fit_boosted_calibrator, fold_assignment  # noqa: E402
from verifier.structure.dataset import kg_triples  # noqa: E402
from verifier.structure.entity_text import GENERIC_TAIL_WORDS, DescriptionIndex, content_words  # noqa: E402
from verifier.structure.fitting import out_of_fold_metrics, structural_fit_set  # noqa: E402
from verifier.structure.scoring import EMBEDDING_FEATURES, RULES, LoadedModel  # noqa: E402
from verifier.tools.wiki_evidence import opening_of  # noqa: E402

CHOICE_SYSTEM = "You are a careful fact checker. Answer with one letter."
CHOICE_LETTERS = "ABCDE"


def choice_prompt(head_label: str, relation_label: str, opening: str, options: list[str]) -> str:
    lines = "\n".join(f"{letter}) {option}" for letter, option in zip(CHOICE_LETTERS, options, strict=False))
    return (f"About {head_label}:\n{opening}\n\nQuestion: which of these is {head_label}'s {relation_label}?\n{lines}\n"
            "Answer with the letter of the best option.")


def choice_log_probs(first_token_logprobs: dict[str, float], letters: str) -> list[float] | None:
    """log P(option) for each letter, renormalised over the letters from the first-token alternatives (a letter
    absent from them gets half the least seen probability); None when no letter appears."""
    found: dict[str, float] = {}
    for token, logprob in first_token_logprobs.items():
        letter = token.strip().strip(").").upper()
        if len(letter) == 1 and letter in letters:
            found[letter] = found.get(letter, 0.0) + math.exp(logprob)
    if not found:
        return None
    raw = [found.get(letter, min(found.values()) / 2) for letter in letters]
    return [math.log(v / sum(raw)) for v in raw]


def line(name: str, figures: dict, n: int) -> str:
    return (f"{name:58s} n {n:5d}  accuracy {figures['cross_validated_accuracy']:.3f}  "
            f"matched {figures['cross_validated_matched_accuracy']:.3f}  ECE {figures['cross_validated_ece']:.3f}")


def lift_line(lift: np.ndarray, over: str) -> str:
    return f"; lift over {over} {lift.mean():+.3f} (from {lift.min():+.3f} to {lift.max():+.3f})"


OPENING_PARENTHESIS = re.compile(r"\([^()]*\)")
OPENING_END = re.compile(r"(?<!\b[A-Z][a-z])(?<!\b[A-Z])\.\s+(?=[A-Z])")  # not after "Jr." or an initial
FEMININE = {"actress": "actor", "businesswoman": "businessman", "sportswoman": "sportsman"}


def opening_sentence(text: str) -> str:
    """An article's first sentence without its parentheses (birth dates, pronunciations)."""
    text = " ".join(text.split())
    while (stripped := OPENING_PARENTHESIS.sub("", text)) != text:
        text = stripped
    end = OPENING_END.search(text)
    return text[:end.start()] if end else text


def entity_texts(kg: KnowledgeGraph) -> tuple[dict[int, tuple[str, str]], dict[int, str]]:
    """Each entity's (label, description) and its first passage, by row id."""
    entities = {pk: (label or "", description or "") for pk, label, description in
                Entity.objects.filter(kg=kg).values_list("pk", "label", "description")}
    passages: dict[int, str] = {}
    for entity, text in Passage.objects.filter(kg=kg).order_by("pk").values_list("entity_id", "text"):
        passages.setdefault(entity, text)
    return entities, passages


def candidate_features(kg: KnowledgeGraph, triples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two signals measured here and not built into the plausibility, for --candidates: (the log of how many
    other values the head has for the relation, other heads the tail has, and both entities' degrees; the share of
    the tail label's content words in the head's opening sentence, "actress" read as "actor")."""
    stated = kg_triples(kg)
    known = set(map(tuple, stated.tolist()))
    degree, values, holders = Counter(stated[:, [0, 2]].ravel().tolist()), Counter(map(tuple, stated[:, :2].tolist())), \
        Counter(map(tuple, stated[:, 1:].tolist()))
    counts = np.log1p(np.array([[values[(h, r)] - ((h, r, t) in known), holders[(r, t)] - ((h, r, t) in known),
                                 degree[h] - ((h, r, t) in known), degree[t] - ((h, r, t) in known)]
                                for h, r, t in triples.tolist()], dtype=float))
    entities, passages = entity_texts(kg)

    def words(text: str) -> list[str]:
        return [FEMININE.get(w, w) for w in re.findall(r"[a-z]+", text.lower())]

    opening = []
    for h, _, t in triples.tolist():
        wanted = [FEMININE.get(w, w) for w in content_words(entities[t][0], GENERIC_TAIL_WORDS)]
        said = set(words(opening_sentence(passages.get(h) or entities[h][1])))
        opening.append(sum(w in said for w in wanted) / len(wanted) if wanted else 0.0)
    return counts, np.array(opening)


def meaning_votes(kg: KnowledgeGraph, triples: np.ndarray) -> np.ndarray:
    """The description neighbours' vote (verifier/structure/entity_text.py) with each entity's first passage's
    all-MiniLM-L6-v2 embedding as the measure of likeness instead of TF-IDF: the index's own vote (ten neighbours,
    never the entity itself), on other vectors."""
    index = DescriptionIndex(kg.pk)
    embeddings = np.zeros((len(index.rows), DIMENSIONS))
    seen: set[int] = set()
    for entity, embedding in Passage.objects.filter(kg=kg, embedding__isnull=False).order_by("pk").values_list(
            "entity_id", "embedding"):
        if entity not in seen:
            seen.add(entity)
            embeddings[index.position[entity]] = embedding
    index.vectors = sparse.csr_matrix(embeddings)  # the index slices its pools from these on its first vote
    return np.array([index.described(h, r, t).features()[:2] for h, r, t in triples.tolist()])


def value_likeness(kg: KnowledgeGraph, triples: np.ndarray) -> np.ndarray:
    """How like the claimed value is to what is known of the head, by meaning (all-MiniLM-L6-v2 cosines of labels
    and sentences): the closest of the head's stated values of the relation to the claimed one ("author" beside
    "novelist", "Russian Empire" beside "Soviet Union"; -1 where the head states none), the claimed value against
    the head's opening sentence, and the same less the mean over the relation's twenty commonest values (what the
    sentence says of this value beyond what it says of any)."""
    from verifier.memory.encoder import encode

    entities, passages = entity_texts(kg)
    rows = sorted(entities)
    position = {pk: i for i, pk in enumerate(rows)}
    labels = encode([entities[pk][0] for pk in rows])
    openings = encode([opening_sentence(passages.get(pk) or entities[pk][1] or entities[pk][0]) for pk in rows])
    stated = kg_triples(kg)
    tails: dict[tuple[int, int], set[int]] = defaultdict(set)
    for h, r, t in stated.tolist():
        tails[(h, r)].add(t)
    common = {r: [t for t, _ in Counter(stated[stated[:, 1] == r][:, 2].tolist()).most_common(20)]
              for r in set(triples[:, 1].tolist())}
    out = []
    for h, r, t in triples.tolist():
        others = [position[v] for v in tails.get((h, r), ()) if v != t]
        nearest = float((labels[others] @ labels[position[t]]).max()) if others else -1.0
        said = float(openings[position[h]] @ labels[position[t]])
        baseline = float((labels[[position[v] for v in common[r]]] @ openings[position[h]]).mean()) if common[r] else 0.0
        out.append([nearest, said, said - baseline])
    return np.array(out)


def error_by_relation(p: np.ndarray, triples: np.ndarray, labels: np.ndarray, names: dict[int, str], rows: int = 12) -> None:
    """Where the out-of-fold error is: per relation, its weight in a relation-matched draw (the min(#true, #false)
    pairs it can form, as the benchmark draws them: verifier/benchmarks/sampling.py), the share of its true and of
    its false triples decided right, their mean, and the relation's part of the relation-matched error."""
    right: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for (_, relation, _), label, probability in zip(triples.tolist(), labels.tolist(), p.tolist(), strict=True):
        right[relation][int(label)].append((probability >= 0.5) == bool(label))
    pairs = {r: min(len(false), len(true)) for r, (false, true) in right.items() if false and true}
    total = sum(pairs.values())
    print(f"{'relation':36s} {'weight':>6s} {'true':>5s} {'false':>5s} {'true right':>10s} {'false right':>11s} "
          f"{'mean':>5s} {'part of the error':>17s}")
    for relation in sorted(pairs, key=lambda r: -pairs[r])[:rows]:
        false, true = right[relation]
        mean = (np.mean(true) + np.mean(false)) / 2
        print(f"{names[relation][:36]:36s} {pairs[relation] / total:6.3f} {len(true):5d} {len(false):5d} {np.mean(true):10.3f} "
              f"{np.mean(false):11.3f} {mean:5.3f} {pairs[relation] / total * (1 - mean):17.4f}")
    error = sum(pairs[r] / total * (1 - (np.mean(right[r][1]) + np.mean(right[r][0])) / 2) for r in pairs)
    print(f"{'all':36s} {1:6.3f} {'':5s} {'':5s} {'':10s} {'':11s} {1 - error:5.3f} {error:17.4f}", flush=True)


def calibrated(x: np.ndarray, relations: list[str], labels: np.ndarray, folds: np.ndarray, fit=None) -> np.ndarray:
    """Out-of-fold probabilities of a calibration (per-relation Platt scaling unless ``fit`` says otherwise)."""
    _, out = cross_fit(x, relations, labels, feature_names=[str(i) for i in range(x.shape[1])], folds=folds, fit=fit)
    return out


def matched_pairs(triples: np.ndarray, labels: np.ndarray, n: int, seed: int = 0) -> list[int]:
    """Indices of ``n`` (true, false) pairs of one relation each, drawn with ``seed``."""
    by_relation: dict[int, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, relation in enumerate(triples[:, 1].tolist()):
        by_relation[relation][0 if labels[i] else 1].append(i)
    rng, pairs = random.Random(seed), []
    for _, (true, false) in sorted(by_relation.items()):
        rng.shuffle(true)
        rng.shuffle(false)
        pairs += list(zip(true, false, strict=False))
    rng.shuffle(pairs)
    return [i for pair in pairs[:n] for i in pair]


def probes(triples: np.ndarray, chosen: list[int], cache: Path, kind: str, model: LoadedModel) -> dict[int, float | None]:
    """The model's answer for each chosen triple (cached by probe and triple): the configured model's one-word
    verdict's log-odds, or in a multiple choice among the claimed tail and the graph's preferred values the
    claimed option's log-probability; for ``cloze``, the embedded model's likelihood ratio (``cloze_scorer``)."""
    answers = json.loads(cache.read_text()) if cache.exists() else {}
    rows = triples[chosen]
    options = {i: choice_options(model, *triples[i].tolist()) for i in chosen} if kind == "choice" else {}
    named = set(rows[:, [0, 2]].ravel().tolist()) | {e for o in options.values() for e in o}
    entities = {e.pk: e for e in Entity.objects.filter(pk__in=named)}
    passages: dict[int, str] = {}
    for entity, text in Passage.objects.filter(entity_id__in=list(entities)).order_by("pk").values_list("entity_id", "text"):
        passages.setdefault(entity, text)
    relations = dict(Relation.objects.filter(pk__in=set(rows[:, 1].tolist())).values_list("pk", "label"))
    def key(i: int) -> str:
        return "\t".join([kind, *map(str, triples[i].tolist())])

    if kind == "cloze":
        pmi = cloze_scorer()
    else:
        from kgv_web.embedded_llm import provide_local_llm
        from verifier.wiring import build_llm

        provide_local_llm()
        llm = build_llm(use_grammar=False)

    def ask(i: int) -> float | None:
        head, relation, tail = (int(v) for v in triples[i])
        h, t = entities[head], entities[tail]
        if kind == "cloze":
            return pmi(h.label, relations[relation], t.label)
        opening = opening_of(passages.get(head, h.description or ""))
        if kind == "choice":
            labels = [entities[e].label for e in options[i]]
            messages = [{"role": "system", "content": CHOICE_SYSTEM},
                        {"role": "user", "content": choice_prompt(h.label, relations[relation], opening, labels)}]
        else:
            claim = Claim(h.external_id, "", t.external_id, h.label, relations[relation], t.label)
            messages = [{"role": "system", "content": prompts.PASSAGE_SYSTEM},
                        {"role": "user", "content": prompts.passage_prompt(claim, opening, t.description or "")}]
        first = llm.complete(messages, temperature=0, max_tokens=1, top_logprobs=10).first_token_logprobs
        if kind == "choice":
            chosen_log_probs = choice_log_probs(first, CHOICE_LETTERS[:len(labels)])
            return None if chosen_log_probs is None else chosen_log_probs[options[i].index(tail)]
        return probe_logit(first)

    for done, i in enumerate(chosen):
        if key(i) in answers:
            continue
        answers[key(i)] = ask(i)
        if done % 10 == 9:
            cache.write_text(json.dumps(answers))
            print(f"  probed {done + 1}/{len(chosen)}", flush=True)
    cache.write_text(json.dumps(answers))
    return {i: answers[key(i)] for i in chosen}


def cloze_scorer():
    """(head, relation, tail labels) → log P(tail | "the <relation> of <head> is") − log P(tail | "the <relation> of
    this entity is"), summed over the tail's tokens, with the embedded model's weights (llama.cpp)."""
    from llama_cpp import Llama

    from kgv_web.embedded_llm import local_model_name, model_file

    name = local_model_name()

    @functools.cache  # loaded on the first triple not in the cache
    def model() -> Llama:
        return Llama(model_path=str(model_file(name)), n_ctx=256, n_threads=os.cpu_count(), logits_all=True, verbose=False)

    def answer_log_prob(prefix: str, answer: str) -> float:
        llm = model()
        context = llm.tokenize(prefix.encode(), add_bos=False)
        tokens = llm.tokenize(answer.encode(), add_bos=False)
        llm.reset()
        llm.eval(context + tokens)
        # the logits after each token before an answer token: the answer's tokens' distributions, nothing else
        logits = np.asarray(llm.scores[len(context) - 1: len(context) + len(tokens) - 1])
        log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        return float(log_probs[np.arange(len(tokens)), tokens].sum())

    def pmi(head: str, relation: str, tail: str) -> float:
        return (answer_log_prob(f"Fact: the {relation} of {head} is", f" {tail}.")
                - answer_log_prob(f"Fact: the {relation} of this entity is", f" {tail}."))

    return pmi


def choice_options(model: LoadedModel, head: int, relation: int, tail: int) -> list[int]:
    """The claimed tail and the four values the embedding prefers for (head, relation), in an order fixed by
    the triple (so the claimed tail's letter varies)."""
    preferred = [e for e, _ in model.predicted(head, relation, "tail", len(CHOICE_LETTERS)) if e != tail]
    options = [tail, *preferred[:len(CHOICE_LETTERS) - 1]]
    random.Random(f"{head}-{relation}-{tail}").shuffle(options)
    return options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg", help="name of a loaded KG with a ready structural model")
    parser.add_argument("--probe-pairs", type=int, default=0, help="relation-matched pairs to ask the language model")
    parser.add_argument("--probe", choices=["verdict", "choice", "cloze"], default="verdict",
                        help="verdict: a one-word Correct/Incorrect; choice: pick the head's value among the claimed tail "
                             "and the embedding's four preferred values; cloze: the embedded model's likelihood of the "
                             "tail after the head against after any entity")
    parser.add_argument("--cache", type=Path, default=Path("reports/verdict-signals-probe.json"))
    parser.add_argument("--candidates", action="store_true",
                        help="also the rows of signals measured and not built in: value counts and degrees, the tail "
                             "named in the head's opening sentence, the neighbours' vote by meaning, the claimed value's "
                             "likeness to the head's stated values and opening sentence")
    parser.add_argument("--by-relation", action="store_true",
                        help="where the shipped calibration's out-of-fold error is, relation by relation")
    parser.add_argument("--fold-draws", type=int, default=1,
                        help="cross-validate each row over this many draws of the folds and report the spread and each "
                             "row's lift over the one above, paired by draw (a lift smaller than its spread is noise)")
    args = parser.parse_args()
    kg = KnowledgeGraph.objects.get(name=args.kg)
    model = StructuralModel.objects.ready_for(kg)
    if model is None:
        sys.exit(f"{kg.name} has no ready structural model: manage.py train_kge {kg.name}")
    fit_set = structural_fit_set(model)
    triples, labels, relations, source = fit_set.triples, fit_set.labels, fit_set.relations, fit_set.source
    folds = fold_assignment(relations, labels)
    if folds is None:
        sys.exit("too few labelled triples of each kind for cross-validation")
    print(f"{kg.name}: {len(labels):,} labelled triples ({source}), structural model #{model.pk}", flush=True)
    loaded_model = LoadedModel(model)
    both = loaded_model.features(triples)
    rows = [("embedding alone (Platt per relation)", both[:, :len(EMBEDDING_FEATURES)], None),
            ("embedding + text (Platt per relation)", both[:, :RULES.start], None),
            ("embedding + text + rule evidence (Platt per relation)", both[:, :RULES.stop], None),
            ("embedding + text + rule evidence (boosted trees)", both[:, :RULES.stop], fit_boosted_calibrator)]
    if loaded_model.reference_ids:  # the KG's reference KGs (verifier/structure/reference.py)
        rows.append(("… + reference KGs (boosted trees)", both, fit_boosted_calibrator))
    if args.candidates:
        counts, opening = candidate_features(kg, triples)
        rows += [("… + value counts and degrees (candidate)", np.column_stack([both, counts]), fit_boosted_calibrator),
                 ("… + the tail in the head's opening (candidate)", np.column_stack([both, opening]), fit_boosted_calibrator),
                 ("… + both (candidate)", np.column_stack([both, counts, opening]), fit_boosted_calibrator),
                 ("… + the neighbours' vote by meaning (candidate)", np.column_stack([both, meaning_votes(kg, triples)]),
                  fit_boosted_calibrator),
                 ("… + the value's likeness to the head's (candidate)", np.column_stack([both, value_likeness(kg, triples)]),
                  fit_boosted_calibrator)]
    draws = [folds] + [fold_assignment(relations, labels, seed=seed) for seed in range(1, args.fold_draws)]
    shipped = sum("(candidate)" not in name for name, _, _ in rows)  # a candidate's lift is over all the shipped features
    matched_by_row = []
    for k, (name, x, fit) in enumerate(rows):
        figures = [out_of_fold_metrics(calibrated(x, relations, labels, f, fit=fit), relations, labels) for f in draws]
        print(line(name, figures[0], len(labels)), flush=True)
        matched_by_row.append(np.array([f["cross_validated_matched_accuracy"] for f in figures]))
        if len(draws) > 1:
            against = None if k == 0 else matched_by_row[min(k, shipped) - 1]
            print(f"{'':58s} over {len(draws)} fold draws: matched {matched_by_row[-1].mean():.3f} ± {matched_by_row[-1].std():.3f}"
                  + ("" if against is None else lift_line(matched_by_row[-1] - against, "the row above" if k < shipped else
                                                          "the shipped features")), flush=True)
    if args.by_relation:
        print("out of fold, by relation (every shipped feature, boosted trees):")
        error_by_relation(calibrated(both, relations, labels, folds, fit=fit_boosted_calibrator), triples, labels,
                    dict(Relation.objects.filter(kg=kg).values_list("pk", "label")))
    if args.probe_pairs:
        p_boosted = calibrated(both, relations, labels, folds, fit=fit_boosted_calibrator)
        chosen = matched_pairs(triples, labels, args.probe_pairs)
        answered = {i: v for i, v in probes(triples, chosen, args.cache, args.probe, loaded_model).items() if v is not None}
        index = np.array([i for i in chosen if i in answered])
        probe, truth = np.array([answered[i] for i in index]), labels[index]
        structural = np.array([logit(p) for p in p_boosted[index]])  # what KG_Plausibility states
        print(f"probe: {len(index)} of {len(chosen)} answered; AUC {roc_auc_score(truth, probe):.3f} "
              f"(plausibility {roc_auc_score(truth, structural):.3f}), correlation with the plausibility's logit "
              f"{np.corrcoef(probe, structural)[0, 1]:.2f}, "
              + {"verdict": f"leaning Correct on {float((probe > 0).mean()):.0%}",
                 "choice": f"the claimed value above even odds on {float((probe > math.log(0.5)).mean()):.0%}",
                 "cloze": f"the claimed value likelier after the head on {float((probe > 0).mean()):.0%}"}[args.probe],
              flush=True)
        position = {i: k for k, i in enumerate(chosen)}
        pair_folds = np.array([position[i] // 2 % 5 for i in index])  # a pair's two triples share a fold
        for name, x in [("plausibility", structural[:, None]), ("plausibility + probe", np.column_stack([structural, probe]))]:
            out = np.zeros(len(index))
            for k in range(5):
                fit, held = pair_folds != k, pair_folds == k
                out[held] = LogisticRegression().fit(x[fit], truth[fit]).predict_proba(x[held])[:, 1]
            print(f"  {name:30s} accuracy on the probed pairs {float(((out >= 0.5) == truth).mean()):.3f}", flush=True)


if __name__ == "__main__":
    main()
