"""Nucleotide tokens shared by the genomics tasks: 0 is padding, then A C G T, and N for an
unknown base (IUPAC ambiguity codes such as R or Y count as N). Case is ignored."""

from __future__ import annotations

import numpy as np

ALPHABET = "ACGTN"  # ids 1..5
VOCAB_SIZE = len(ALPHABET) + 1  # with padding
N_ID = ALPHABET.index("N") + 1
AMBIGUOUS = "RYSWKMBDHV"  # IUPAC codes for more than one base: read as N

_IDS = np.zeros(256, dtype=np.int8)  # 0: not a nucleotide
for _index, _base in enumerate(ALPHABET, start=1):
    _IDS[ord(_base)] = _IDS[ord(_base.lower())] = _index
for _code in AMBIGUOUS:
    _IDS[ord(_code)] = _IDS[ord(_code.lower())] = N_ID


def encode(sequence: str) -> np.ndarray:
    """Token ids (int8) of a nucleotide string; ValueError naming the first character that is not one."""
    raw = np.frombuffer(sequence.encode("latin-1", errors="replace"), dtype=np.uint8)
    ids = _IDS[raw]
    if not ids.all():
        at = int(np.argmin(ids != 0))
        raise ValueError(f"character {sequence[at]!r} at position {at + 1} is not a nucleotide (valid: {ALPHABET}, "
                         f"IUPAC {AMBIGUOUS})")
    return ids


def decode(ids: np.ndarray) -> str:
    """The string of token ids 1..5 (padding is dropped)."""
    return "".join(ALPHABET[i - 1] for i in np.asarray(ids).tolist() if i)
