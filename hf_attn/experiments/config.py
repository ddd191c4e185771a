"""Experiment files: YAML -> a validated `Experiment`, with inheritance and command-line overrides.

An experiment file names the file it builds on with `base:` (a path relative to itself) and states only
what differs: the chain of bases is read first and merged section by section, each file's keys winning
over its base's (see `read_experiment_file`); `key=value` overrides (`parse_override`) come last. Every
section is then checked against what it feeds: `model` against `HfAttnConfig`'s fields, `training`
against `TrainingArguments`' fields, so a typo fails before any data is loaded, with the file, the key
and the allowed keys in the message.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from transformers import TrainingArguments

from ..configuration_hf_attn import HfAttnConfig, is_count
from ..runtime.precision import PRECISIONS
from ..settings import Settings, SettingsError, check_settings, choice, or_none, read_settings, setting


class ExperimentConfigError(SettingsError):
    """A YAML experiment file (or a key=value override) that cannot describe an experiment."""


# The values of PretrainingSettings.objective (`hf-attn pretrain`): masked LM, replaced-token detection or causal LM.
PRETRAINING_OBJECTIVES = frozenset({"mlm", "rtd", "causal"})


@dataclasses.dataclass
class PretrainingSettings(Settings):
    """The `pretraining` section: what `hf-attn pretrain` trains.

    Attributes:
        objective: `mlm` (masked language model, BERT), `rtd` (replaced-token detection, ELECTRA: a small generator
            fills the masked positions and the encoder learns at every position whether its token is original; see
            `HfAttnForReplacedTokenDetection`) or `causal` (a decoder predicting each next token, `HfAttnForCausalLM`).
        mlm_probability: the share of real tokens each batch masks (masked objectives).
    """

    objective: str = choice("mlm", PRETRAINING_OBJECTIVES)
    mlm_probability: float = setting(0.15, accepts=lambda value: 0 < value < 1, meaning="a probability in (0, 1)")


DECODER_CONTEXTS = ("attention", "pooled")
SCHEDULES = ("none", "linear", "inverse_sigmoid")
SAMPLED_TOKENS = ("argmax", "sample")


@dataclasses.dataclass
class Seq2SeqSettings(Settings):
    """The `seq2seq` section: what `hf-attn seq2seq` trains and scores (`seq2seq_training`: the bottleneck).

    Attributes:
        num_beams: beams of the beam-search decoding that is scored next to greedy.
        generator: `hf_attn.tasks.dates.DateGeneratorSettings` fields (how many pairs per split, locales,
            formats, years).
        decoder_context: `attention` (cross-attention over every encoder state) or `pooled` (one mean-pooled
            vector of the encoder: the bottleneck).
    """

    num_beams: int = setting(4, accepts=is_count, meaning="a positive integer (1: greedy only)")
    generator: dict[str, Any] = dataclasses.field(default_factory=dict)
    decoder_context: str = choice("attention", DECODER_CONTEXTS)

    def check(self) -> None:
        if self.generator:  # imported here: only `hf-attn seq2seq` experiments need babel
            from ..tasks.dates import DateGeneratorSettings

            DateGeneratorSettings(**check_settings(DateGeneratorSettings, self.generator, "[seq2seq.generator]"))


@dataclasses.dataclass
class ScheduledSamplingSettings(Settings):
    """The `scheduled_sampling` section: teacher forcing or scheduled sampling (Bengio et al. 2015) for every run
    that trains a decoder on answers, `hf-attn seq2seq` and `hf-attn train` on a sequence task
    (`hf_attn.experiments.scheduled_sampling`).

    The schedule is ε(i), the probability that an input is the gold token at training step i, floored at
    `min_teacher_forcing`; the model's own token comes with probability p(i) = 1 - ε(i):

    * linear: ε(i) = max(ε_min, 1 - (1 - ε_min) · i / `sampling_decay_steps`);
    * inverse sigmoid: ε(i) = max(ε_min, k / (k + exp(i / k))), k = `inverse_sigmoid_k` (at least 1).

    Attributes:
        schedule: `none` (teacher forcing throughout), `linear` or `inverse_sigmoid`.
        min_teacher_forcing: ε_min, the lowest probability of a gold input, in [0, 1].
        sampling_decay_steps: linear: the training steps over which ε falls from 1 to ε_min.
        inverse_sigmoid_k: inverse sigmoid: k (at least 1); ε falls through 1/2 near step k · ln k.
        sampled_tokens: the model's token at a position: `argmax` of the first pass, or `sample`d from its softmax.
    """

    schedule: str = choice("none", SCHEDULES)
    min_teacher_forcing: float = setting(0.0, accepts=lambda value: 0.0 <= value <= 1.0,
                                         meaning="a probability in [0, 1]")
    sampling_decay_steps: int = setting(1000, accepts=is_count, meaning="a positive integer")
    inverse_sigmoid_k: float = setting(100.0, accepts=lambda value: value >= 1, meaning="at least 1")
    sampled_tokens: str = choice("argmax", SAMPLED_TOKENS)

    def teacher_forcing(self, step: int) -> float:
        """ε(step): the probability that an input is the gold token at training step `step`."""
        if self.schedule == "none":
            return 1.0
        if self.schedule == "linear":
            decayed = 1.0 - (1.0 - self.min_teacher_forcing) * step / self.sampling_decay_steps
        else:
            k = self.inverse_sigmoid_k
            decayed = k / (k + math.exp(min(step / k, 700.0)))  # exp overflows past 709
        return max(self.min_teacher_forcing, decayed)


ADVERSARIAL_METHODS = ("none", "adversarial", "virtual")


@dataclasses.dataclass
class AdversarialSettings(Settings):
    """The `adversarial` section: adversarial or virtual adversarial training on the token embeddings while a
    classifier trains (Miyato et al. 2017; `hf_attn.experiments.adversarial`).

    Attributes:
        method: `none`, `adversarial` (the perturbation that most raises the loss of the text's label) or `virtual`
            (the one that most changes the prediction; needs no label).
        epsilon: the perturbation's norm, as a fraction of the norm of the text's token embeddings.
        xi: virtual: the norm of the random probe whose gradient finds the perturbation, as the same fraction.
        weight: the weight of the added loss.
        unlabelled: virtual only: each step also adds the virtual adversarial loss of a batch of the dataset's
            unlabelled texts (IMDb's 50,000 reviews), read as the training texts are (Miyato et al.'s
            semi-supervised setting).
    """

    method: str = choice("none", ADVERSARIAL_METHODS)
    epsilon: float = setting(0.02, accepts=lambda value: value > 0, meaning="a positive number")
    xi: float = setting(0.005, accepts=lambda value: value > 0, meaning="a positive number")
    weight: float = setting(1.0, accepts=lambda value: value >= 0, meaning="a non-negative number")
    unlabelled: bool = False

    def check(self) -> None:
        if self.unlabelled and self.method != "virtual":
            raise ValueError("`unlabelled` texts have no label to attack: set method: virtual with unlabelled: true.")


# Keys each task's section took over from the top level (1.x experiment files): refused, naming the section.
MOVED_TO_SECTION = {"objective": "pretraining", "mlm_probability": "pretraining", "num_beams": "seq2seq",
                    "generator": "seq2seq"}
# Keys of a section that moved to another when a second kind of run came to read them: (section, key) -> where
# they are now. Scheduled sampling left `seq2seq` when causal-LM training on answers took it up too.
MOVED_BETWEEN_SECTIONS = {
    ("seq2seq", "scheduled_sampling"): "scheduled_sampling.schedule",
    **{("seq2seq", key): f"scheduled_sampling.{key}"
       for key in ("min_teacher_forcing", "sampling_decay_steps", "inverse_sigmoid_k", "sampled_tokens")},
}

# The values of Experiment.train_window: which tokens of a longer training review a step sees.
TRAIN_WINDOWS = frozenset({"start", "random"})

# TrainingArguments fields that would set a second precision beside the experiment's own `precision`.
PRECISION_ARGUMENTS = frozenset({"bf16", "fp16", "bf16_full_eval", "fp16_full_eval"})

# What a run started from a pretrained folder (`init_from`) may set differently from it; anything
# else (width, positions, layers) is the pretrained architecture and must match.
FINE_TUNING_SETTINGS = frozenset(
    {"hidden_dropout", "attention_dropout", "classifier_dropout", "classifier_pooling", "window_stride"}
)

# `HfAttnConfig` fields a run sets itself, and where each comes from: a `model` section may not set them.
DERIVED_MODEL_FIELDS = {
    "vocab_size": "the tokenizer's size (choose the tokenizer with `week3`, or `tokenizer_vocab_size`)",
    "pad_token_id": "the tokenizer's [PAD] id",
    "max_position_embeddings": "the experiment's `max_length` (the training length): set `max_length`",
    "read_length": "the experiment's `read_length` (a top-level key): set it there",
}


def _is_path_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value != "")


def count_or_none(default: int | None, none_means: str) -> Any:
    """A field holding a positive integer or None (`none_means` says what None does)."""
    return setting(default, accepts=or_none(is_count), meaning=f"a positive integer or null ({none_means})")


@dataclasses.dataclass
class SelfTrainingSettings(Settings):
    """The `self_training` section: a teacher labels the dataset's unlabelled texts and those it is sure of join the
    training split (`hf_attn.experiments.self_training`).

    Attributes:
        teacher: a saved classifier of the same labels, trained on the training split only (never on validation or
            test, which would leak them into the student); `None`: no self-training.
        threshold: the teacher's probability a label needs for its text to join the training split.
    """

    teacher: str | None = setting(None, accepts=_is_path_or_none, meaning="a saved classifier folder or null")
    threshold: float = setting(0.9, accepts=lambda value: 0.5 <= value <= 1,
                               meaning="a probability between 0.5 and 1")


@dataclasses.dataclass
class Experiment(Settings):
    """What one training run needs; every field can come from the YAML file or a key=value override.

    Attributes:
        name: the experiment file's own `name`, else its file name without `.yaml` (never inherited);
            names the default output folder.
        dataset: a registered dataset (`hf_attn.tasks`): a mapping with its `kind` and settings (`{path:
            reviews.csv, text_column: review, label_column: stars}`), or a string naming the source: `sample`, an
            IMDb copy (Hub id, parquet folder, aclImdb/), a data file, a folder or a Hub id.
        week3: a Week 3 folder (tokenizer files, DAN embedding); `None` trains a tokenizer on the
            training split (for smoke runs and users without Week 3 files).
        tokenizer_vocab_size: vocabulary size when a tokenizer is trained here.
        max_length: tokens per review seen by the model (the reference used 128).
        read_length: tokens of each review the classifier reads at validation and test, saved as its
            config's `read_length` (what every later reading of the saved model reads); `None` means
            `max_length`. Longer than `max_length`, the model reads past its training length directly
            (sinusoidal, rope, alibi) or as windows (`model.window_stride`; the only way for learned
            positions).
        train_window: which `max_length` tokens of a longer training review the model sees: `start`
            (the first ones, like evaluation and the reference) or `random` (a new random window of
            the whole review each time it is drawn; see `hf_attn.experiments.data.RandomWindows`).
        init_embedding_from_dan: start the token embedding from the Week 3 DAN embedding.
        limit_train / limit_eval: keep only the first N reviews of train (when pretraining, also of the
            unlabelled reviews) / of validation and test (smoke tests, pretraining's evaluation);
            `None` keeps all.
        evals_per_epoch: evaluations (and checkpoints) per epoch; more means finer resumption points
            on slow machines at the cost of validation passes.
        early_stopping_patience: evaluations without a lower validation loss before stopping.
        init_from: a saved hf_attn model folder (e.g. from `hf-attn pretrain`) whose encoder and tokenizer
            start the run instead of a fresh encoder with the DAN embedding; `model` may then
            change only the fine-tuning settings in `FINE_TUNING_SETTINGS`.
        precision: `auto` (bfloat16 autocast where the hardware has bfloat16 units, else float32), `bf16` or
            `fp32`: what training and scoring compute in (`hf_attn.runtime.precision`); parameters
            and optimizer state stay float32. The one precision setting: `training` may not set `bf16`
            or `fp16`.
        model: `HfAttnConfig` fields, except those the run derives (`DERIVED_MODEL_FIELDS`).
        training: `TrainingArguments` fields.
        pretraining: `hf-attn pretrain`'s own settings (`PretrainingSettings`).
        seq2seq: `hf-attn seq2seq`'s own settings (`Seq2SeqSettings`).
        scheduled_sampling: teacher forcing or scheduled sampling, for `hf-attn seq2seq` and sequence tasks
            (`ScheduledSamplingSettings`).
        adversarial: adversarial or virtual adversarial training of a classifier (`AdversarialSettings`).
        self_training: the unlabelled texts a teacher labels join a classifier's training split
            (`SelfTrainingSettings`).
    """

    name: str
    dataset: str | dict[str, Any] = "stanfordnlp/imdb"
    week3: str | None = setting(None, accepts=_is_path_or_none, meaning="a Week 3 folder or null")
    tokenizer_vocab_size: int = setting(500, accepts=lambda value: value > 256,
                                        meaning="an integer above 256 (the 256 byte symbols plus merges)")
    max_length: int = setting(128, accepts=is_count, meaning="a positive integer")
    read_length: int | None = count_or_none(None, "max_length")
    train_window: str = choice("start", TRAIN_WINDOWS)
    init_embedding_from_dan: bool = True
    limit_train: int | None = count_or_none(None, "all rows")
    limit_eval: int | None = count_or_none(None, "all rows")
    evals_per_epoch: int = setting(1, accepts=is_count, meaning="a positive integer")
    early_stopping_patience: int | None = count_or_none(2, "never stop early")
    seed: int = setting(42, accepts=lambda value: value >= 0, meaning="a non-negative integer")
    init_from: str | None = setting(None, accepts=_is_path_or_none, meaning="a saved model folder or null")
    precision: str = choice("auto", PRECISIONS)
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    pretraining: PretrainingSettings = dataclasses.field(default_factory=lambda: PretrainingSettings())
    seq2seq: Seq2SeqSettings = dataclasses.field(default_factory=lambda: Seq2SeqSettings())
    scheduled_sampling: ScheduledSamplingSettings = dataclasses.field(
        default_factory=lambda: ScheduledSamplingSettings())
    adversarial: AdversarialSettings = dataclasses.field(default_factory=lambda: AdversarialSettings())
    self_training: SelfTrainingSettings = dataclasses.field(default_factory=lambda: SelfTrainingSettings())

    @property
    def reading_length(self) -> int:
        """Tokens of each review the run's classifier reads at validation, test and after saving."""
        return self.read_length or self.max_length

    def check(self) -> None:
        """The rules that tie fields together, and the `dataset`, `model` and `training` sections against what
        they feed (nothing is loaded: a typo fails before any data is)."""
        _check_dataset(self.dataset)
        second_precision = sorted(PRECISION_ARGUMENTS & set(self.training))
        if second_precision:
            raise ValueError(
                f"[training] {', '.join(second_precision)} would set the precision a second time; set the "
                "experiment's `precision` instead (auto, bf16 or fp32; e.g. precision=bf16 on the command line)."
            )
        if self.train_window == "random" and self.training.get("train_sampling_strategy") == "group_by_length":
            raise ValueError("train_sampling_strategy group_by_length would sort by whole-review lengths, which "
                             "random windows cut to max_length; use one of the two.")
        derived = sorted(DERIVED_MODEL_FIELDS.keys() & set(self.model))
        if derived:
            raise ValueError("[model]: " + "; ".join(
                f"`{key}` is not set here: it is {DERIVED_MODEL_FIELDS[key]}" for key in derived) + ".")
        check_settings(HfAttnConfig, self.model, "[model]")
        check_settings(TrainingArguments, self.training, "[training]")
        try:  # the config checks the reading policy with the run's lengths
            HfAttnConfig(**self.model, max_position_embeddings=self.max_length, read_length=self.reading_length)
        except ValueError as error:
            raise ValueError(f"[model]: {error}") from None


def refuse_scheduled_sampling(experiment: Experiment, run_kind: str) -> None:
    """Refuse a schedule in a run that trains no decoder on answers (`run_kind`, e.g. "a classifier"): ignoring it
    would report teacher forcing's run as scheduled sampling's."""
    if experiment.scheduled_sampling.schedule != "none":
        raise ValueError(f"{run_kind} has no answers to sample: scheduled_sampling is read by hf-attn seq2seq and by "
                         "hf-attn train on a sequence task; drop the section (or scheduled_sampling.schedule=none).")


def refuse_classifier_sections(experiment: Experiment, run_kind: str) -> None:
    """Refuse adversarial training or self-training in a run that trains no classifier (`run_kind`): ignoring them
    would report a plain run as one of theirs."""
    if experiment.adversarial.method != "none":
        raise ValueError(f"{run_kind} trains no classifier: the adversarial section is read by hf-attn train on a "
                         "classification dataset; drop the section (or adversarial.method=none).")
    if experiment.self_training.teacher is not None:
        raise ValueError(f"{run_kind} trains no classifier: the self_training section is read by hf-attn train on a "
                         "classification dataset; drop the section (or self_training.teacher=null).")


class NumberLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading numbers in exponent form (3e-4, 1E5, 5.0e-5) as floats, as YAML 1.2 and JSON
    do (YAML 1.1 leaves those without a dot as strings); nothing else (names like `nan`, `inf`) changes."""


NumberLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789.")
)


def load_yaml(text: str) -> Any:
    """`text` read as YAML with exponent numbers as floats (every experiment and arena file, every override)."""
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 - a SafeLoader subclass


def merge_sections(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """`base` updated with `child`: nested mappings merge key by key, any other value of `child` replaces."""
    merged = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_sections(merged[key], value)
        else:
            merged[key] = value
    return merged


def replaces_dataset(inherited: Any, stated: Any) -> bool:
    """Whether a `dataset` section `stated` over an `inherited` one replaces it whole instead of merging into it:
    both mappings, of different `kind` (SCAN's settings do not mix with a generated task's)."""
    return (isinstance(stated, dict) and isinstance(inherited, dict)
            and stated.get("kind", inherited.get("kind")) != inherited.get("kind"))


def read_experiment_file(path: str | os.PathLike[str], _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The keys of one experiment file with its `base:` chain merged in (the file's own keys win; a `dataset` of
    another kind than the base's replaces it whole, `replaces_dataset`).

    `base` is a path relative to the file. A base's `name` is dropped: an experiment is named by its
    own file. A missing file, a loop of bases, or a file that is not a YAML mapping is an
    `ExperimentConfigError` naming the files involved.
    """
    path = Path(path)
    if not path.is_file():
        via = f" (the base of {_chain[-1]})" if _chain else ""
        raise ExperimentConfigError(f"experiment file {path}{via} does not exist; see configs/ for examples.")
    if path.resolve() in {link.resolve() for link in _chain}:
        loop = " -> ".join(str(link) for link in (*_chain, path))
        raise ExperimentConfigError(f"`base` chain loops back on itself: {loop}.")
    try:
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as error:
        raise ExperimentConfigError(f"{path} is not valid YAML: {error}") from error
    if raw is None:
        raise ExperimentConfigError(f"{path} is empty; an experiment names at least its `base` or its settings.")
    if not isinstance(raw, dict):
        raise ExperimentConfigError(f"{path} must hold a mapping of keys (name, model, training, ...).")
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ExperimentConfigError(f"{path}: `base` must be the path of another experiment file, got {base!r}.")
    inherited = read_experiment_file(path.parent / base, (*_chain, path))
    inherited.pop("name", None)
    merged = merge_sections(inherited, raw)
    if replaces_dataset(inherited.get("dataset"), raw.get("dataset")):
        merged["dataset"] = raw["dataset"]
    return merged


def parse_override(override: str) -> tuple[list[str], Any]:
    """`training.learning_rate=1e-3` -> (["training", "learning_rate"], 0.001), values parsed as YAML."""
    if "=" not in override:
        raise ExperimentConfigError(f"override {override!r} must look like key=value (e.g. model.hidden_size=256)")
    key, raw = override.split("=", 1)
    value = load_yaml(raw)
    return key.strip().split("."), value


def _apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> None:
    """Set each `key=value` (dotted keys reach into sections) in `raw`, in order."""
    for override in overrides:
        keys, value = parse_override(override)
        target = raw
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise ExperimentConfigError(f"override {override!r}: `{key}` is not a section")
        target[keys[-1]] = value



def load_experiment(path: str | os.PathLike[str], overrides: Sequence[str] = (),
                    changes: dict[str, Any] | None = None, replacing: dict[str, Any] | None = None) -> Experiment:
    """Read a YAML experiment and its bases, merge in `changes` (a mapping of experiment keys, as a file would
    state them: what a program such as the arena sets), set the keys of `replacing` whole (a section that must not
    mix with the file's, such as a dataset of another kind), apply `key=value` overrides, and read the result as an
    `Experiment` (`hf_attn.settings.read_settings`: every key, type, rule and section checked)."""
    path = Path(path)
    raw = read_experiment_file(path)
    raw.setdefault("name", path.stem)
    raw = merge_sections(raw, changes or {}) | (replacing or {})
    _apply_overrides(raw, overrides)
    _refuse_moved_keys(raw, path)
    try:
        experiment = read_settings(Experiment, raw, str(path))
    except SettingsError as error:
        raise ExperimentConfigError(str(error)) from None
    if experiment.init_from is not None:
        check_init_from(experiment)
    return experiment


# The mappings of an experiment that hold settings of their own.
SECTIONS = ("model", "training", "pretraining", "seq2seq", "scheduled_sampling", "adversarial")


def _refuse_moved_keys(raw: dict[str, Any], where: Path) -> None:
    """Keys that earlier versions read elsewhere, refused with where they are read now."""
    moved = {key: f"{MOVED_TO_SECTION[key]}.{key}" for key in sorted(MOVED_TO_SECTION.keys() & set(raw))}
    if moved:
        raise ExperimentConfigError(f"{where}: " + "; ".join(
            f"`{key}` is a setting of the `{MOVED_TO_SECTION[key]}` section: write it under `{MOVED_TO_SECTION[key]}:` "
            f"({new}=... on the command line)" for key, new in moved.items()) + ".")
    moved = {f"{section}.{key}": MOVED_BETWEEN_SECTIONS[section, key]
             for section, key in MOVED_BETWEEN_SECTIONS if key in (raw.get(section) or {})}
    if moved:
        raise ExperimentConfigError(f"{where}: " + "; ".join(
            f"`{old}` is now `{new}`: write it under `{new.split('.')[0]}:` ({new}=... on the command line)"
            for old, new in moved.items()) + ".")


def _check_dataset(value: Any) -> None:
    """The dataset names a registered kind with settings it has (nothing is loaded yet)."""
    from ..tasks import DatasetError, dataset_source

    if not (isinstance(value, dict) or (isinstance(value, str) and value)):
        raise ValueError("`dataset` must name a source ('sample', a file, a folder, a Hub id) or be a mapping with "
                         f"its `kind` and settings, got {value!r}.")
    try:
        dataset_source(value)
    except DatasetError as error:
        raise ValueError(f"{error}.") from None


def check_init_from(experiment: Experiment) -> None:
    """Refuse an `init_from` folder that is not a saved model, or architecture settings that disagree
    with what was pretrained (they would load silently and then mean something else, e.g. RoPE weights
    read as sinusoidal)."""
    source = Path(experiment.init_from)
    if not (source / "config.json").is_file():
        raise ExperimentConfigError(
            f"init_from: {source} holds no config.json; pass a folder written by `hf-attn pretrain` "
            "(or any hf_attn save_pretrained folder)."
        )
    pretrained = HfAttnConfig.from_pretrained(source)
    for key, value in experiment.model.items():
        if key not in FINE_TUNING_SETTINGS and getattr(pretrained, key, None) != value:
            raise ExperimentConfigError(
                f"[model] {key}={value!r} but {source} was pretrained with {key}={getattr(pretrained, key, None)!r}; "
                f"drop the key or make it match (fine-tuning may change only {sorted(FINE_TUNING_SETTINGS)})."
            )
    # A longer training text is read as windows of the pretrained length (`window_stride`) or, by a scheme with
    # positions for every length, in one pass: only a table of positions has no rows for it.
    reads_longer = (experiment.model.get("window_stride", pretrained.window_stride) is not None
                    or pretrained.position_scheme.extrapolates)
    if experiment.max_length > pretrained.max_position_embeddings and not reads_longer:
        raise ExperimentConfigError(
            f"max_length {experiment.max_length} exceeds the {pretrained.max_position_embeddings} positions "
            f"{source} was pretrained on; use max_length <= {pretrained.max_position_embeddings}, or read longer "
            f"texts as windows of them (model.window_stride={pretrained.max_position_embeddings})."
        )
