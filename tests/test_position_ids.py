"""Position-id rules (`hf_attn.position_ids`) against ids written out by hand, through the model and `generate()`."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import tiny_config_kwargs

from hf_attn import POSITION_ID_RULES, POSITION_SCHEMES, HfAttnConfig, HfAttnForCausalLM, HfAttnModel

# A toy vocabulary for "12+345=": digits 0-9 are ids 10-19, "+" is 20, "=" 21, [PAD] 0.
DIGIT_IDS = list(range(10, 20))
SYMBOL_IDS = {**{str(digit): 10 + digit for digit in range(10)}, "+": 20, "=": 21}


def encode(text: str) -> list[int]:
    return [SYMBOL_IDS[symbol] for symbol in text]


def config(**overrides: object) -> HfAttnConfig:
    return HfAttnConfig(**tiny_config_kwargs(**overrides))


def model_with(rule: str, seed: int = 0, **overrides: object) -> HfAttnModel:
    torch.manual_seed(seed)
    return HfAttnModel(config(position_id_rule=rule, **overrides)).eval()


ABACUS = dict(digit_token_ids=DIGIT_IDS)


def test_abacus_ids_of_a_sum_are_each_digits_offset_inside_its_number() -> None:
    model = model_with("abacus", **ABACUS, max_abacus_start=0)
    input_ids = torch.tensor([encode("12+345="), encode("7+98=10")])
    # "12+345=": 1 is the first digit of 12, 2 the second, "+" none, 3 4 5 the first to third of 345.
    written_out = torch.tensor([[1, 2, 0, 1, 2, 3, 0], [1, 0, 1, 2, 0, 1, 2]])
    computed = model.position_id_rule.position_ids(input_ids, input_ids.shape, 0, False, input_ids.device)
    assert torch.equal(computed, written_out)
    hand = model(input_ids, position_ids=written_out).last_hidden_state
    sequential = model(input_ids, position_ids=torch.arange(7)[None]).last_hidden_state
    assert torch.equal(model(input_ids).last_hidden_state, hand)  # the model computes the same ids itself
    assert not torch.allclose(hand, sequential)


def test_abacus_adds_one_random_start_per_sequence_to_every_digit_in_training_only() -> None:
    model = model_with("abacus", **ABACUS, max_abacus_start=3)
    input_ids = torch.tensor([encode("12+345=")] * 400)
    offsets = torch.tensor([1, 2, 0, 1, 2, 3, 0])
    is_digit = offsets > 0
    ids = model.position_id_rule.position_ids(input_ids, input_ids.shape, 0, True, input_ids.device)
    starts = ids[:, 0] - 1
    assert torch.equal(ids, offsets + starts[:, None] * is_digit)  # one start per row, on the digits alone
    assert set(starts.tolist()) == {0, 1, 2, 3}  # uniform in [0, max_abacus_start]: 400 draws see every value
    model.train()
    assert not torch.equal(model(input_ids).last_hidden_state, model(input_ids).last_hidden_state)


def test_randomized_ids_are_sorted_distinct_and_within_range_in_training_and_sequential_in_evaluation() -> None:
    model = model_with("randomized", max_random_position=24)
    rule = model.position_id_rule
    ids = rule.position_ids(None, torch.Size((300, 10)), 0, True, torch.device("cpu"))
    assert ids.shape == (300, 10)
    assert bool((ids[:, 1:] > ids[:, :-1]).all())  # sorted and distinct
    assert int(ids.min()) >= 0 and int(ids.max()) < 24
    assert int(ids.max()) > 20 and len({tuple(row) for row in ids.tolist()}) > 1  # the range is used, rows differ
    assert torch.equal(rule.position_ids(None, torch.Size((3, 10)), 0, False, torch.device("cpu")),
                       torch.arange(10)[None])
    input_ids = torch.randint(1, 64, (2, 10))
    sequential = model_with("sequential")
    assert torch.equal(model(input_ids).last_hidden_state, sequential(input_ids).last_hidden_state)


def test_randomized_ids_default_to_the_training_length_and_refuse_more_tokens_than_ids() -> None:
    rule = model_with("randomized", max_position_embeddings=12).position_id_rule
    assert int(rule.position_ids(None, torch.Size((200, 12)), 0, True, torch.device("cpu")).max()) == 11
    with pytest.raises(ValueError, match="max_random_position"):
        rule.position_ids(None, torch.Size((1, 13)), 0, True, torch.device("cpu"))


def test_sequential_ids_continue_after_the_cache() -> None:
    rule = model_with("sequential").position_id_rule
    assert torch.equal(rule.position_ids(None, torch.Size((2, 3)), 5, False, torch.device("cpu")),
                       torch.tensor([[5, 6, 7]]))


@pytest.mark.parametrize(("overrides", "field", "says"), [
    (dict(position_id_rule="abacus", digit_token_ids=[64]), "digit_token_ids", "[0, 64)"),
    (dict(max_random_position=64), "max_random_position", "position_id_rule='sequential'"),
    (dict(digit_token_ids=[3]), "digit_token_ids", "(abacus)"),
    (dict(position_id_rule="abacus", digit_token_ids=[3], max_coupled_start=4), "max_coupled_start", "(coupled)"),
    (dict(position_id_rule="coupled", max_coupled_start=-1), "max_coupled_start", ">= 0"),
    (dict(position_id_rule="randomized", max_random_position=64, position_embedding_type="learned"),
     "max_random_position", "max_position_embeddings=32"),
    (dict(position_id_rule="ordinal"), "position_id_rule", "sequential, randomized, abacus, coupled"),
])
def test_a_rule_refuses_the_settings_it_cannot_read(overrides: dict, field: str, says: str) -> None:
    with pytest.raises(ValueError, match=f"`{field}`") as raised:
        config(**overrides)
    assert says in str(raised.value)


@pytest.mark.parametrize("scheme", sorted(POSITION_SCHEMES))
def test_a_scheme_reads_position_ids_exactly_when_its_class_says_so(scheme: str) -> None:
    """Other ids, the same tokens: the output changes iff the class says the scheme reads ids. The other ids double
    the distances (a shift alone leaves RoPE's offsets as they were) and start past FIRE's threshold of 512, where its
    normaliser reads them; a learned table's stay inside it. Weights drawn at a larger scale than the init's, so that
    every part (FIRE's small MLP too) moves the output well above rounding."""
    torch.manual_seed(0)
    model = HfAttnModel(config(position_embedding_type=scheme, max_position_embeddings=2048)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    input_ids = torch.randint(1, 64, (1, 12))
    slots = torch.arange(12)[None]
    with torch.no_grad():
        at_slots = model(input_ids, position_ids=slots).last_hidden_state
        renumbered = model(input_ids, position_ids=600 + 2 * slots).last_hidden_state
    changed = not torch.allclose(renumbered, at_slots, rtol=1e-4, atol=1e-4 * float(at_slots.abs().max()))
    assert changed == POSITION_SCHEMES[scheme].reads_position_ids


@pytest.mark.parametrize("scheme", [name for name, kind in POSITION_SCHEMES.items() if not kind.reads_position_ids])
@pytest.mark.parametrize("rule", [name for name, kind in POSITION_ID_RULES.items() if kind.renumbers])
def test_a_rule_that_renumbers_is_refused_with_a_scheme_that_ignores_the_ids(rule: str, scheme: str) -> None:
    """Not a model whose rule silently changes nothing: the error names the schemes that read ids."""
    with pytest.raises(ValueError, match="`position_id_rule`") as raised:
        config(position_id_rule=rule, position_embedding_type=scheme, **(ABACUS if rule == "abacus" else {}))
    assert "ignores position ids" in str(raised.value) and "rope" in str(raised.value)


@pytest.mark.parametrize("scheme", ["alibi", "t5"])
def test_a_bias_reads_the_distances_of_the_ids_not_of_the_slots(scheme: str) -> None:
    """Coupled ids of "12+34=" (places 1 2, 1 2, then the answer's 1 2 3): the bias of each query and key is the
    scheme's formula at the ids' distance, written out (ALiBi: -slope x |id_k - id_q|; T5: its table at the
    bidirectional bucket of id_k - id_q, 16 buckets a side, distances below 8 exact: a key of the next place, whose
    id is larger than the query's, gets a bucket of its own), not at the slots'."""
    torch.manual_seed(0)
    model = HfAttnModel(config(is_decoder=True, position_embedding_type=scheme, position_id_rule="coupled")).eval()
    ids = torch.tensor([[0, 1, 2, 0, 1, 2, 0, 1, 2, 3]])
    bias = model.positions.attention_positions(ids, 10, key_position_ids=ids).bias[0]  # (heads, query, key)
    distances = ids[0][None, :] - ids[0][:, None]  # key - query
    if scheme == "alibi":
        slopes = torch.tensor([2.0 ** (-8 * (head + 1) / 4) for head in range(4)])
        expected = -slopes[:, None, None] * distances.abs()
    else:
        buckets = distances.abs() + 16 * (distances > 0)  # a larger id: the second half of the buckets
        expected = model.positions.relative_attention_bias.weight.T[:, buckets]
    torch.testing.assert_close(bias, expected)


def test_a_cached_step_of_a_bias_under_coupled_ids_needs_every_keys_id() -> None:
    """After a cache the model cannot know the cached keys' coupled ids: without them, or with too few, it refuses
    rather than bias by the slots; with them the step equals the full pass's last position."""
    torch.manual_seed(0)
    model = HfAttnModel(config(is_decoder=True, position_embedding_type="alibi", position_id_rule="coupled")).eval()
    input_ids, ids = torch.tensor([encode("12+34=35")]), torch.tensor([[1, 2, 0, 1, 2, 0, 1, 2]])
    with torch.no_grad():
        full = model(input_ids, position_ids=ids).last_hidden_state
        cache = model(input_ids[:, :-1], position_ids=ids[:, :-1], use_cache=True).cache
        with pytest.raises(ValueError, match="pass key_position_ids"):
            model(input_ids[:, -1:], position_ids=ids[:, -1:], cache=copy.deepcopy(cache))
        with pytest.raises(ValueError, match="covers 7 keys, but there are 7 cached and 1 new"):
            model(input_ids[:, -1:], position_ids=ids[:, -1:], cache=copy.deepcopy(cache), key_position_ids=ids[:, 1:])
        step = model(input_ids[:, -1:], position_ids=ids[:, -1:], cache=cache, key_position_ids=ids).last_hidden_state
    torch.testing.assert_close(step[:, -1], full[:, -1], rtol=1e-5, atol=1e-5 * float(full.abs().max()))


def test_a_rules_settings_survive_save_and_load(tmp_path) -> None:
    config(position_id_rule="abacus", **ABACUS, max_abacus_start=7).save_pretrained(tmp_path)
    loaded = HfAttnConfig.from_pretrained(tmp_path)
    assert (loaded.position_id_rule, loaded.digit_token_ids, loaded.max_abacus_start) == ("abacus", DIGIT_IDS, 7)
    assert HfAttnConfig().position_id_rule == "sequential" and set(POSITION_ID_RULES) >= {"sequential", "coupled"}


def test_abacus_without_digit_tokens_is_refused_when_it_numbers_them() -> None:
    with pytest.raises(ValueError, match="abacus.*digit_token_ids lists none"):
        model_with("abacus")(torch.tensor([encode("12+345=")]))


def test_coupled_ids_are_shifted_by_one_random_start_per_sequence_in_training_only() -> None:
    model = model_with("coupled", max_coupled_start=3)
    given = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4]] * 400)
    ids = model.position_id_rule.training_ids(given)
    starts = ids[:, 1] - 1
    assert torch.equal(ids, given + starts[:, None] * (given > 0))  # special tokens' 0 stays 0
    assert set(starts.tolist()) == {0, 1, 2, 3}
    input_ids = torch.randint(1, 64, given.shape)
    eval_output = model(input_ids, position_ids=given).last_hidden_state
    assert torch.equal(eval_output, model(input_ids, position_ids=given).last_hidden_state)
    model.train()
    assert not torch.equal(model(input_ids, position_ids=given).last_hidden_state, eval_output)
    assert torch.equal(model_with("coupled").train().position_id_rule.training_ids(given), given)  # default: none


def test_coupled_ids_come_from_the_caller() -> None:
    model = model_with("coupled")
    with pytest.raises(ValueError, match="coupled.*pass position_ids"):
        model(torch.tensor([encode("12+345=")]))


def test_coupled_generation_without_the_planned_ids_is_refused_not_decoded_at_sequential_ids() -> None:
    torch.manual_seed(0)
    model = HfAttnForCausalLM(config(is_decoder=True, position_id_rule="coupled")).eval()
    prompt = torch.tensor([encode("12+345=")])
    with pytest.raises(ValueError, match="position_id_rule='coupled'.*no position_ids: pass the prompt's ids"):
        model.generate(input_ids=prompt, max_new_tokens=2, do_sample=False, pad_token_id=0)
    with pytest.raises(ValueError, match="no position_ids"):
        model.generate(prompt, max_new_tokens=2, do_sample=False, pad_token_id=0, position_ids=None)
    planned = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 0, 3, 2]])
    generated = model.generate(prompt, max_new_tokens=2, do_sample=False, pad_token_id=0, position_ids=planned)
    assert generated.shape == (1, 9)


# ------------------------------------------------------------------------- generate() with the cache


def abacus_ids_by_hand(row: list[int]) -> list[int]:
    """Each digit's place inside its run of digits, from 1; 0 elsewhere: one token at a time."""
    ids, run = [], 0
    for token in row:
        run = run + 1 if token in DIGIT_IDS else 0
        ids.append(run)
    return ids


def sequential_ids_by_hand(mask: list[int]) -> list[int]:
    """0, 1, 2, ... from each row's first real token (left padding gets 0)."""
    return [max(sum(mask[: index + 1]) - 1, 0) for index in range(len(mask))]


# The prompt's ids and then the planned ids of its answer positions (more than are generated, then one more a step).
PLANNED = [[0, 1, 2, 0, 1, 2, 3, 0, 9, 8, 7], [0, 0, 1, 0, 1, 2, 3, 0, 4, 5, 6]]


@pytest.mark.parametrize("scheme", ["rope", "learned", "sinusoidal", "fire", "alibi", "t5"])
@pytest.mark.parametrize("rule", ["sequential", "randomized", "abacus", "coupled"])
def test_cached_generation_reads_the_ids_a_full_forward_pass_over_the_same_sequence_gives(rule: str,
                                                                                         scheme: str) -> None:
    """Each step's logits under `generate()` (with the cache) equal a full pass's over the generated sequence, with
    the ids of the rule written out by hand: the biases (FIRE, ALiBi, T5) read the cached keys' ids at every step."""
    settings = dict(**ABACUS, max_abacus_start=3) if rule == "abacus" else {}
    torch.manual_seed(0)
    model = HfAttnForCausalLM(config(is_decoder=True, position_embedding_type=scheme, position_id_rule=rule,
                                     max_position_embeddings=40, **settings)).eval()
    prompt = torch.tensor([encode("12+3456="), [0, *encode("9+9999=")]])
    mask = torch.tensor([[1] * 8, [0] + [1] * 7])
    extra = {"position_ids": torch.tensor(PLANNED)} if rule == "coupled" else {}
    generated = model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=5, do_sample=False,
                               pad_token_id=0, output_logits=True, return_dict_in_generate=True, **extra)
    sequence = generated.sequences
    full_mask = torch.cat([mask, torch.ones(2, 5, dtype=mask.dtype)], dim=1)
    if rule == "abacus":
        ids = [abacus_ids_by_hand(row) for row in sequence.tolist()]
    elif rule == "coupled":
        ids = [row + [row[-1] + step for step in range(1, 3)] for row in PLANNED]
    else:
        ids = [sequential_ids_by_hand(row) for row in full_mask.tolist()]
    with torch.no_grad():
        full = model(input_ids=sequence, attention_mask=full_mask, position_ids=torch.tensor(ids)).logits
    cached = torch.stack(generated.logits, dim=1)
    torch.testing.assert_close(cached, full[:, 7:-1], rtol=1e-4, atol=1e-4)
