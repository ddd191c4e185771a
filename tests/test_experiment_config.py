"""Experiment files: validation, key=value overrides, `base:` inheritance, and every shipped config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, SMOKE, tiny_config_kwargs

from hf_attn.configuration_hf_attn import HfAttnConfig
from hf_attn.experiments.config import (
    Experiment,
    ExperimentConfigError,
    load_experiment,
    parse_override,
    read_experiment_file,
    replaces_dataset,
)


def write_yaml(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\nlearning_rate: 0.1\n",
     "unknown key `learning_rate` for Experiment. Allowed: adversarial, dataset, early_stopping"),
    ("name: x\nmodel:\n  hidden_sise: 64\n", "unknown key `hidden_sise` for HfAttnConfig. Did you mean hidden_size"),
    ("name: x\ntraining:\n  learning_rte: 0.1\n", "unknown key `learning_rte` for TrainingArguments"),
    ("name: x\ntraining:\n  num_train_epochs: three\n", "`num_train_epochs` must be of type float"),
    ("name: x\nmax_length: '128'\n", "`max_length` must be a positive integer, got '128'"),
    ("name: x\nmodel:\n  position_embedding_type: xpos\n", "position_embedding_type"),
    ("name: x\nmodel: [1, 2]\n", "`model` must be a mapping"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
    ("name: x\ntrain_window: end\n", "`train_window` must be one of ['random', 'start']"),
    ("name: x\npretraining: {objective: electra}\n", "`objective` must be one of ['causal', 'mlm', 'rtd']"),
    ("name: x\ntrain_window: random\ntraining:\n  train_sampling_strategy: group_by_length\n", "use one of the two"),
    ("base: [a.yaml]\n", "`base` must be the path of another experiment file"),
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    ("name: x\nevals_per_epoch: 0\n", "`evals_per_epoch` must be a positive integer, got 0"),
    ("name: x\nlimit_train: '200'\n", "`limit_train` must be a positive integer or null (all rows), got '200'"),
    ("name: x\nlimit_eval: -5\n", "`limit_eval` must be a positive integer or null"),
    ("name: x\nmax_length: -1\n", "`max_length` must be a positive integer, got -1"),
    ("name: x\nearly_stopping_patience: 0\n", "`early_stopping_patience` must be a positive integer or null"),
    ("name: x\ntokenizer_vocab_size: 100\n", "`tokenizer_vocab_size` must be an integer above 256"),
    ("name: x\npretraining: {mlm_probability: 1.5}\n", "`mlm_probability` must be a probability in (0, 1)"),
    ("name: x\nseed: -1\n", "`seed` must be a non-negative integer"),
    ("name: x\nweek3: 5\n", "`week3` must be a Week 3 folder or null, got 5"),
    ("name: x\ndataset: ''\n", "`dataset` must name a source ('sample', a file, a folder, a Hub id)"),
])
def test_bad_experiment_files_get_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write_yaml(tmp_path, "experiment.yaml", text)
    with pytest.raises(ExperimentConfigError) as excinfo:
        load_experiment(path)
    assert message in str(excinfo.value)
    assert str(path) in str(excinfo.value)


def test_overrides_are_parsed_as_yaml_and_checked(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, ["training.learning_rate=3e-4", "model.position_embedding_type=alibi",
                                         "limit_train=10"])
    assert experiment.training["learning_rate"] == 3e-4 and experiment.limit_train == 10
    assert experiment.model["position_embedding_type"] == "alibi"
    with pytest.raises(ExperimentConfigError, match="key=value"):
        load_experiment(SMOKE, ["learning_rate"])
    # Only YAML 1.1's dot-less exponents become numbers; other number-like names stay what was typed.
    assert parse_override("training.learning_rate=3e-4") == (["training", "learning_rate"], 3e-4)
    assert parse_override("name=nan")[1] == "nan" and parse_override("name=inf")[1] == "inf"
    with pytest.raises(ExperimentConfigError, match="does not exist"):
        load_experiment(tmp_path / "missing.yaml")


def test_numbers_in_exponent_form_are_numbers_in_a_file_as_on_the_command_line(tmp_path: Path) -> None:
    """PyYAML (YAML 1.1) reads `1e-3` as text; JSON and YAML 1.2 read it as a number, and so does every
    experiment file: each exponent spelling equals the float Python reads, and the file equals the override."""
    spellings = {"learning_rate": "1e-3", "weight_decay": "1E-2", "adam_epsilon": "+5.0e-8", "max_grad_norm": "5e-1"}
    path = write_yaml(tmp_path, "experiment.yaml", f"base: {SMOKE.resolve()}\ntraining:\n" + "".join(
        f"  {key}: {value}\n" for key, value in spellings.items()))
    from_file = load_experiment(path).training
    from_overrides = load_experiment(SMOKE, [f"training.{key}={value}" for key, value in spellings.items()]).training
    for key, value in spellings.items():
        assert from_file[key] == from_overrides[key] == float(value) and isinstance(from_file[key], float)


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """study/child.yaml -> study/parent.yaml -> root.yaml, each setting some keys of the same sections."""
    write_yaml(tmp_path, "root.yaml", """\
name: root
dataset: data/imdb
seed: 1
limit_eval: 10
model: {hidden_size: 64, num_hidden_layers: 2, hidden_dropout: 0.1}
training: {learning_rate: 0.001, logging_steps: 5}
""")
    write_yaml(tmp_path, "study/parent.yaml", """\
base: ../root.yaml
name: parent
seed: 2
model: {num_hidden_layers: 3, position_embedding_type: alibi}
""")
    return write_yaml(tmp_path, "study/child.yaml", """\
base: parent.yaml
limit_eval: null
model: {hidden_dropout: 0.0}
training: {learning_rate: 0.0005}
""")


def test_a_file_inherits_its_base_chain_section_by_section(chain: Path) -> None:
    """Each file's keys win over its base's; sections merge key by key; `base` paths are relative to the
    file naming them; the name is the experiment file's own (its stem here), never a base's."""
    experiment = load_experiment(chain)
    assert experiment == Experiment(
        name="child",
        dataset="data/imdb",
        seed=2,
        limit_eval=None,  # an explicit null overrides the base's value
        model={"hidden_size": 64, "num_hidden_layers": 3, "hidden_dropout": 0.0, "position_embedding_type": "alibi"},
        training={"learning_rate": 0.0005, "logging_steps": 5},
    )
    assert "base" not in read_experiment_file(chain)
    assert load_experiment(chain.parent / "parent.yaml").name == "parent"  # a file's own name still counts


def test_overrides_apply_after_inheritance(chain: Path) -> None:
    experiment = load_experiment(chain, ["seed=3", "model.hidden_size=32", "training.warmup_steps=0.2"])
    assert experiment.seed == 3
    assert experiment.model == {"hidden_size": 32, "num_hidden_layers": 3, "hidden_dropout": 0.0,
                                "position_embedding_type": "alibi"}
    assert experiment.training == {"learning_rate": 0.0005, "logging_steps": 5, "warmup_steps": 0.2}


def test_an_inherited_mistake_is_reported_when_the_child_loads(chain: Path) -> None:
    (chain.parent / "parent.yaml").write_text("base: ../root.yaml\nmodel: {hidden_sise: 3}\n")
    with pytest.raises(ExperimentConfigError, match="unknown key `hidden_sise`"):
        load_experiment(chain)


def test_a_missing_base_names_the_file_that_asks_for_it(tmp_path: Path) -> None:
    child = write_yaml(tmp_path, "child.yaml", "base: nowhere/base.yaml\nseed: 1\n")
    with pytest.raises(ExperimentConfigError) as excinfo:
        load_experiment(child)
    assert str(tmp_path / "nowhere" / "base.yaml") in str(excinfo.value)
    assert f"the base of {child}" in str(excinfo.value)


@pytest.mark.parametrize("files", [
    {"a.yaml": "base: a.yaml\n"},
    {"a.yaml": "base: b.yaml\n", "b.yaml": "base: sub/../c.yaml\n", "c.yaml": "base: a.yaml\n"},
])
def test_a_loop_of_bases_is_an_error_not_a_recursion(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        write_yaml(tmp_path, name, text)
    (tmp_path / "sub").mkdir()
    with pytest.raises(ExperimentConfigError, match="loops back on itself"):
        load_experiment(tmp_path / "a.yaml")


# Every experiment file; arena files list experiments and are tested in test_arena.py, accelerate's launch
# configurations in test_accelerate_configs.py.
CONFIGS = sorted(path for path in (REPO / "configs").rglob("*.yaml")
                 if path.parent.name not in ("arena", "accelerate") and not path.name.endswith("arena.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[str(path.relative_to(REPO / "configs")) for path in CONFIGS])
def test_every_shipped_config_loads(path: Path, tmp_path: Path) -> None:
    raw = read_experiment_file(path)
    if raw.get("init_from") and not (REPO / raw["init_from"] / "config.json").is_file():
        # A fine-tuning config reads its pretrained folder, which exists only after `hf-attn pretrain`:
        # check that it says so, then check everything else in the file.
        with pytest.raises(ExperimentConfigError, match="holds no config.json"):
            load_experiment(path)
        raw.pop("init_from")
        path = write_yaml(tmp_path, path.name, yaml.safe_dump(raw))
    assert load_experiment(path).name == path.stem


def test_the_dataset_is_set_in_one_place() -> None:
    """Full-data IMDb experiments get IMDb's location from configs/base.yaml alone (a user overrides it with
    --dataset); only the smoke experiment, on the packaged sample, names its own, and the base of a study of
    another task (the length study's generated task) names that task once, as SCAN's experiment names SCAN."""
    setting = {path.relative_to(REPO / "configs").as_posix() for path in CONFIGS
               if "dataset" in (yaml.safe_load(path.read_text()) or {})}
    assert setting == {"base.yaml", "smoke.yaml", "length/base.yaml", "length/scan.yaml"}
    base_dataset = yaml.safe_load((REPO / "configs" / "base.yaml").read_text())["dataset"]
    for path in CONFIGS:
        if path != SMOKE and path.parent.name != "length":
            assert read_experiment_file(path)["dataset"] == base_dataset, path


def bases_of(path: Path) -> list[Path]:
    """The files `path` builds on, nearest first (stopping past three: deeper is already too deep)."""
    chain = [path]
    while len(chain) <= 3 and (base := (yaml.safe_load(chain[-1].read_text()) or {}).get("base")) is not None:
        chain.append((chain[-1].parent / base).resolve())
    return chain[1:]


@pytest.mark.parametrize("path", CONFIGS, ids=[str(path.relative_to(REPO / "configs")) for path in CONFIGS])
def test_every_shipped_config_is_at_most_two_bases_deep(path: Path) -> None:
    """An experiment names a shared or study base (encoder.yaml, fine-tune.yaml, causal-lm/base.yaml, ...) whose
    own base is base.yaml: what a run does is in at most three files, read in one go."""
    chain = bases_of(path)
    assert len(chain) <= 2, " -> ".join(str(link.relative_to(REPO / "configs")) for link in (path, *chain))


def leaf_settings(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"model": {"hidden_size": 8}}` -> `{"model.hidden_size": 8}`."""
    leaves = {}
    for key, value in section.items():
        if isinstance(value, dict):
            leaves.update(leaf_settings(value, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = value
    return leaves


BASED = [path for path in CONFIGS if "base" in yaml.safe_load(path.read_text())]


@pytest.mark.parametrize("path", BASED, ids=[str(path.relative_to(REPO / "configs")) for path in BASED])
def test_every_shipped_config_states_only_what_differs_from_its_base(path: Path) -> None:
    own = yaml.safe_load(path.read_text())
    base = own.pop("base")
    inherited = read_experiment_file(path.parent / base)
    if replaces_dataset(inherited.get("dataset"), own.get("dataset")):  # a section stated whole: nothing repeated
        inherited.pop("dataset")
    inherited = leaf_settings(inherited)
    repeated = sorted(key for key, value in leaf_settings(own).items() if key in inherited and inherited[key] == value)
    assert not repeated, f"{path} repeats what its base {base} sets: {repeated}"


def test_the_bases_of_fresh_encoders_share_the_reference_shape() -> None:
    """encoder.yaml (classifiers from scratch) and the two masked-LM pretraining bases each write out the
    reference shape (a base has one base of its own): fine-tuned and from-scratch classifiers compare only if
    they agree."""
    shape = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
             "norm_position", "hidden_dropout", "attention_dropout", "classifier_pooling")
    bases = ("encoder.yaml", "pretraining/pretrain-base.yaml", "gpu/pretrain-base.yaml")
    shapes = {base: {key: read_experiment_file(REPO / "configs" / base)["model"][key] for key in shape}
              for base in bases}
    assert all(found == shapes["encoder.yaml"] for found in shapes.values()), shapes


@pytest.mark.parametrize(("key", "section"), [("objective=rtd", "pretraining"), ("mlm_probability=0.2", "pretraining"),
                                              ("num_beams=2", "seq2seq"), ("generator={n_train: 10}", "seq2seq")])
def test_a_tasks_setting_at_the_top_level_names_its_section(key: str, section: str) -> None:
    """1.x files set each task's settings at the top level; each now lives in its task's section, and the old place
    is refused in one line that names the new one, never ignored."""
    name = key.split("=")[0]
    with pytest.raises(ExperimentConfigError, match=f"`{name}` is a setting of the `{section}` section"):
        load_experiment(SMOKE, [key])
    experiment = load_experiment(SMOKE, [f"{section}.{key}"])
    assert getattr(getattr(experiment, section), name) == parse_override(key)[1]


def test_a_tasks_section_checks_its_values() -> None:
    with pytest.raises(ExperimentConfigError, match=r"\[pretraining\]: `objective` must be one of"):
        load_experiment(SMOKE, ["pretraining.objective=nope"])
    with pytest.raises(ExperimentConfigError, match=r"\[pretraining\]: `mlm_probability` must be a probability"):
        load_experiment(SMOKE, ["pretraining.mlm_probability=1.5"])
    with pytest.raises(ExperimentConfigError, match=r"unknown key `objectve` for PretrainingSettings. Did you mean"):
        load_experiment(SMOKE, ["pretraining.objectve=rtd"])


@pytest.mark.parametrize(("scheme", "overrides", "refused"), [
    ("learned", [], True),  # a table of 32 rows has none for token 33
    ("learned", ["model.window_stride=32"], False),  # read as windows of the 32 positions
    ("rope", [], False),  # positions for every length
])
def test_training_longer_than_the_pretrained_positions(tmp_path: Path, scheme: str, overrides: list[str],
                                                       refused: bool) -> None:
    """A fine-tune may read training texts longer than the encoder's pretraining length where the model reads them
    (as windows, or a scheme with positions for every length); a learned table without windows is refused, naming
    the fix."""
    shape = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}  # smoke's
    HfAttnConfig(**tiny_config_kwargs(**shape, position_embedding_type=scheme)).save_pretrained(tmp_path)
    arguments = [f"init_from={tmp_path}", "max_length=64", f"model.position_embedding_type={scheme}", *overrides]
    if refused:
        with pytest.raises(ExperimentConfigError, match=r"max_length 64 exceeds the 32 positions .*window_stride=32"):
            load_experiment(SMOKE, arguments)
    else:
        assert load_experiment(SMOKE, arguments).max_length == 64
