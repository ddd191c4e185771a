"""Model cards from real metrics: the classifier card of a run with test scores, the card of a pretrained encoder or
of a sequence task's model, each generated with `huggingface_hub.ModelCard`, so that its YAML `model-index` holds
exactly the measured numbers."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, NamedTuple

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..evaluation import f1_key
from ..tasks.imdb import IMDB_HUB_ID
from ..tasks.length import get_length_task

CARD_TEMPLATE = """---
{card_data}
---

# {title}

A {layers}-layer, {heads}-head, d={hidden} Transformer encoder classifier for {task} with
**{scheme}** position encoding, built with hf-attn (a Hugging Face–compatible package whose
position scheme is one config field).

## Results ({split_name}: train / validation / test texts)

| split | accuracy | {f1_name} | loss |
|---|---|---|---|
| validation | {val_accuracy:.4f} | {val_f1:.4f} | {val_loss:.4f} |
| test | {test_accuracy:.4f} | {test_f1:.4f} | {test_loss:.4f} |

Reproduce: `{command}`

## Model

- Position scheme: `{scheme}`; attention: SDPA (eager returns attention weights); pre-norm: {pre_norm}.
- Tokenizer: Week 3 byte-level BPE, {vocab_size} tokens; input: {model_input}.
- Token embedding: {embedding_origin}.
{pretraining}
## Training

Hugging Face `Trainer` (Accelerate underneath), {epochs_counted} over {n_train} reviews,
{optimizer_steps} optimizer steps, {train_time} on {processes}; evaluation and a
checkpoint every {evals_per_epoch_fraction}epoch, {early_stopping}, best checkpoint (lowest validation
loss) restored. Hyperparameters: `{training}`.
{restored_weights}
## Intended use and limitations

For studying position encodings and small attention models. It reads
{model_reading}, was trained on {data_name} alone, and is not a general-purpose
classifier: expect errors on negation, sarcasm and texts whose verdict comes late.

## How to load

```python
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

repo = "{repo_id}"
model = AutoModelForSequenceClassification.from_pretrained(repo, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
print(pipeline("text-classification", model=model, tokenizer=tokenizer)("A moving, wonderful film."))
```
"""


def build_model_card(metrics: dict[str, Any], config: dict[str, Any], repo_id: str) -> ModelCard:
    """A card whose metadata `model-index` carries the run's validation and test results."""
    scheme = config["position_embedding_type"]
    sizes = f"{metrics['n_train']:,}/{metrics['n_validation']:,}/{metrics['n_test']:,}"
    data = metrics.get("dataset") or imdb_record(metrics.get("experiment", {}).get("dataset"))
    is_imdb = data["hub_id"] == IMDB_HUB_ID
    f1 = f1_key(len(data["label_names"]))
    split_name = f"{data['name']} ({sizes})"
    dataset = dict(dataset_type=data["hub_id"] or data["name"], dataset_name=split_name)
    eval_results = [
        EvalResult(task_type="text-classification", metric_type=metric, metric_value=metrics[f"{split}_{metric}"],
                   dataset_split=split_name, **dataset)
        for split, split_name in (("test", "test"), ("val", "validation"))
        for metric in ("accuracy", f1)
    ]
    card_data = ModelCardData(
        language="en", license="apache-2.0", library_name="transformers", pipeline_tag="text-classification",
        datasets=[data["hub_id"]] if data["hub_id"] else None, metrics=["accuracy", f1], model_name=repo_id,
        tags=["hf-attn", f"position-{scheme}", *(["sentiment-analysis"] if is_imdb else []), "custom_code"],
        eval_results=eval_results,
    )
    experiment = metrics.get("experiment", {})
    evals = experiment.get("evals_per_epoch", 1)
    text = CARD_TEMPLATE.format(
        card_data=card_data.to_yaml(),
        title=f"hf-attn {'IMDb ' if is_imdb else ''}classifier ({scheme} positions)", split_name=split_name,
        task="IMDb sentiment" if is_imdb else f"{data['name']} ({', '.join(data['label_names'])})",
        data_name="IMDb" if is_imdb else data["name"], f1_name="F1" if f1 == "f1" else "macro-F1",
        val_f1=metrics[f"val_{f1}"], test_f1=metrics[f"test_{f1}"],
        layers=config["num_hidden_layers"], heads=config["num_attention_heads"], hidden=config["hidden_size"],
        scheme=scheme, pre_norm=config.get("norm_position", "pre") == "pre",
        vocab_size=config["vocab_size"], max_length=metrics.get("max_length"),
        train_time=_train_time(metrics), embedding_origin=_embedding_origin(experiment),
        model_input=_model_input(experiment, config, metrics.get("max_length")),
        model_reading=_model_reading(experiment, config, metrics.get("max_length")),
        pretraining=_pretraining_text(metrics.get("pretraining")),
        evals_per_epoch_fraction="" if evals == 1 else f"1/{evals} ",
        early_stopping=("no early stopping" if experiment.get("early_stopping_patience") is None
                        else f"early stopping after {experiment['early_stopping_patience']} evaluations without "
                        "a lower validation loss"),
        training=json.dumps(experiment.get("training", {})), repo_id=repo_id,
        epochs_counted=_counted(metrics["epochs"], "epoch"), processes=_processes(metrics),
        restored_weights=_restored_weights_text(metrics.get("restored_weights")),
        command=metrics.get("command") or "see metrics.json",
        **{key: metrics[key] for key in ("val_accuracy", "val_loss", "test_accuracy", "test_loss", "n_train",
                                         "optimizer_steps")},
    )
    return ModelCard(text)


def imdb_record(source: str | None) -> dict[str, Any]:
    """What runs from before the dataset registry (their metrics.json has no `dataset` record) trained on: IMDb."""
    name = "IMDb sample shipped with hf-attn" if source == "sample" else "IMDb seed split"
    return {"name": name, "hub_id": IMDB_HUB_ID, "label_names": ["neg", "pos"]}


def _counted(count: float, noun: str, plural_ending: str = "s") -> str:
    """'1 epoch', '2 epochs', '1.5 epochs'."""
    return f"{count:g} {noun}{'' if count == 1 else plural_ending}"


def _train_time(metrics: dict[str, Any]) -> str:
    """Training time, saying which steps it covers when the clock started after step 0."""
    seconds, first_step = metrics["train_runtime_s"], metrics.get("timed_from_step") or 0
    if first_step == 0:
        return f"{seconds:.0f} s"
    return (f"{seconds:.0f} s for steps {first_step + 1}-{metrics['optimizer_steps']} (the time of the "
            f"first {first_step} steps was not recorded)")


PRECISION_WORDS = {"bf16": "bfloat16 autocast, float32 weights", "fp32": "float32"}


def _processes(metrics: dict[str, Any]) -> str:
    """'1 process (NVIDIA H200, bfloat16 autocast, float32 weights)': the hardware and the precision the run
    computed in; runs recorded before `hardware` or `precision` existed say what they recorded."""
    processes = _counted(metrics["world_size"], "process", "es")
    details = [metrics["hardware"]] if metrics.get("hardware") else []
    if metrics.get("precision"):
        details.append(PRECISION_WORDS[metrics["precision"]])
    return f"{processes} ({', '.join(details)})" if details else processes


def _restored_weights_text(restored: dict[str, Any] | None) -> str:
    """For weights that came back from the training machine in float16 (this repository's `tools/transfer.py`)."""
    if not restored:
        return ""
    return (f"\nThe weights were trained in float32, brought back from the training machine as {restored['from']} "
            f"and restored to float32 (`tools/transfer.py`). These weights, as published, score test "
            f"accuracy "
            f"{restored['test_accuracy']:.4f} and F1 {restored['test_f1']:.4f}: `{restored['command']}`.\n")


def _model_reading(experiment: dict[str, Any], config: dict[str, Any], max_length: int | None) -> str:
    """What of a review the saved classifier reads (its config's reading policy)."""
    reading = config.get("read_length") or experiment.get("read_length") or max_length
    window, stride = config.get("max_position_embeddings"), config.get("window_stride")
    if stride and reading and window and reading > window:
        return (f"each review whole (up to {reading} tokens) as {window}-token windows every {stride} tokens, "
                "encoded apart and averaged by their real tokens")
    return f"the first {reading} tokens of each review"


def _model_input(experiment: dict[str, Any], config: dict[str, Any], max_length: int | None) -> str:
    """What the classifier reads and, where that is not what it trained on, what it trained on."""
    reading = _model_reading(experiment, config, max_length)
    if experiment.get("train_window") == "random":
        return (f"{reading}; trained on a random {max_length}-token window of each whole review, drawn anew each "
                "epoch")
    if (experiment.get("read_length") or max_length) != max_length:
        return f"{reading}; trained on the first {max_length} tokens of each review"
    return reading


def _embedding_origin(experiment: dict[str, Any]) -> str:
    if experiment.get("init_from"):
        return f"from the pretrained encoder `{experiment['init_from']}` (see Pretraining)"
    if experiment.get("week3") and experiment.get("init_embedding_from_dan", True):
        return "initialised from the Week 3 Deep Averaging Network's embedding"
    return "randomly initialised"


def _pretraining_text(pretraining: dict[str, Any] | None) -> str:
    """The card's pretraining section, from the pretraining run's metrics (empty when there was none).

    A run that continued earlier ones (`continued_from`) is described with all its stages: steps and
    chunks add up, and every stage's command is listed, first to last. A classifier that started from
    another classifier (`init_from` a classifier's folder, e.g. a committed checkpoint) says so instead."""
    if not pretraining:
        return ""
    if "test_accuracy" in pretraining:
        return (
            "\n## Pretraining\n\n"
            f"The run continued the fine-tuning of an IMDb classifier (`{pretraining.get('name')}`: validation "
            f"accuracy {pretraining['val_accuracy']:.4f}, test {pretraining['test_accuracy']:.4f}), whose token "
            f"embedding was {_embedding_origin(pretraining.get('experiment', {}))}. Reproduce it: "
            f"`{pretraining.get('command') or 'see its metrics.json'}`\n"
        )
    stages = [pretraining]
    while stages[0].get("continued_from"):
        stages.insert(0, stages[0]["continued_from"])
    first = stages[0]
    steps = sum(stage["optimizer_steps"] for stage in stages)
    chunks = sum(stage["chunks_seen"] for stage in stages)
    in_stages = f" in {len(stages)} runs, each continuing the one before" if len(stages) > 1 else ""
    commands = "; then ".join(f"`{stage.get('command') or 'see its metrics.json'}`" for stage in stages)
    masked = f"{pretraining.get('experiment', {}).get('mlm_probability', 0.15):.0%} of tokens masked"
    if pretraining.get("objective") == "rtd":
        objective = ("with replaced-token detection (ELECTRA: a small masked-LM generator fills the masked "
                     "positions, and the encoder learns at every position whether its token is the original)")
        result = (f"{masked}; detection accuracy {pretraining['eval_detection_accuracy']:.3f} (loss "
                  f"{pretraining['eval_detection_loss']:.3f}, {pretraining['eval_replaced_share']:.1%} of tokens "
                  f"replaced), generator masked-LM loss {pretraining['eval_generator_mlm_loss']:.3f}")
    else:
        objective = "as a masked language model"
        result = f"{masked}; masked-LM loss {pretraining['eval_mlm_loss']:.3f}"
    return (
        "\n## Pretraining\n\n"
        f"The encoder was first trained {objective} (`hf-attn pretrain`), its token embedding "
        f"{_embedding_origin(first.get('experiment', {}))}: "
        f"{steps} steps over {chunks:,} chunks of up to "
        f"{pretraining['max_length']} tokens{in_stages}, cut from {pretraining['n_train_reviews']:,} reviews (the "
        f"training split and {pretraining['n_unlabelled_reviews']:,} unlabelled IMDb reviews; no validation or test "
        f"text), {result} on {pretraining['n_eval_chunks']:,} validation chunks. "
        f"Reproduce: {commands}\n"
    )


class Head(NamedTuple):
    """What a saved head is, for a card without classification scores."""

    title: str  # the card's title, e.g. "masked-LM encoder"
    what: str  # the card's first sentence says the model is one of these
    auto_class: str  # the transformers Auto class that loads it
    pipeline_tag: str | None  # the Hub's task for it (None: no pipeline uses it as it is)
    encoder_to_fine_tune: bool  # pretrained for a classifier to start from (`init_from`)
    example: str = ""  # code after loading, where a pipeline cannot show the model's use


# Week 3 vocabularies have no mask token: pretraining marks a masked position with the [PAD] id (attended to),
# which no text names (the tokenizer splits special tokens written in text), so the fill-mask pipeline cannot
# use these encoders; the card shows the same prediction made by hand.
FILL_A_MASKED_TOKEN = """
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
inputs = tokenizer("This movie was terrible. I hated every minute of it.", return_tensors="pt")
inputs["input_ids"][0, 3] = tokenizer.pad_token_id  # mask "terrible": pretraining masked with the [PAD] id
logits = model(**inputs).logits
print(tokenizer.convert_ids_to_tokens(logits[0, 3].topk(5).indices))
"""


# Keyed by the `architectures` name `save_pretrained` writes into config.json.
HEADS: dict[str, Head] = {
    "HfAttnModel": Head("encoder", "Transformer encoder without a head", "AutoModel", "feature-extraction", True),
    "HfAttnForSequenceClassification": Head(
        "IMDb classifier", "Transformer encoder classifier for IMDb sentiment", "AutoModelForSequenceClassification",
        "text-classification", False),
    "HfAttnForMaskedLM": Head("masked-LM encoder", "Transformer encoder with a masked-LM head",
                              "AutoModelForMaskedLM", None, True, FILL_A_MASKED_TOKEN),
    "HfAttnForReplacedTokenDetection": Head(
        "ELECTRA encoder", "Transformer encoder for replaced-token detection (ELECTRA) with its small masked-LM "
        "generator", "AutoModelForPreTraining", None, True),
    "HfAttnForCausalLM": Head("causal LM", "Transformer decoder (causal language model)", "AutoModelForCausalLM",
                              "text-generation", False),
}

DESCRIPTION_TEMPLATE = """---
{card_data}
---

# hf-attn {title} ({scheme} positions)

A {layers}-layer, {heads}-head, d={hidden} {what}, with **{scheme}** position encoding, built with hf-attn
(a Hugging Face–compatible package whose position scheme is one config field); saved as `{architecture}`.
{record}
## Model

- Position scheme: `{scheme}`; attention: SDPA (eager returns attention weights); pre-norm: {pre_norm}.
- Tokenizer: byte-level BPE, {vocab_size} tokens; `max_position_embeddings`: {positions}.
{pretraining}
## How to load

```python
from transformers import {imports}

model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)
{example}```
{fine_tune}"""


def build_description_card(metrics: dict[str, Any] | None, config: dict[str, Any], repo_id: str) -> ModelCard:
    """The card of a saved model without classification scores: a pretrained encoder or decoder, or any model
    whose run left no `metrics.json`. It says what the model is from its config and, for a masked-LM or
    ELECTRA run, how it was pretrained and the loss it reached (from `metrics`)."""
    architecture = (config.get("architectures") or ["HfAttnModel"])[0]
    if architecture not in HEADS:
        raise ValueError(f"config.json names {architecture}, not an hf_attn model ({', '.join(HEADS)}); pass a "
                         "folder hf-attn saved")
    head = HEADS[architecture]
    scheme = config["position_embedding_type"]
    card_data = ModelCardData(
        language="en", license="apache-2.0", library_name="transformers", pipeline_tag=head.pipeline_tag,
        datasets=["stanfordnlp/imdb"], model_name=repo_id, tags=["hf-attn", f"position-{scheme}", "custom_code"],
    )
    pretrained = metrics is not None and metrics.get("objective") in ("mlm", "rtd")
    if metrics is None:
        record = "\nThe run that trained it left no `metrics.json`: this card says only what the model is.\n"
    else:  # a pretraining section says how to reproduce the run
        record = "" if pretrained else f"\nReproduce: `{metrics.get('command') or 'see metrics.json'}`\n"
    fine_tune = (f"\nFine-tune a classifier from it with `hf-attn train` and `init_from: {repo_id}` in the "
                 "experiment file.\n" if head.encoder_to_fine_tune else "")
    text = DESCRIPTION_TEMPLATE.format(
        card_data=card_data.to_yaml(), title=head.title, what=head.what, scheme=scheme, architecture=architecture,
        layers=config["num_hidden_layers"], heads=config["num_attention_heads"], hidden=config["hidden_size"],
        record=record, pre_norm=config.get("norm_position", "pre") == "pre", vocab_size=config["vocab_size"],
        positions=config["max_position_embeddings"], pretraining=_pretraining_text(metrics) if pretrained else "",
        auto_class=head.auto_class, repo_id=repo_id, fine_tune=fine_tune,
        imports=f"{head.auto_class}, AutoTokenizer" if head.example else head.auto_class,
        example=head.example.format(repo_id=repo_id),
    )
    return ModelCard(text)


SEQUENCE_CARD_TEMPLATE = """---
{card_data}
---

# hf-attn {noun} for {task} ({scheme} positions)

A {layers}-layer, {heads}-head, d={hidden} Transformer {noun} with **{scheme}** position encoding, built with
hf-attn (a Hugging Face–compatible package whose position scheme is one config field), trained to {trained_to}
the answer of {task} after reading its question. Data: {data}.

A length-generalization probe: it was trained at the lengths of the table's first row and is read past them in
the others.

## Exact match by length

{answers}; ± the binomial standard error over the row's pairs.

| split | lengths | exact match | pairs |
|---|---|---|---|
{rows}

Reproduce: `{command}`

## Model

- Position scheme: `{scheme}`; attention: SDPA (eager returns attention weights); pre-norm: {pre_norm}.
- Tokenizer: word level, one token per symbol of the task ({vocab_size} tokens with `[PAD]` `[BOS]` `[EOS]` `[SEP]`
  `[UNK]`{mask_token}); {format}; `max_position_embeddings`: {positions}.
- Trained with the loss on the answer only: {optimizer_steps} optimizer steps over {n_train} pairs.

## How to use

```python
from transformers import {auto_class}, AutoTokenizer

model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
{usage}
```

Score it on pairs of your own generator (JSONL, one `{{"input": ..., "target": ...}}` a line):
`hf-attn score-pairs --model MODEL_FOLDER --pairs my_pairs.jsonl`.
"""


def _sequence_task(dataset: dict[str, Any]) -> tuple[str, str, tuple[str, str]]:
    """A sequence task's name, a line on its data and an (input, target) example at a training length, from the
    experiment's `dataset` section."""
    if dataset.get("kind") == "scan":
        return ("SCAN", "Lake & Baroni's length split: commands of at most 22 actions for training, 24-48 for test",
                ("jump twice after walk left", "I_TURN_LEFT I_WALK I_JUMP I_JUMP"))
    length = dataset["max_train_length"]
    example = get_length_task(dataset["name"]).draw(random.Random(0), max(1, length // 2))
    return (f"`{dataset['name']}`", f"generated, lengths 1..{length} for training; docs/length-tasks.md",
            (example.input, example.target))


class SequenceReader(NamedTuple):
    """What a sequence-task card says of how its model answers: a decoder writes, an encoder fills masks."""

    noun: str
    trained_to: str
    answers: str
    format: str
    mask_token: str
    auto_class: str
    pipeline_tag: str
    usage: str


SEQUENCE_READERS = {
    True: SequenceReader(
        "decoder", "write", "Greedy answers, one token at a time until `[EOS]`",
        "a prompt is `[BOS] input [SEP]`, the answer `target [EOS]`", "", "AutoModelForCausalLM", "text-generation",
        """prompt = tokenizer("{example_input}", return_tensors="pt")
answer = model.generate(**prompt, max_new_tokens={max_new_tokens}, do_sample=False)
print(tokenizer.decode(answer[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True))  # {example_target}"""),
    False: SequenceReader(
        "encoder", "fill in", "The most likely token at each `[MASK]`, all in one pass",
        "the model reads `[BOS] input [SEP]`, then one `[MASK]` per word of the answer and `[EOS]`, and fills the "
        "masks (it is told the answer's length, not its words)", " `[MASK]`", "AutoModelForMaskedLM", "fill-mask",
        """masks = " ".join([tokenizer.mask_token] * {answer_length})
inputs = tokenizer("{example_input}", masks, return_tensors="pt")
filled = model(**inputs).logits.argmax(-1)[inputs["input_ids"] == tokenizer.mask_token_id]
print(tokenizer.decode(filled))  # {example_target}"""),
}


def build_sequence_card(metrics: dict[str, Any], config: dict[str, Any], repo_id: str) -> ModelCard:
    """The card of a decoder (or an encoder) trained on a sequence task (`hf-attn train` on a `length` or `scan`
    dataset): exact match by length bucket on validation (the training lengths) and test (past them), from
    `metrics`, the first test bucket in the model-index."""
    scheme = config["position_embedding_type"]
    reader = SEQUENCE_READERS[bool(config.get("is_decoder", False))]
    task, data, (example_input, example_target) = _sequence_task(metrics["experiment"]["dataset"])
    buckets = [(split, bucket) for split, key in (("validation", "val_exact_match_by_length"),
                                                  ("test", "test_exact_match_by_length")) for bucket in metrics[key]]
    rows = "\n".join(f"| {split} | {bucket['low']}..{bucket['high']} | {bucket['accuracy']:.3f} ± "
                     f"{bucket['standard_error']:.3f} | {bucket['count']} |" for split, bucket in buckets)
    first_past = metrics["test_exact_match_by_length"][0]
    card_data = ModelCardData(
        language="en", license="apache-2.0", library_name="transformers", pipeline_tag=reader.pipeline_tag,
        model_name=repo_id, tags=["hf-attn", f"position-{scheme}", "custom_code", "length-generalization"],
        eval_results=[EvalResult(
            task_type=reader.pipeline_tag, dataset_type=task.strip("`"), dataset_name=task.strip("`"),
            dataset_split=f"test, lengths {first_past['low']}..{first_past['high']}", metric_type="exact_match",
            metric_name="exact match", metric_value=first_past["accuracy"])],
    )
    return ModelCard(SEQUENCE_CARD_TEMPLATE.format(
        card_data=card_data.to_yaml(), task=task, data=data, scheme=scheme, layers=config["num_hidden_layers"],
        heads=config["num_attention_heads"], hidden=config["hidden_size"], rows=rows,
        command=metrics.get("command") or "see metrics.json", pre_norm=config.get("norm_position", "pre") == "pre",
        vocab_size=config["vocab_size"], positions=config["max_position_embeddings"],
        optimizer_steps=metrics.get("optimizer_steps"), n_train=metrics.get("n_train"), repo_id=repo_id,
        noun=reader.noun, trained_to=reader.trained_to, answers=reader.answers, format=reader.format,
        mask_token=reader.mask_token, auto_class=reader.auto_class,
        usage=reader.usage.format(example_input=example_input, example_target=example_target,
                                  max_new_tokens=len(example_target.split()) + 1,
                                  answer_length=len(example_target.split()))))


def card_from_records(metrics: dict[str, Any] | None, config: dict[str, Any], repo_id: str) -> ModelCard:
    """The card a run's records call for: the classifier card where the run scored a classifier, the sequence-task
    card where it scored a decoder by exact match, else the card that says what the model is and how it was
    pretrained."""
    if metrics is not None and "test_accuracy" in metrics:
        return build_model_card(metrics, config, repo_id)
    if metrics is not None and "test_exact_match_by_length" in metrics:
        return build_sequence_card(metrics, config, repo_id)
    return build_description_card(metrics, config, repo_id)


def card_for_run(model_dir: str | os.PathLike[str], repo_id: str) -> ModelCard:
    """The card of a finished run folder, from its `metrics.json` and `config.json` (`card_from_records`)."""
    model_dir = Path(model_dir)
    for name in ("metrics.json", "config.json"):
        if not (model_dir / name).is_file():
            raise FileNotFoundError(
                f"{model_dir / name} is missing: pass the --output-dir of a finished `hf-attn train` or "
                "`hf-attn pretrain`."
            )
    metrics = json.loads((model_dir / "metrics.json").read_text())
    config = json.loads((model_dir / "config.json").read_text())
    return card_from_records(metrics, config, repo_id)
