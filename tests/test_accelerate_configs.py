"""The `accelerate` configurations in configs/accelerate/ (multi-GPU DDP, FSDP): each is read by accelerate's own
config loader and launcher, and FSDP's wrap policy built from what the launcher exports wraps hf_attn's
transformer layer. Data parallel itself runs on two CPU processes with ddp.yaml (`run_on_two_processes`, the slow
two-process tests of test_training.py and test_pretraining.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.launch import prepare_multi_gpu_env
from helpers import ACCELERATE_CONFIGS, tiny_config_kwargs
from torch import nn

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification, HfAttnPreTrainedModel, modeling_hf_attn

CONFIGS = sorted(ACCELERATE_CONFIGS.glob("*.yaml"))


def launcher_environment(config_file: Path) -> dict[str, str]:
    """The environment `accelerate launch --config_file CONFIG_FILE` gives its processes (what accelerate and
    Trainer read the distributed settings from), computed by accelerate's launcher without starting anything."""
    parser = launch_command_parser()
    args, *_ = _validate_launch_command(parser.parse_args(["--config_file", str(config_file), "train.py"]))
    return prepare_multi_gpu_env(args)


def test_there_is_a_configuration_for_ddp_and_for_fsdp() -> None:
    kinds = {load_config_from_file(str(path)).distributed_type for path in CONFIGS}
    assert kinds == {DistributedType.MULTI_GPU, DistributedType.FSDP}


@pytest.mark.parametrize("config_file", CONFIGS, ids=lambda path: path.name)
def test_a_configuration_parses_and_every_fsdp_key_is_a_launch_option(config_file: Path) -> None:
    """accelerate's loader refuses unknown top-level keys, but copies `fsdp_config` keys onto the launch
    arguments unchecked: a misspelt one would be ignored silently, so each must be an option of `launch`."""
    config = load_config_from_file(str(config_file))
    assert isinstance(config, ClusterConfig) and config.num_machines == 1 and config.mixed_precision == "no"
    options = {action.dest for action in launch_command_parser()._actions}
    assert set(config.fsdp_config) <= options


@pytest.mark.parametrize("config_file", [path for path in CONFIGS if "fsdp_config" in path.read_text()],
                         ids=lambda path: path.name)
def test_fsdp_wraps_each_transformer_layer_of_the_package(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The class named to wrap is the package's transformer layer (the one `_no_split_modules` lists), and FSDP's
    plugin, built from the launcher's environment as in every launched process, resolves it in a model."""
    names = load_config_from_file(str(config_file)).fsdp_config["fsdp_transformer_layer_cls_to_wrap"].split(",")
    layer_classes = {getattr(modeling_hf_attn, name, None) for name in names}
    assert all(isinstance(layer, type) and issubclass(layer, nn.Module) for layer in layer_classes), names
    assert set(names) == set(HfAttnPreTrainedModel._no_split_modules)

    for key, value in launcher_environment(config_file).items():
        monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2
    plugin.set_auto_wrap_policy(HfAttnForSequenceClassification(HfAttnConfig(**tiny_config_kwargs())))
    assert plugin.auto_wrap_policy.keywords["transformer_layer_cls"] == layer_classes
