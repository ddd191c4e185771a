"""Pushing to a Hub and loading back, end to end, against the Hub double of tests/hub_server.py on 127.0.0.1.

Three ways up (`hf-attn push`, `model.push_to_hub` + `tokenizer.push_to_hub`, `Trainer(push_to_hub=True)`), one
way down (`from_pretrained(repo_id)`). The references are independent of the client: the files the server stored
(read from its own record, not through huggingface_hub), its commit history, and, for loading, the logits of the
model that was pushed, computed in this process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import site
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterable, Iterator
from pathlib import Path

import huggingface_hub
import pytest
import torch
import transformers
from datasets import Dataset
from helpers import REPO, tiny_config_kwargs
from hub_server import GITATTRIBUTES, USER, LocalHub
from huggingface_hub import HfApi, ModelCard, RepoFolder, constants, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RemoteEntryNotFoundError, RepositoryNotFoundError
from huggingface_hub.repocard_data import model_index_to_eval_results
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from hf_attn import HfAttnConfig, HfAttnForCausalLM, HfAttnForSequenceClassification, cli
from hf_attn.publishing.model_code import MODEL_CODE_FILES, write_model_code

# huggingface_hub's LFS upload hands httpx a file as `data=` (httpx2 0.x deprecates it for `content=`): not ours.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")

REVIEWS = ["A wonderful, moving film.", "Dull, lifeless and far too long.", "not bad at all"]
# What a run folder holds that must never reach the Hub (tests/conftest.py's run_dir has each of them).
RUN_ARTEFACTS = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json",
                 "metrics.json")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHub]:
    """The Hub double, with huggingface_hub and transformers in this process pointed at it.

    huggingface_hub reads its environment once, at import, into `huggingface_hub.constants` (the suite has long
    imported it offline), so the settings are patched there; the environment variables are set too, for what reads
    them later and for subprocesses. Xet is off: the double speaks git LFS only. transformers keeps one `HfApi`
    (`transformers.utils.hub._hf_api`) made with the endpoint of its first use: it is dropped, to be made anew.
    """
    with LocalHub(tmp_path_factory.mktemp("hub")) as local_hub, pytest.MonkeyPatch.context() as patch:
        cache = tmp_path_factory.mktemp("hf_home")
        for name, value in {"HF_ENDPOINT": local_hub.url, "HF_TOKEN": "hf_local_test_token", "HF_HOME": str(cache),
                            "HF_HUB_DISABLE_XET": "1"}.items():
            patch.setenv(name, value)
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            patch.delenv(name, raising=False)
        for name, value in {"ENDPOINT": local_hub.url, "HF_HUB_OFFLINE": False, "HF_HUB_DISABLE_XET": True,
                            "HF_HUB_CACHE": str(cache / "hub"),
                            "HUGGINGFACE_CO_URL_TEMPLATE": local_hub.url + "/{repo_id}/resolve/{revision}/{filename}",
                            }.items():
            patch.setattr(constants, name, value)
        patch.setattr(huggingface_hub.hf_api.api, "endpoint", local_hub.url)  # behind huggingface_hub.upload_file & co
        patch.setattr(transformers.utils.hub, "_hf_api", None)
        yield local_hub


def logits(model: torch.nn.Module, tokenizer: transformers.PreTrainedTokenizerBase) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(**tokenizer(REVIEWS, padding=True, return_tensors="pt")).logits


def run_artefacts(paths: Iterable[str]) -> set[str]:
    """The paths of training state among a repo's files."""
    return {path for path in paths if path.split("/")[-1] in RUN_ARTEFACTS or path.startswith("checkpoint-")}


def test_the_hub_double_answers_huggingface_hub_as_its_record_says(hub: LocalHub, tmp_path: Path) -> None:
    """The double itself, through huggingface_hub's public API: a folder with a subfolder, a text file and a binary
    one (LFS) goes up; listing, paths-info, history and downloads agree with the server's own record; a deletion
    commits; a repo or file that is not there raises the error huggingface_hub names for it."""
    repo_id = f"{USER}/protocol"
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("plain text\n")
    (folder / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 8)
    api = HfApi()
    assert api.whoami()["name"] == USER
    api.create_repo(repo_id)
    api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="files")
    stored = hub.repos[repo_id].commits[-1].files
    assert stored["sub/weights.bin"].lfs and not stored["notes.txt"].lfs

    assert sorted(api.list_repo_files(repo_id)) == sorted(hub.files(repo_id))
    top = {entry.path: entry for entry in api.list_repo_tree(repo_id)}
    assert isinstance(top["sub"], RepoFolder) and top["notes.txt"].size == len(b"plain text\n")
    (weights,) = api.get_paths_info(repo_id, ["sub/weights.bin"])
    assert weights.lfs.sha256 == hashlib.sha256((folder / "sub" / "weights.bin").read_bytes()).hexdigest()
    for name in ("notes.txt", "sub/weights.bin"):
        assert Path(hf_hub_download(repo_id, name)).read_bytes() == (folder / name).read_bytes()

    api.delete_file("notes.txt", repo_id, commit_message="Delete notes.txt")
    assert set(hub.files(repo_id)) == {".gitattributes", "sub/weights.bin"}
    assert [commit.title for commit in api.list_repo_commits(repo_id)] == [
        commit.title for commit in reversed(hub.commits(repo_id))] == ["Delete notes.txt", "files", "initial commit"]
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(repo_id, "notes.txt")
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info(f"{USER}/absent")
    with pytest.raises(HfHubHTTPError, match="401"):
        HfApi(token=False).create_repo(f"{USER}/anonymous")


def test_hf_attn_push_commits_the_dry_run_folder_once(hub: LocalHub, run_dir: Path, tmp_path: Path) -> None:
    """`hf-attn push` commits exactly the files its dry run writes, byte for byte (weights through LFS), and no
    training state, and leaves the run folder as it was (a committed checkpoint's folder, or a read-only one);
    pushing the same run again uploads nothing and makes no commit."""
    repo_id = f"{USER}/hf-attn-push"
    run_files = sorted(run_dir.rglob("*"))
    cli.main(["push", "--model", str(run_dir), "--repo-id", repo_id, "--dry-run", str(tmp_path / "dry")])
    cli.main(["push", "--model", str(run_dir), "--repo-id", repo_id])
    assert sorted(run_dir.rglob("*")) == run_files
    dry_run = {path.name: path.read_bytes() for path in (tmp_path / "dry").iterdir()}
    assert hub.files(repo_id) == {**dry_run, ".gitattributes": GITATTRIBUTES}
    assert hub.repos[repo_id].commits[-1].files["model.safetensors"].lfs
    assert run_artefacts(hub.files(repo_id)) == set()

    after_first, requests = hub.commits(repo_id), len(hub.requests)
    cli.main(["push", "--model", str(run_dir), "--repo-id", repo_id])
    assert hub.commits(repo_id) == after_first
    assert not [request for request in hub.requests[requests:] if request.startswith("PUT")]  # nor an upload
    assert [commit.title for commit in after_first] == ["initial commit", "Upload hf-attn model"]


def test_the_pushed_card_metadata_is_valid(hub: LocalHub, run_dir: Path) -> None:
    """The README.md the server holds parses as a model card whose model-index gives the run's measured results."""
    repo_id = f"{USER}/hf-attn-card"
    cli.main(["push", "--model", str(run_dir), "--repo-id", repo_id])
    card = ModelCard(hub.files(repo_id)["README.md"].decode())
    metadata = card.data.to_dict()
    model_name, results = model_index_to_eval_results(metadata["model-index"])
    assert model_name == repo_id
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert {(result.dataset_split, result.metric_type): result.metric_value for result in results} == {
        ("test", "accuracy"): metrics["test_accuracy"], ("test", "f1"): metrics["test_f1"],
        ("validation", "accuracy"): metrics["val_accuracy"], ("validation", "f1"): metrics["val_f1"]}
    assert {result.task_type for result in results} == {"text-classification"}
    assert metadata["library_name"] == "transformers" and "custom_code" in metadata["tags"]


def test_hf_attn_push_of_a_pretrained_encoder_describes_it(hub: LocalHub) -> None:
    """A masked-LM encoder (the committed `checkpoints/rope-mlm`, whose metrics.json records pretraining, not
    classification scores) goes up with the card that says what it is and how it was pretrained, metadata without
    a model-index; the committed folder is left as it was."""
    encoder = REPO / "checkpoints" / "rope-mlm"
    committed = {path: path.read_bytes() for path in encoder.rglob("*") if path.is_file()}
    repo_id = f"{USER}/hf-attn-mlm"
    cli.main(["push", "--model", str(encoder), "--repo-id", repo_id])
    files = hub.files(repo_id)
    assert files["model.safetensors"] == committed[encoder / "model.safetensors"]
    assert run_artefacts(files) == set()
    card = ModelCard(files["README.md"].decode())
    assert card.text.lstrip().startswith("# hf-attn masked-LM encoder (rope positions)")
    assert f'AutoModelForMaskedLM.from_pretrained("{repo_id}", trust_remote_code=True)' in card.text
    assert "model-index" not in card.data.to_dict() and "position-rope" in card.data.tags
    assert {path: path.read_bytes() for path in encoder.rglob("*") if path.is_file()} == committed


def test_model_and_tokenizer_push_to_hub_and_back(hub: LocalHub, run_dir: Path) -> None:
    """transformers' own `push_to_hub` ships the model code with the weights (the model's and the tokenizer's
    modules), a second push of the same model makes no commit, and `from_pretrained(repo_id)` through the resolve
    endpoint (the weights by LFS redirect) gives the pushed model's logits. In this process the model's classes are
    hf_attn's own (registered with the Auto classes); the fresh process below runs the repo's code."""
    repo_id = f"{USER}/hf-attn-push-to-hub"
    model = HfAttnForSequenceClassification.from_pretrained(run_dir)
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    model.push_to_hub(repo_id)
    tokenizer.push_to_hub(repo_id)
    files = hub.files(repo_id)
    package = Path(sys.modules["hf_attn"].__file__).parent
    assert {name: files.get(name) for name in MODEL_CODE_FILES} == {
        name: (package / name).read_bytes() for name in MODEL_CODE_FILES}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"} <= set(files)
    assert run_artefacts(hub.files(repo_id)) == set()

    history = hub.commits(repo_id)
    model.push_to_hub(repo_id)
    tokenizer.push_to_hub(repo_id)
    assert hub.commits(repo_id) == history

    downloaded = AutoModelForSequenceClassification.from_pretrained(repo_id, trust_remote_code=True)
    downloaded_tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
    assert torch.equal(logits(downloaded, downloaded_tokenizer), logits(model, tokenizer))


def push_with_trainer(run_dir: Path, repo_id: str, output_dir: Path) -> Trainer:
    """One optimizer step of a user's `Trainer(push_to_hub=True)` fine-tuning the run's classifier: the checkpoint is
    pushed as it is saved (`hub_strategy="every_save"`, in the background), then the final model.

    Trainer's checkpoint pushes upload the output folder after copying only the weights and config.json into it,
    not the model code `save_pretrained` wrote beside them (transformers 5.x), so the model code is written into the
    output folder first, as docs/ecosystem.md says."""
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    texts = Dataset.from_dict({"text": REVIEWS * 2, "label": [1, 0, 1] * 2})
    train = texts.map(lambda batch: tokenizer(batch["text"]), batched=True, remove_columns=["text"])
    args = TrainingArguments(output_dir=str(output_dir), push_to_hub=True, hub_model_id=repo_id, max_steps=1,
                             save_strategy="steps", save_steps=1, per_device_train_batch_size=3, report_to="none",
                             use_cpu=True, logging_strategy="no", learning_rate=1e-2)
    trainer = Trainer(model=HfAttnForSequenceClassification.from_pretrained(run_dir), args=args, train_dataset=train,
                      processing_class=tokenizer)
    write_model_code(args.output_dir)
    trainer.train()
    trainer.push_to_hub()
    return trainer


RELATIVE_IMPORT = re.compile(r"^\s*from\s+\.(\w+)\s+import", re.MULTILINE)


def missing_remote_code(files: dict[str, bytes]) -> set[str]:
    """The code files a repo's `auto_map` (config.json, tokenizer_config.json) needs, with the modules they import
    relatively (what transformers fetches for `trust_remote_code`), that the repo lacks."""
    needed: set[str] = set()
    for name in ("config.json", "tokenizer_config.json"):
        for references in json.loads(files.get(name, b"{}")).get("auto_map", {}).values():
            for reference in references if isinstance(references, list) else [references]:
                if reference:  # a tokenizer's entry is [slow class, fast class], the slow one may be None
                    needed.add(reference.split(".")[0] + ".py")
    pending = set(needed)
    while pending:
        module = files.get(pending.pop(), b"").decode()
        imported = {f"{name}.py" for name in RELATIVE_IMPORT.findall(module)} - needed
        needed |= imported
        pending |= imported
    return needed - set(files)


def test_trainer_push_to_hub_uploads_loadable_commits_without_optimizer_state(hub: LocalHub, run_dir: Path,
                                                                              tmp_path: Path) -> None:
    """Every commit Trainer makes (one per saved checkpoint, then the final model) holds the code its config names,
    and never a checkpoint folder or optimizer, scheduler and RNG state; Trainer does push `training_args.bin`
    (transformers' choice: its TrainingArguments, pickled), the one artefact `hf-attn push` leaves out. Pushing the
    same output folder again makes no commit."""
    repo_id = f"{USER}/hf-attn-trainer"
    trainer = push_with_trainer(run_dir, repo_id, tmp_path / "trainer")
    assert (tmp_path / "trainer" / "checkpoint-1" / "optimizer.pt").is_file()  # there to leak, had Trainer let it
    history = hub.commits(repo_id)
    assert [commit.title for commit in history[1:]] == ["Training in progress, step 1", "End of training"]
    for commit in history[1:]:
        files = hub.files(repo_id, commit.sha)
        assert missing_remote_code(files) == set(), commit.title
        assert run_artefacts(files) == {"training_args.bin"}, commit.title
    files = hub.files(repo_id)
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", *MODEL_CODE_FILES} <= set(files)
    assert files["model.safetensors"] == (tmp_path / "trainer" / "model.safetensors").read_bytes()
    assert ModelCard(files["README.md"].decode()).data.to_dict()["model-index"][0]["name"] == "hf-attn-trainer"

    trainer.push_to_hub()
    assert hub.commits(repo_id) == history


# Run in a fresh interpreter where hf_attn cannot be imported: a pushed decoder's greedy tokens and its class's module.
GENERATE_FROM_THE_HUB = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attn"] = None  # no hf_attn package at all
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
    generated = model.generate(torch.tensor(json.loads(sys.argv[2])), max_new_tokens=6, do_sample=False)
    print(json.dumps({"tokens": generated.tolist(), "module": type(model).__module__}))
""")


@pytest.mark.slow  # test_decoders.py's remote-code generation covers CoPE in the default suite
def test_a_cope_decoder_pushed_to_the_hub_generates_with_the_repo_s_code(hub: LocalHub, tmp_path: Path) -> None:
    """CoPE reads the attention scores through a hook of the Hub code (positions.py, modeling_hf_attn.py): a tiny
    CoPE decoder pushed with `push_to_hub` and loaded in a process without hf_attn generates the pushed model's
    tokens."""
    repo_id = f"{USER}/hf-attn-cope"
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(is_decoder=True, position_embedding_type="cope", cope_max_positions=5,
                                               tie_word_embeddings=False, initializer_range=0.2))
    model = HfAttnForCausalLM(config).eval()
    model.push_to_hub(repo_id)
    assert missing_remote_code(hub.files(repo_id)) == set()
    prompt = [[5, 9, 2, 7], [11, 3, 3, 8]]
    environment = {**os.environ, "HF_HOME": str(tmp_path / "fresh_hf_home"), "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", GENERATE_FROM_THE_HUB, repo_id, json.dumps(prompt)],
                            capture_output=True, text=True, cwd=tmp_path, env=environment, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["module"].startswith("transformers_modules.")
    expected = model.generate(torch.tensor(prompt), max_new_tokens=6, do_sample=False)
    assert loaded["tokens"] == expected.tolist() and expected[:, 4:].unique().numel() > 1


# Run in a fresh interpreter where hf_attn cannot be imported: prints each repo's logits and the module of its class.
LOAD_FROM_THE_HUB = textwrap.dedent("""
    import json, sys
    try:
        import hf_attn
    except ImportError:
        pass
    else:
        sys.exit(f"hf_attn is importable here ({hf_attn.__file__}): the test would not show that the repo's code runs")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    texts, loaded = json.loads(sys.argv[1]), {}
    for repo_id in sys.argv[2:]:
        model = AutoModelForSequenceClassification.from_pretrained(repo_id, trust_remote_code=True).eval()
        tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
        with torch.no_grad():
            logits = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
        loaded[repo_id] = {"logits": logits.tolist(), "module": type(model).__module__}
    print(json.dumps(loaded))
""")


def python_without_hf_attn(folder: Path) -> Path:
    """A Python that has every package of this one but hf_attn: a virtual environment whose site-packages lists
    this environment's site-packages in a .pth file. A path line of a .pth file adds the folder without running
    the .pth files inside it, so an editable install of hf_attn (a .pth that installs an import hook, as
    `pip install -e .` makes) is left behind; the script checks that `import hf_attn` fails."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = folder / "bin" / "python"
    child_site = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip()
    Path(child_site, "parent_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


@pytest.mark.slow
def test_a_fresh_process_without_hf_attn_loads_each_pushed_repo(hub: LocalHub, run_dir: Path,
                                                                 tmp_path: Path) -> None:
    """The three ways up, loaded back by `from_pretrained(repo_id, trust_remote_code=True)` in a process that
    cannot import hf_attn (its own cache, run from an empty folder): the repo's code runs and gives the logits of
    the model pushed, exactly."""
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    run_model = HfAttnForSequenceClassification.from_pretrained(run_dir)
    cli.main(["push", "--model", str(run_dir), "--repo-id", f"{USER}/fresh-cli"])
    run_model.push_to_hub(f"{USER}/fresh-push-to-hub")
    tokenizer.push_to_hub(f"{USER}/fresh-push-to-hub")
    trainer = push_with_trainer(run_dir, f"{USER}/fresh-trainer", tmp_path / "trainer")
    expected = {f"{USER}/fresh-cli": logits(run_model, tokenizer),
                f"{USER}/fresh-push-to-hub": logits(run_model, tokenizer),
                f"{USER}/fresh-trainer": logits(trainer.model.cpu(), tokenizer)}
    assert not torch.equal(expected[f"{USER}/fresh-trainer"], expected[f"{USER}/fresh-cli"])  # training changed it

    empty = tmp_path / "elsewhere"
    empty.mkdir()
    environment = {**os.environ, "HF_HOME": str(tmp_path / "fresh_hf_home")}  # -I: PYTHONPATH and co are ignored
    result = subprocess.run([python_without_hf_attn(tmp_path / "venv"), "-I", "-c", LOAD_FROM_THE_HUB,
                             json.dumps(REVIEWS), *expected], capture_output=True, text=True, cwd=empty,
                            env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    for repo_id, reference in expected.items():
        assert loaded[repo_id]["module"].startswith("transformers_modules."), repo_id
        assert torch.equal(torch.tensor(loaded[repo_id]["logits"]), reference), repo_id
