"""Mask helpers against brute-force loops over (query, key) pairs."""

from __future__ import annotations

import itertools

import pytest
import torch

from hf_attn.masking import combine_masks, key_padding_mask, self_attention_mask


@pytest.mark.parametrize(("causal", "window"), list(itertools.product([False, True], [None, 1, 3])))
def test_self_attention_mask_matches_brute_force(causal: bool, window: int | None) -> None:
    padding = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    mask = self_attention_mask(key_padding_mask(padding), 6, causal=causal, sliding_window=window,
                               device=torch.device("cpu"))
    expected = torch.zeros(2, 1, 6, 6, dtype=torch.bool)
    for b, i, j in itertools.product(range(2), range(6), range(6)):
        visible = bool(padding[b, j])
        visible &= (j <= i) if causal else True
        visible &= abs(i - j) <= window if window is not None else True
        expected[b, 0, i, j] = visible
    if mask is None:  # only allowed when nothing at all is masked
        assert bool(expected.all())
    else:
        assert torch.equal(mask.expand_as(expected), expected)


@pytest.mark.parametrize("query_start", [0, 3, torch.tensor(3)])
@pytest.mark.parametrize("query_length", [1, 2])
def test_queries_placed_before_the_last_keys_see_no_later_key(query_start: int | torch.Tensor,
                                                              query_length: int) -> None:
    """A static cache's keys run past the queries (slots not yet written): `query_start` places the queries, and
    causality hides every later slot, one query included (which at the end of the keys needs no mask)."""
    mask = self_attention_mask(None, query_length, causal=True, sliding_window=None, device=torch.device("cpu"),
                               key_length=8, query_start=query_start)
    expected = torch.zeros(1, 1, query_length, 8, dtype=torch.bool)
    for i, j in itertools.product(range(query_length), range(8)):
        expected[0, 0, i, j] = j <= int(query_start) + i
    assert torch.equal(mask, expected)


def test_no_mask_when_nothing_is_masked() -> None:
    assert key_padding_mask(torch.ones(2, 5, dtype=torch.long)) is None
    assert self_attention_mask(None, 5, causal=False, sliding_window=None, device=torch.device("cpu")) is None
    assert combine_masks(None, None) is None
