"""Synthetic facts: invented people, each with one attribute per relation, stated in a few
phrasings, for a small model to memorize and for causal tracing (Meng et al. 2022, "Locating
and Editing Factual Associations in GPT") to find where it recalls them.

Names are made of random syllables, so no fact can be known from anywhere but this text.
Every statement of a fact ends with its attribute, and a fact's attribute is the same in
every phrasing (one draw per entity and relation). Within a relation no two attributes
share a first character, so for a character-level model the first character after the
prompt names the attribute (the probability tracing measures). The held-out split keeps one phrasing
of every fact out of the training text: recalling a fact from it is recall, not the
memory of a sentence.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from gptlab.errors import UsageError

SYLLABLES = ("ba", "ko", "ri", "ta", "mu", "ne", "zo", "li", "da", "fe", "gu", "shi",
             "vo", "pa", "ke", "lo", "su", "mi", "ra", "to")
# relation -> its attributes, and its phrasings: "{s}" the subject, the attribute follows.
ATTRIBUTES = {
    "city": ("Paris", "Rome", "Cairo", "Lima", "Oslo", "Delhi", "Quito", "Seoul"),
    "instrument": ("harp", "drum", "flute", "lute", "oboe", "viola"),
    "colour": ("red", "blue", "green", "amber", "teal", "violet"),
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


# The training text states every fact this many times, reshuffled each time: the prepared
# data's last tenth (validation) then repeats statements the first nine tenths hold, so
# every training phrasing of every fact is trained on.
REPEATS = 10


def facts_text(corpus: FactCorpus, repeats: int = REPEATS, seed: int = 0) -> str:
    """corpus.train_text's lines `repeats` times, each copy shuffled (seeded)."""
    rng = random.Random(seed)
    lines = corpus.train_text.splitlines()
    out: list[str] = []
    for _ in range(repeats):
        copy = list(lines)
        rng.shuffle(copy)
        out += copy
    return "\n".join(out) + "\n"


def ensure_facts(data_dir: Path, entities: int, seed: int = 0,
                 by: str = "prepare") -> tuple[FactCorpus, dict, bool]:
    """(corpus, meta, reused): make_facts(entities, seed) prepared char-level into data_dir
    (facts_text of it; the characters of the held-out phrasings are in the vocabulary too)
    unless that very corpus is already there; another kind of folder, or other data, is
    refused (gptlab.files.kinds)."""
    # start-up time: numpy and tokenizers load when data is prepared, not at parsing
    from gptlab.data.prepared import ensure_prepared
    from gptlab.data.tokenizer import CharTokenizer

    corpus = make_facts(entities, seed)

    def make():
        text = facts_text(corpus, seed=seed)
        spoken = "".join(p.text + p.answer for p in corpus.heldout)
        return text, CharTokenizer.from_text(text + spoken)

    meta, reused = ensure_prepared(Path(data_dir), f"facts:{entities}:{seed}:x{REPEATS}",
                                   make, kind="char", by=by)
    return corpus, meta, reused
