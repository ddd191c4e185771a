# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test test-slow install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU 2.13.0 build; anything unpinned would pull CUDA wheels.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'  # the core, every extra and the test tools
	touch $(STAMP)

# transformers' own common model tests (tests/test_common.py runs them over hf_attn's heads): fetched from the
# source distribution of the installed transformers, not kept in this repository.
COMMON_TESTS := tests/transformers_common/test_modeling_common.py tests/transformers_common/test_configuration_common.py
$(COMMON_TESTS) &: $(STAMP)
	$(PY) tests/transformers_common/fetch.py

install: $(STAMP) $(COMMON_TESTS)

DEMO_TEXTS := "A wonderful, moving film." "Dull and far too long."
CHECKPOINTS ?= checkpoints

# The main job on the IMDb sample shipped inside the package: trains a byte-level BPE and a small
# RoPE classifier, evaluates it, saves it as a from_pretrained folder, then probes and uses it, and
# shows the classifier committed in $(CHECKPOINTS)/ on the same texts and two sample reviews beside it.
demo: $(STAMP)
	$(VENV)/bin/hf-attn train --config configs/smoke.yaml --output-dir outputs/demo --overwrite init_embedding_from_dan=false
	$(VENV)/bin/hf-attn probe --model outputs/demo --output-dir outputs/demo/probe
	$(VENV)/bin/hf-attn predict --model outputs/demo $(DEMO_TEXTS)
	$(PY) scripts/demo_checkpoint.py --smoke outputs/demo --checkpoints $(CHECKPOINTS) $(DEMO_TEXTS)

test: $(STAMP) $(COMMON_TESTS)
	$(PY) -m pytest -q

test-slow: $(STAMP) $(COMMON_TESTS)
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) outputs
