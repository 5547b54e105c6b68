"""The synthetic facts corpus: seeded, consistent, with a held-out phrasing per fact."""

from __future__ import annotations

import re

import pytest

from gptlab.data import facts
from gptlab.errors import UsageError


def test_the_same_seed_gives_the_same_corpus_and_another_seed_another():
    assert facts.make_facts(20, seed=3) == facts.make_facts(20, seed=3)
    assert facts.make_facts(20, seed=3).train_text != facts.make_facts(20, seed=4).train_text


def test_every_entity_has_one_attribute_per_relation_in_every_statement():
    corpus = facts.make_facts(30, seed=1)
    subjects = {f.subject for f in corpus.facts}
    assert len(subjects) == 30 and len(corpus.facts) == 30 * len(facts.ATTRIBUTES)
    truth = {(f.subject, f.relation): f.attribute for f in corpus.facts}
    assert len(truth) == len(corpus.facts)  # one attribute per (entity, relation)
    # Read every training line back through the phrasings: its attribute is the fact's.
    patterns = [(relation, re.compile(re.escape(p).replace(re.escape("{s}"), "(?P<s>\\w+)")
                                      + " (?P<a>\\w+)\\.$"))
                for relation, phrasings in facts.PHRASINGS.items() for p in phrasings]
    lines = corpus.train_text.splitlines()
    assert len(lines) == len(corpus.facts) * 3  # every phrasing but the held-out one
    for line in lines:
        found = [(r, m) for r, m in ((r, p.match(line)) for r, p in patterns) if m]
        assert found, line
        relation, match = found[0]
        assert truth[(match["s"], relation)] == match["a"]


def test_the_heldout_phrasing_of_a_fact_is_not_in_the_training_text():
    corpus = facts.make_facts(25, seed=2)
    assert len(corpus.heldout) == len(corpus.facts) == len(corpus.train_prompts)
    for kept_out, seen in zip(corpus.heldout, corpus.train_prompts, strict=True):
        assert kept_out.text + kept_out.answer + "." not in corpus.train_text
        assert seen.text + seen.answer + "." in corpus.train_text
        assert kept_out.fact == seen.fact
        assert kept_out.answer == " " + kept_out.fact.attribute
        subject = kept_out.text[kept_out.subject_start:kept_out.subject_end]
        assert subject == kept_out.fact.subject


@pytest.mark.parametrize("entities", [0, -1, 1.5, True, 10_000])
def test_bad_entity_counts_are_refused_in_one_line(entities):
    with pytest.raises(UsageError, match="entities") as error:
        facts.make_facts(entities)
    assert "\n" not in str(error.value)


def test_within_a_relation_the_first_character_names_the_attribute():
    for relation, values in facts.ATTRIBUTES.items():
        assert len({v[0] for v in values}) == len(values), relation


def test_the_prepared_text_repeats_every_training_statement_and_nothing_else(tmp_path):
    corpus = facts.make_facts(6, seed=5)
    text = facts.facts_text(corpus, repeats=3, seed=5)
    lines = corpus.train_text.splitlines()
    assert sorted(text.splitlines()) == sorted(lines * 3)
    assert text == facts.facts_text(corpus, repeats=3, seed=5)  # seeded
    again, meta, reused = facts.ensure_facts(tmp_path / "d", 6, seed=5)
    assert again == corpus and not reused
    assert facts.ensure_facts(tmp_path / "d", 6, seed=5)[2]  # the same corpus: reused
    with pytest.raises(UsageError, match="other data"):
        facts.ensure_facts(tmp_path / "d", 7, seed=5)
