"""Synthetic facts: invented people, each with one attribute per relation, stated in a few
phrasings, for a small model to memorize and for causal tracing (Meng et al. 2022, "Locating
and Editing Factual Associations in GPT") to find where it recalls them.

Names are made of random syllables, so no fact can be known from anywhere but this text.
Every statement of a fact ends with its attribute, and a fact's attribute is the same in
every phrasing (one draw per entity and relation). The held-out split keeps one phrasing
of every fact out of the training text: recalling a fact from it is recall, not the
memory of a sentence.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gptlab.errors import UsageError

SYLLABLES = ("ba", "ko", "ri", "ta", "mu", "ne", "zo", "li", "da", "fe", "gu", "shi",
             "vo", "pa", "ke", "lo", "su", "mi", "ra", "to")
# relation -> its attributes, and its phrasings: "{s}" the subject, the attribute follows.
ATTRIBUTES = {
    "city": ("Paris", "Rome", "Cairo", "Lima", "Oslo", "Delhi", "Quito", "Seoul"),
    "instrument": ("harp", "drum", "flute", "lute", "oboe", "viola"),
    "colour": ("red", "blue", "green", "amber", "grey", "violet"),
}
PHRASINGS = {
    "city": ("{s} lives in", "The home of {s} is", "{s} was born in", "{s} grew up in"),
    "instrument": ("{s} plays the", "The instrument of {s} is the", "{s} practises the",
                   "Ask {s} to play the"),
    "colour": ("{s} likes the colour", "The favourite colour of {s} is", "{s} paints in",
               "{s} dresses in"),
}


@dataclass(frozen=True)
class Fact:
    """One entity's attribute for one relation."""

    subject: str
    relation: str
    attribute: str


@dataclass(frozen=True)
class Prompt:
    """A statement cut before its attribute: text, the subject's span in it
    [subject_start, subject_end) in characters, and the answer (" " + attribute)."""

    text: str
    subject_start: int
    subject_end: int
    answer: str
    fact: Fact


@dataclass(frozen=True)
class FactCorpus:
    """facts; train_text: every fact in every phrasing but its held-out one, one statement
    a line, shuffled; heldout: a Prompt per fact in the phrasing kept out; train_prompts: a
    Prompt per fact in a training phrasing (for recall on what was seen)."""

    facts: tuple[Fact, ...]
    train_text: str
    heldout: tuple[Prompt, ...]
    train_prompts: tuple[Prompt, ...]


def make_names(count: int, rng: random.Random) -> list[str]:
    """count distinct capitalised names of 2-3 syllables, in draw order."""
    capacity = len(SYLLABLES) ** 2  # the two-syllable names alone
    if count > capacity:
        raise UsageError(f"entities must be at most {capacity}, got {count}")
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def prompt(fact: Fact, phrasing: str) -> Prompt:
    start = phrasing.index("{s}")
    text = phrasing.replace("{s}", fact.subject)
    return Prompt(text, start, start + len(fact.subject), " " + fact.attribute, fact)


def make_facts(entities: int = 50, seed: int = 0) -> FactCorpus:
    """A corpus of `entities` invented people, one attribute per relation each (seeded:
    the same seed gives the same corpus)."""
    if isinstance(entities, bool) or not isinstance(entities, int) or entities < 1:
        raise UsageError(f"entities must be a positive integer, got {entities!r}")
    rng = random.Random(seed)
    facts = [Fact(name, relation, rng.choice(values))
             for name in make_names(entities, rng) for relation, values in ATTRIBUTES.items()]
    lines, heldout, seen = [], [], []
    for fact in facts:
        phrasings = list(PHRASINGS[fact.relation])
        kept_out = phrasings.pop(rng.randrange(len(phrasings)))
        heldout.append(prompt(fact, kept_out))
        seen.append(prompt(fact, rng.choice(phrasings)))
        lines += [p.text + p.answer + "." for p in (prompt(fact, s) for s in phrasings)]
    rng.shuffle(lines)
    return FactCorpus(tuple(facts), "\n".join(lines) + "\n", tuple(heldout), tuple(seen))
