"""Tokenizers for the real-data pipelines, built offline from each task's training split.

The paper used pretrained vocabularies: BERT's WordPiece for HateXplain and GPT-2's byte-level
BPE for SQuAD. Their vocabulary files are downloads (no installed package ships them), and
this project's machines cannot download, so the companion *trains* tokenizers of the same
kinds with the ``tokenizers`` package (Hugging Face's Rust library, from PyPI; training runs
locally) on the training split only:

- :func:`train_wordpiece` - HateXplain: a lower-casing WordPiece of BERT's vocabulary size
  (30,522) over the posts' words; the words are split as BERT's pre-tokenizer splits them.
  It differs from the paper's ``bert-base-uncased`` tokens (another vocabulary, learnt from
  HateXplain's training posts instead of Wikipedia and books).
- :func:`train_word_level` - the Linzen agreement data: one token per word of its
  ``sentence`` column (which already keeps the 10,000 most common words and replaces the
  rest by their part of speech), as Linzen et al. fed their models.
- :func:`train_byte_bpe` - SQuAD: a byte-level BPE of GPT-2's vocabulary size (50,257) over
  the training questions, contexts and answers. Same algorithm and byte alphabet as GPT-2,
  but merges learnt from SQuAD, so the token boundaries differ from the paper's GPT-2 tokens.

Every tokenizer has ``[PAD]`` as id 0 (the decoder's padding id) and ``[UNK]``; the byte-level
BPE needs no ``[UNK]`` and has ``[EOS]``, which ends every answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no warning when torch forks

import tokenizers  # noqa: E402  (the PyPI package, not this module: imports are absolute)
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

PAD, UNK, EOS = "[PAD]", "[UNK]", "[EOS]"
BERT_VOCAB_SIZE = 30522  # bert-base-uncased
GPT2_VOCAB_SIZE = 50257  # GPT-2


@dataclass
class Encoded:
    ids: list[int]
    word_ids: list[int | None]  # per token: the input word it came from (word input)
    offsets: list[tuple[int, int]]  # per token: its characters in the input text (text input)


class Tokenizer:
    """A trained tokenizer: ids for words or text, and back. ``kind`` is "wordpiece",
    "word" or "byte_bpe"."""

    def __init__(self, backend: tokenizers.Tokenizer, kind: str):
        self.backend, self.kind = backend, kind
        self.pad_id = backend.token_to_id(PAD)
        if self.pad_id != 0:
            raise ValueError(f"tokenizer: expected {PAD} as id 0, got {self.pad_id}")
        self.unk_id = backend.token_to_id(UNK)
        self.eos_id = backend.token_to_id(EOS)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    def encode_words(self, words: Sequence[str]) -> Encoded:
        """Tokens of a pre-split text (HateXplain's ``post_tokens``, a Linzen sentence),
        with the word each token came from, so word-level rationales carry over."""
        enc = self.backend.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        return Encoded(enc.ids, enc.word_ids, enc.offsets)

    def encode(self, text: str) -> Encoded:
        """Tokens of a text, with each token's character offsets in it."""
        enc = self.backend.encode(text, add_special_tokens=False)
        return Encoded(enc.ids, enc.word_ids, enc.offsets)

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=True)

    def token_words(self) -> list[str]:
        """Per id, the text it stands for, stripped of its leading space or ``##`` (to look
        up pretrained word vectors such as GloVe)."""
        words = []
        for i in range(self.vocab_size):
            token = self.backend.id_to_token(i)
            if self.kind == "byte_bpe":
                text = self.backend.decode([i], skip_special_tokens=False)
            else:
                text = token[2:] if token.startswith("##") else token
            words.append(text.strip())
        return words

    def save(self, path: str | os.PathLike) -> None:
        self.backend.save(str(path))


def _check_vocab_size(vocab_size: int) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 300:
        raise ValueError(f"vocab_size: expected an integer >= 300, got {vocab_size!r}")


def train_wordpiece(word_lists: Iterable[Sequence[str]], vocab_size: int = BERT_VOCAB_SIZE,
                    lowercase: bool = True, min_frequency: int = 1) -> Tokenizer:
    """A WordPiece tokenizer trained on ``word_lists`` (the training posts' words), BERT-style:
    BERT's normalizer (lower-casing, accents stripped) and pre-tokenizer (punctuation split
    off), ``##`` continuation pieces.

    The same words give the same vocabulary in every run. The library's trainer alone does
    not (huggingface/tokenizers issue 1794): it numbers the ``##`` pieces of single
    characters in hash-map order, and those numbers break ties between merges. So every
    ``##``-character piece of the text is given its number first, in sorted order (as extra
    special tokens while training), and the trained vocabulary is then loaded into a plain
    WordPiece model, with only [PAD] and [UNK] special."""
    _check_vocab_size(vocab_size)
    texts = [" ".join(words) for words in word_lists]
    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    characters = sorted({c for text in texts for c in normalizer.normalize_str(text)
                         if not c.isspace()})
    backend = tokenizers.Tokenizer(models.WordPiece(unk_token=UNK))
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=[PAD, UNK] + [WORDPIECE_PREFIX + c for c in characters])
    backend.train_from_iterator(texts, trainer)
    tokenizer = tokenizers.Tokenizer(models.WordPiece(vocab=backend.get_vocab(), unk_token=UNK))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.add_special_tokens([PAD, UNK])
    return Tokenizer(tokenizer, "wordpiece")


WORDPIECE_PREFIX = "##"  # of a piece that continues a word


def train_word_level(word_lists: Iterable[Sequence[str]], min_frequency: int = 1) -> Tokenizer:
    """One id per distinct word of ``word_lists`` seen at least ``min_frequency`` times;
    any other word is ``[UNK]``."""
    backend = tokenizers.Tokenizer(models.WordLevel(unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(min_frequency=min_frequency, special_tokens=[PAD, UNK],
                                        show_progress=False)
    backend.train_from_iterator((" ".join(words) for words in word_lists), trainer)
    return Tokenizer(backend, "word")


def train_byte_bpe(texts: Iterable[str], vocab_size: int = GPT2_VOCAB_SIZE,
                   min_frequency: int = 2) -> Tokenizer:
    """A GPT-2-style byte-level BPE trained on ``texts``: any text encodes (no unknown
    token), a space belongs to the word after it, offsets exclude it."""
    _check_vocab_size(vocab_size)
    backend = tokenizers.Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[PAD, EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(texts, trainer)
    return Tokenizer(backend, "byte_bpe")
