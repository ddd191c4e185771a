"""Training a decoder on a sequence task (`hf_attn.experiments.sequence`) and scoring pairs with a saved one."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from hf_attn import HfAttnConfig
from hf_attn.experiments.config import Experiment, load_experiment
from hf_attn.experiments.sequence import fill_answers, generate_answers, score_pairs, sequence_task
from hf_attn.modeling_hf_attn import HfAttnForCausalLM, HfAttnForMaskedLM
from hf_attn.publishing.cards import card_for_run
from hf_attn.tasks.length import (
    GeneratedLengthTask,
    Pair,
    encoder_features,
    exact_match,
    get_length_task,
    length_buckets,
    task_tokenizer,
    with_mask_token,
    write_pairs,
)

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "length" / "rope.yaml"
TINY = ["dataset.max_train_length=3", "dataset.n_train=64", "dataset.n_validation=16", "dataset.n_test_per_length=2",
        "model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
        "model.intermediate_size=64", "training.max_steps=4", "training.eval_steps=2", "training.save_steps=2",
        "training.per_device_train_batch_size=16", "training.disable_tqdm=true"]


def tiny_experiment(*overrides: str) -> Experiment:
    return load_experiment(CONFIG, [*TINY, *overrides])


def random_decoder(tokenizer, seed: int = 1, **overrides: object) -> HfAttnForCausalLM:  # noqa: ANN001
    """A small untrained decoder whose greedy answers differ from input to input (wide initial weights)."""
    torch.manual_seed(seed)
    config = HfAttnConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=64, is_decoder=True, position_embedding_type="rope",
                          pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                          eos_token_id=tokenizer.eos_token_id, initializer_range=0.5, max_position_embeddings=64,
                          **overrides)
    return HfAttnForCausalLM(config).eval()


# Position ids of the text and the number of answer tokens written so far: those of the whole sequence.
IdsOf = Callable[[str, int], list[int]]


def coupled_reverse_ids(text: str, written: int) -> list[int]:
    """Reverse's coupled ids written out: [BOS] 0, the n items 1..n, [SEP] 0, then the answer's n, n-1, ..., 1,
    going on by one past them (2, 3, ...); those of the first `written` answer positions."""
    n = len(text.split())
    answer = [*range(n, 0, -1), *range(2, 2 + written)]
    return [0, *range(1, n + 1), 0, *answer[:written]]


@torch.no_grad()
def greedy_one_by_one(model: HfAttnForCausalLM, tokenizer, text: str, max_new_tokens: int,  # noqa: ANN001
                      unfinished: bool = False, ids_of: IdsOf | None = None) -> str | None:
    """The greedy answer to one unpadded prompt, each token the argmax of a full forward pass (no cache, no batch;
    at the position ids `ids_of` gives, else the model's own); None when no [EOS] comes within `max_new_tokens` (an
    answer that never ends matches no target), or with `unfinished` the tokens written by then."""
    ids = tokenizer(text)["input_ids"]
    answer: list[int] = []
    for _ in range(max_new_tokens):
        position_ids = torch.tensor([ids_of(text, len(answer))]) if ids_of is not None else None
        token = int(model(input_ids=torch.tensor([ids + answer]), position_ids=position_ids).logits[0, -1].argmax())
        if token == tokenizer.eos_token_id:
            return tokenizer.decode(answer)  # every token written, special ones too
        answer.append(token)
    return tokenizer.decode(answer) if unfinished else None


def test_the_loss_is_the_mean_cross_entropy_of_the_answer_tokens() -> None:
    task = sequence_task(tiny_experiment())
    tokenizer = task.tokenizer
    model = random_decoder(tokenizer)
    rows = [task.train_dataset[index] for index in range(6)]
    batch = task.data_collator(rows)
    assert len({len(row["input_ids"]) for row in rows}) > 1  # the batch is padded
    with torch.no_grad():
        loss = model(**{key: batch[key] for key in ("input_ids", "attention_mask", "labels")}).loss
        # Each example alone, unpadded: the log-probability of every token after [SEP] (target and [EOS]).
        losses = []
        for row in rows:
            ids = row["input_ids"]
            answer_start = ids.index(tokenizer.sep_token_id) + 1
            logits = model(input_ids=torch.tensor([ids])).logits[0]
            losses.append(F.cross_entropy(logits[answer_start - 1 : -1], torch.tensor(ids[answer_start:]),
                                          reduction="none"))
    torch.testing.assert_close(loss, torch.cat(losses).mean())


def pairs_with_known_answers(model: HfAttnForCausalLM, tokenizer,  # noqa: ANN001
                             ids_of: IdsOf | None = None) -> tuple[list[Pair], list[bool]]:
    """Pairs of lengths 1-6 whose targets are, for every other one, the model's one-by-one greedy answer where it
    ends (so those are right) and otherwise the input; and whether each answer read one by one matches."""
    inputs = ["a", "b c", "j i h", "a a a a", "c d e f g", "b j a i c h", "e", "f g h i", "d d", "g h i"]
    known = [greedy_one_by_one(model, tokenizer, text, max_new_tokens=30, ids_of=ids_of) for text in inputs]
    pairs = [Pair(text, answer if index % 2 == 0 and answer else text, len(text.split()))
             for index, (text, answer) in enumerate(zip(inputs, known))]
    return pairs, [answer is not None and exact_match(answer, pair.target) for answer, pair in zip(known, pairs)]


def test_exact_match_scores_of_batched_generation_equal_exact_match_of_answers_read_one_by_one() -> None:
    tokenizer = task_tokenizer("copy")
    model = random_decoder(tokenizer)
    pairs, expected = pairs_with_known_answers(model, tokenizer)
    assert 0 < sum(expected) < len(pairs)  # the test sees right and wrong answers
    buckets = [(1, 3), (4, 6)]
    scores, answers = score_pairs(model, tokenizer, pairs, buckets)
    assert [exact_match(answer, pair.target) for answer, pair in zip(answers, pairs)] == expected
    for score in scores:
        inside = [right for right, pair in zip(expected, pairs) if score.low <= pair.length <= score.high]
        assert (score.correct, score.count) == (sum(inside), len(inside))
    assert tokenizer.padding_side == "right"  # left padding for generation only
    # batches of one: the same answers
    single = generate_answers(model, tokenizer, [p.input for p in pairs], [p.target for p in pairs], batch_size=1)
    assert single == answers


def test_coupled_training_rows_carry_the_task_s_ids_which_the_collator_pads() -> None:
    task = sequence_task(tiny_experiment("model.position_id_rule=coupled"))
    rows = [task.train_dataset[index] for index in range(6)]
    sep = task.tokenizer.sep_token_id
    for row in rows:
        text = task.tokenizer.decode(row["input_ids"][1 : row["input_ids"].index(sep)])
        assert row["position_ids"] == coupled_reverse_ids(text, len(text.split()) + 1)  # target and [EOS]
    batch = task.data_collator(rows)
    assert len({len(row["input_ids"]) for row in rows}) > 1  # the batch is padded, on the right
    for row, ids in zip(rows, batch["position_ids"].tolist()):
        assert ids == row["position_ids"] + [0] * (len(ids) - len(row["position_ids"]))
    assert batch["position_ids"].shape == batch["input_ids"].shape
    # The padded batch's loss (its real tokens alone, unpadded) is the mean over each example read alone at its ids.
    model = random_decoder(task.tokenizer, position_id_rule="coupled")
    with torch.no_grad():
        loss = model(**batch, use_cache=False).loss
        losses = []
        for row in rows:
            ids = row["input_ids"]
            answer_start = ids.index(sep) + 1
            logits = model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([row["position_ids"]])).logits[0]
            losses.append(F.cross_entropy(logits[answer_start - 1 : -1], torch.tensor(ids[answer_start:]),
                                          reduction="none"))
    torch.testing.assert_close(loss, torch.cat(losses).mean())


def test_abacus_runs_take_the_digit_tokens_of_the_task_s_tokenizer() -> None:
    task = sequence_task(tiny_experiment("dataset.name=addition_reversed", "model.position_id_rule=abacus",
                                         "max_length=64"))
    digits = task.model_defaults["digit_token_ids"]
    assert task.tokenizer.convert_ids_to_tokens(digits) == list("0123456789")
    assert "digit_token_ids" not in sequence_task(tiny_experiment()).model_defaults


def test_a_coupled_decoder_is_scored_at_the_task_s_planned_ids() -> None:
    tokenizer = task_tokenizer("reverse")
    model = random_decoder(tokenizer, position_id_rule="coupled")
    pairs, expected = pairs_with_known_answers(model, tokenizer, ids_of=coupled_reverse_ids)
    assert 0 < sum(expected) < len(pairs)  # the test sees right and wrong answers
    task = GeneratedLengthTask(name="reverse", max_train_length=3)
    scores, answers = score_pairs(model, tokenizer, pairs, [(1, 3), (4, 6)], task=task)
    assert [exact_match(answer, pair.target) for answer, pair in zip(answers, pairs)] == expected
    with pytest.raises(ValueError, match="position_id_rule='coupled' reads the task's position ids"):
        score_pairs(model, tokenizer, pairs, None)


def test_a_run_refuses_a_max_length_shorter_than_its_longest_test_example() -> None:
    # max_train_length 3: the 4L = 12 test pairs read [BOS] 12 items [SEP] 12 items [EOS] = 27 tokens
    with pytest.raises(ValueError, match="is 27 tokens, past the experiment's max_length 26.*set max_length: 27"):
        sequence_task(tiny_experiment("max_length=26"))
    assert sequence_task(tiny_experiment("max_length=27")).sizes == {"n_train": 64, "n_validation": 16, "n_test": 8}


def test_hf_attn_train_trains_a_decoder_on_a_sequence_task_that_loads_generates_and_scores_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    from hf_attn import cli

    run = tmp_path / "run"
    cli.main(["train", "--config", str(CONFIG), "--output-dir", str(run), *TINY])
    metrics = json.loads((run / "metrics.json").read_text())
    # evaluated every 2 of 4 steps; the checkpoint kept (and scored) is the one of the lowest validation loss
    assert [entry["step"] for entry in metrics["val_loss_by_step"]] == [2, 4]
    assert metrics["val_loss"] == pytest.approx(min(entry["loss"] for entry in metrics["val_loss_by_step"]))
    assert [(row["low"], row["high"]) for row in metrics["val_exact_match_by_length"]] == [(1, 3)]
    assert [(row["low"], row["high"]) for row in metrics["test_exact_match_by_length"]] == length_buckets(3)[1:]
    assert [row["count"] for row in metrics["test_exact_match_by_length"]] == [6, 2]
    for row in metrics["test_exact_match_by_length"]:
        p = row["accuracy"]
        assert row["standard_error"] == pytest.approx((p * (1 - p) / row["count"]) ** 0.5)
    # at each length: the test split's lengths, 2 pairs each, whose right answers add up to their bucket's
    each = metrics["test_exact_match_by_each_length"]
    assert [(row["low"], row["high"], row["count"]) for row in each] == [(n, n, 2) for n in (4, 5, 6, 12)]
    assert [sum(row["correct"] for row in each[:3]), each[3]["correct"]] == [
        row["correct"] for row in metrics["test_exact_match_by_length"]]

    model = HfAttnForCausalLM.from_pretrained(run).eval()
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert tokenizer.get_vocab() == task_tokenizer("reverse").get_vocab()
    assert model.config.is_decoder and model.config.eos_token_id == tokenizer.eos_token_id
    prompt = tokenizer("a b c", return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] > prompt["input_ids"].shape[1]

    # score-pairs on pairs whose right answers are the saved model's own (read one by one)
    pairs, _ = pairs_with_known_answers(model, tokenizer)
    write_pairs(tmp_path / "pairs.jsonl", pairs)
    expected, _ = score_pairs(model, tokenizer, pairs, [(1, 3), (4, 6)])
    capsys.readouterr()
    cli.main(["score-pairs", "--model", str(run), "--pairs", str(tmp_path / "pairs.jsonl"), "--buckets", "1-3,4-6"])
    scored = json.loads(capsys.readouterr().out)
    assert [(row["low"], row["high"], row["correct"], row["count"]) for row in scored["exact_match_by_length"]] == [
        (score.low, score.high, score.correct, score.count) for score in expected]
    # without --buckets, those of the task the run trained on (max_train_length 3): pairs of length 4-6 fall in 4-6
    cli.main(["score-pairs", "--model", str(run), "--pairs", str(tmp_path / "pairs.jsonl")])
    assert [(row["low"], row["high"]) for row in json.loads(capsys.readouterr().out)["exact_match_by_length"]] == [
        (1, 3), (4, 6)]
    # --by-position: each bucket's word accuracy along the answer, counted here from the answers read one by one
    cli.main(["score-pairs", "--model", str(run), "--pairs", str(tmp_path / "pairs.jsonl"), "--by-position"])
    for row in json.loads(capsys.readouterr().out)["exact_match_by_length"]:
        inside = [pair for pair in pairs if row["low"] <= pair.length <= row["high"]]
        answers = [greedy_one_by_one(model, tokenizer, pair.input, len(pair.target.split()) + 1,
                                     unfinished=True).split() for pair in inside]
        expected = [(position + 1, sum(position < len(answer) and answer[position] == pair.target.split()[position]
                                       for answer, pair in zip(answers, inside) if position < len(pair.target.split())),
                     sum(position < len(pair.target.split()) for pair in inside))
                    for position in range(max(len(pair.target.split()) for pair in inside))]
        assert [(r["position"], r["correct"], r["count"]) for r in row["word_accuracy_by_position"]] == expected

    # its card: the measured exact match by bucket, the first bucket past the training lengths in the model-index, no
    # IMDb, and an example whose answer is the task's (reversed by hand)
    card = card_for_run(run, "someone/reverse-rope")
    assert card.data.eval_results[0].metric_value == metrics["test_exact_match_by_length"][0]["accuracy"]
    assert card.data.datasets is None and "byte-level" not in card.content
    for split, key in (("validation", "val_exact_match_by_length"), ("test", "test_exact_match_by_length")):
        for row in metrics[key]:
            assert (f"| {split} | {row['low']}..{row['high']} | {row['accuracy']:.3f} ± {row['standard_error']:.3f} | "
                    f"{row['count']} |") in card.content
    question, answer = re.search(r'tokenizer\("([a-j ]+)", return_tensors="pt"\).*# ([a-j ]+)\n', card.content,
                                 re.DOTALL).groups()
    assert answer.split() == question.split()[::-1]


@pytest.mark.slow
def test_hf_attn_train_with_coupled_ids_saves_a_decoder_that_score_pairs_reads_at_the_task_s_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    from hf_attn import cli

    run = tmp_path / "run"
    cli.main(["train", "--config", str(CONFIG), "--output-dir", str(run), *TINY, "model.position_id_rule=coupled"])
    model = HfAttnForCausalLM.from_pretrained(run).eval()
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert model.config.position_id_rule == "coupled"
    # score-pairs on pairs whose right answers are the saved model's own, read one by one at the ids written out
    pairs, known = pairs_with_known_answers(model, tokenizer, ids_of=coupled_reverse_ids)
    write_pairs(tmp_path / "pairs.jsonl", pairs)
    capsys.readouterr()
    cli.main(["score-pairs", "--model", str(run), "--pairs", str(tmp_path / "pairs.jsonl"), "--buckets", "1-3,4-6"])
    scored = json.loads(capsys.readouterr().out)["exact_match_by_length"]
    assert [(row["correct"], row["count"]) for row in scored] == [
        (sum(right for right, pair in zip(known, pairs) if low <= pair.length <= high),
         sum(low <= pair.length <= high for pair in pairs)) for low, high in ((1, 3), (4, 6))]


def test_hf_attn_train_with_abacus_ids_saves_the_task_s_digit_tokens(tmp_path: Path) -> None:
    from hf_attn import cli

    run = tmp_path / "run"
    cli.main(["train", "--config", str(CONFIG), "--output-dir", str(run), *TINY, "dataset.name=addition_reversed",
              "model.position_id_rule=abacus", "max_length=64"])
    config = HfAttnConfig.from_pretrained(run)
    assert (config.position_id_rule, config.digit_token_ids) == ("abacus", list(range(6, 16)))  # after 5 specials, +
    assert json.loads((run / "metrics.json").read_text())["test_exact_match_by_length"]


def test_hf_attn_train_teaches_a_cope_decoder_reverse_and_scores_it_by_length(tmp_path: Path) -> None:
    """CoPE through the length study's code path (configs/length/cope.yaml): a few steps of training, its learned
    table saved, and the test split scored by length."""
    from safetensors.torch import load_file

    from hf_attn import cli

    run = tmp_path / "run"
    cli.main(["train", "--config", str(CONFIG.with_name("cope.yaml")), "--output-dir", str(run), *TINY])
    config = HfAttnConfig.from_pretrained(run)
    assert config.position_embedding_type == "cope"
    table = load_file(run / "model.safetensors")["model.positions.embeddings"]
    assert table.shape == (1, 16, config.max_position_embeddings + 1)  # 1 layer, head_dim 16
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["optimizer_steps"] == 4 and math.isfinite(metrics["val_loss"])
    assert metrics["test_exact_match_by_length"]


@pytest.mark.parametrize(("lines", "message"), [
    ('{"input": "a b"}\n', r"pairs.jsonl, line 1: the key \"target\" is missing"),
    ('{"input": "a b", "target": "b a"}\nnot json\n', "pairs.jsonl, line 2: not valid JSON"),
    ('{"input": "a z", "target": "z a"}\n', "pair 1: the word 'z' is not in"),
    ("\n", "holds no pairs"),
])
def test_score_pairs_refuses_a_bad_file_in_one_line(tmp_path: Path, lines: str, message: str) -> None:
    from hf_attn.experiments.sequence import score_saved

    tokenizer = task_tokenizer("reverse")
    random_decoder(tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "pairs.jsonl").write_text(lines)
    with pytest.raises(ValueError, match=message):
        score_saved(tmp_path / "model", tmp_path / "pairs.jsonl")


@pytest.mark.parametrize(("prompts", "named"), [
    (["a b c", "hello world"], "prompt 2: the words 'hello', 'world' are not in"),
    (["a b X c"], "prompt 1: the word 'X' is not in"),
])
def test_generate_refuses_a_prompt_with_words_outside_a_word_level_vocabulary_before_generating(
    prompts: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A word-level tokenizer reads a word it does not know as [UNK]: the model would answer another prompt (or
    nothing). `hf-attn generate` refuses in one line naming the words and the task's vocabulary, as score-pairs."""
    from hf_attn import cli

    tokenizer = task_tokenizer("reverse")
    random_decoder(tokenizer).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "--model", str(tmp_path), *prompts])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""  # not even the first prompt's answer
    error = captured.err.strip().splitlines()[-1]
    assert named in error and f"vocabulary ({' '.join(get_length_task('reverse').symbols)})" in error, error


def test_generate_names_the_tokens_of_a_continuation_without_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A continuation of special tokens only decodes to nothing: the line stays (one per prompt), and stderr says
    what was generated. With every logit 0, greedy decoding takes token 0, [PAD], each time."""
    from hf_attn import cli

    tokenizer = task_tokenizer("reverse")
    model = random_decoder(tokenizer)
    torch.nn.init.zeros_(model.get_output_embeddings().weight)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    capsys.readouterr()
    cli.main(["generate", "--model", str(tmp_path), "--max-new-tokens", "2", "a b"])
    captured = capsys.readouterr()
    assert captured.out == "\n"
    assert "hf-attn generate: prompt 1's continuation holds no text, only [PAD] [PAD]" in captured.err


def test_score_pairs_refuses_a_length_in_no_bucket_before_generating(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from hf_attn.experiments import sequence

    tokenizer = task_tokenizer("reverse")
    random_decoder(tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "pairs.jsonl").write_text('{"input": "a b", "target": "b a"}\n{"input": "", "target": ""}\n')
    monkeypatch.setattr(sequence, "score_pairs", lambda *args: pytest.fail("nothing is generated"))
    with pytest.raises(ValueError, match=r"pairs.jsonl, pair 2: its length 0 lies in none of the buckets 1-8,9-16,32; "
                                         r"pass --buckets .* \(e.g. --buckets 1-8,9-16,32,0\)"):
        sequence.score_saved(tmp_path / "model", tmp_path / "pairs.jsonl", buckets=[(1, 8), (9, 16), (32, 32)])


@pytest.mark.slow
def test_the_shipped_scan_experiment_trains_a_decoder_scored_in_and_past_the_training_lengths(tmp_path: Path) -> None:
    from hf_attn import cli

    cli.main(["train", "--config", str(CONFIG.parent / "scan.yaml"), "--output-dir", str(tmp_path / "run"),
              "model.hidden_size=16", "model.num_hidden_layers=1", "model.num_attention_heads=2",
              "model.intermediate_size=32", "training.max_steps=2", "training.eval_steps=2",
              "training.save_steps=2", "training.disable_tqdm=true"])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # Lake & Baroni's length split: 16,990 training commands (500 of them validation), 3,920 test ones
    assert (metrics["n_train"], metrics["n_validation"], metrics["n_test"]) == (16_490, 500, 3_920)
    assert [(row["low"], row["high"], row["count"]) for row in metrics["val_exact_match_by_length"]] == [(1, 22, 500)]
    assert [(row["low"], row["high"], row["count"]) for row in metrics["test_exact_match_by_length"]] == [
        (23, 48, 3_920)]
    assert metrics["vocab_size"] == 5 + 13 + 6  # special tokens, command words, actions


# ------------------------------------------------------------------------- an encoder filling the answer's masks


def random_encoder(tokenizer, scheme: str = "rope", seed: int = 1, **overrides: object  # noqa: ANN001
                   ) -> HfAttnForMaskedLM:
    """A small untrained encoder (a masked LM) whose filled answers differ from input to input."""
    torch.manual_seed(seed)
    config = HfAttnConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=64, position_embedding_type=scheme, pad_token_id=tokenizer.pad_token_id,
                          initializer_range=0.5, max_position_embeddings=64, **overrides)
    return HfAttnForMaskedLM(config).eval()


def test_encoder_features_hide_the_answer_behind_one_mask_per_word_and_score_only_those_places() -> None:
    tokenizer = with_mask_token(task_tokenizer("reverse"))
    features = encoder_features(tokenizer, ["a b c", "j"], ["c b a", "j"])
    words = [tokenizer.convert_ids_to_tokens(ids) for ids in features["input_ids"]]
    assert words == [["[BOS]", "a", "b", "c", "[SEP]", "[MASK]", "[MASK]", "[MASK]", "[EOS]"],
                     ["[BOS]", "j", "[SEP]", "[MASK]", "[EOS]"]]
    vocab = tokenizer.get_vocab()
    assert features["labels"] == [[-100] * 5 + [vocab["c"], vocab["b"], vocab["a"]] + [-100],
                                  [-100] * 3 + [vocab["j"], -100]]
    # a decoder's vocabulary is left as it was: the mask is the encoder's, added after every other token
    assert tokenizer.mask_token_id == len(task_tokenizer("reverse"))
    with pytest.raises(ValueError, match="has none: use with_mask_token"):
        encoder_features(task_tokenizer("reverse"), ["a"], ["a"])


@pytest.mark.parametrize("rule", ["sequential", "coupled"])
def test_an_encoder_s_answers_are_its_most_likely_token_at_each_mask_read_one_pair_at_a_time(rule: str) -> None:
    tokenizer = with_mask_token(task_tokenizer("copy"))
    model = random_encoder(tokenizer, position_id_rule=rule)
    inputs = ["a", "b c", "j i h", "a a a a", "c d e f g", "b j a i c h", "e", "f g h i"]
    expected = []
    with torch.no_grad():  # each pair alone, built by hand: [BOS] input [SEP] [MASK] x n [EOS]
        for text in inputs:
            words = ["[BOS]", *text.split(), "[SEP]", *["[MASK]"] * len(text.split()), "[EOS]"]
            n = len(text.split())  # copy's coupled ids: the i-th answer place copies item i
            position_ids = torch.tensor([[0, *range(1, n + 1), 0, *range(1, n + 2)]]) if rule == "coupled" else None
            logits = model(input_ids=torch.tensor([tokenizer.convert_tokens_to_ids(words)]),
                           position_ids=position_ids).logits[0]
            start = len(text.split()) + 2
            expected.append(" ".join(tokenizer.convert_ids_to_tokens(
                logits[start : start + len(text.split())].argmax(-1).tolist())))
    pairs = [Pair(text, answer if index % 2 == 0 else text, len(text.split()))
             for index, (text, answer) in enumerate(zip(inputs, expected))]
    task = GeneratedLengthTask(name="copy", max_train_length=3)
    scores, answers = score_pairs(model, tokenizer, pairs, [(1, 3), (4, 6)], task=task)
    assert answers == expected and len(set(answers)) > 1
    right = [exact_match(answer, pair.target) for answer, pair in zip(answers, pairs)]
    assert 0 < sum(right) < len(pairs)
    assert [(score.correct, score.count) for score in scores] == [
        (sum(r for r, p in zip(right, pairs) if low <= p.length <= high),
         sum(1 for p in pairs if low <= p.length <= high)) for low, high in [(1, 3), (4, 6)]]


def test_without_positions_an_encoder_fills_every_mask_alike_and_with_them_it_need_not() -> None:
    # Bidirectional attention without positions is permutation-equivariant: the masks' identical inputs give
    # identical outputs, so such an encoder's answer repeats one token (a bag of tokens); with positions it need not.
    tokenizer = with_mask_token(task_tokenizer("reverse"))
    inputs = ["a b c d e f", "j i h g", "c a b"]
    for scheme, repeats in (("none", True), ("rope", False)):
        answers = fill_answers(random_encoder(tokenizer, scheme), tokenizer, inputs, inputs)
        assert all(len(set(answer.split())) == 1 for answer in answers) is repeats, scheme


def test_hf_attn_train_with_is_decoder_false_trains_an_encoder_that_loads_scores_pairs_and_is_carded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from hf_attn import cli

    run = tmp_path / "run"
    cli.main(["train", "--config", str(CONFIG), "--output-dir", str(run), *TINY, "model.is_decoder=false"])
    metrics = json.loads((run / "metrics.json").read_text())
    assert [(row["low"], row["high"]) for row in metrics["test_exact_match_by_length"]] == length_buckets(3)[1:]
    model = AutoModelForMaskedLM.from_pretrained(run).eval()
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert isinstance(model, HfAttnForMaskedLM) and not model.config.is_decoder
    assert tokenizer.mask_token == "[MASK]" and model.config.vocab_size == len(tokenizer)

    pairs = [Pair(text, " ".join(text.split()[::-1]), len(text.split())) for text in ("a b", "c d e f", "g")]
    write_pairs(tmp_path / "pairs.jsonl", pairs)
    expected, _ = score_pairs(model, tokenizer, pairs, None)
    capsys.readouterr()
    cli.main(["score-pairs", "--model", str(run), "--pairs", str(tmp_path / "pairs.jsonl"), "--buckets", "1-6"])
    scored = json.loads(capsys.readouterr().out)["exact_match_by_length"]
    assert [row["correct"] for row in scored] == [sum(score.correct for score in expected)]

    # the card calls it an encoder, and its example runs: the answer it prints is the model's own filling
    card = card_for_run(run, "someone/reverse-encoder")
    assert card.data.pipeline_tag == "fill-mask" and "hf-attn encoder for `reverse`" in card.content
    snippet = re.search(r"```python\n(.*?)```", card.content, re.DOTALL).group(1)
    question = re.search(r'tokenizer\("([a-j ]+)", masks', snippet).group(1)
    snippet = snippet.replace('"someone/reverse-encoder", trust_remote_code=True', repr(str(run)))
    exec(compile(snippet, "card", "exec"), {})  # noqa: S102 - the card's own example, on the saved folder
    printed = capsys.readouterr().out.split("#")[0].strip()
    assert printed == fill_answers(model, tokenizer, [question], [question])[0]


def test_an_encoder_refuses_scheduled_sampling() -> None:
    with pytest.raises(ValueError, match="an encoder .* has no answers to sample"):
        sequence_task(tiny_experiment("model.is_decoder=false", "scheduled_sampling.schedule=linear"))
