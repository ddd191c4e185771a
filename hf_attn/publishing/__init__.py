"""What leaves a run folder: model cards, the Hub push and its `--dry-run` folder (`hub.py`), and the float16
checkpoint folders this repository commits (`checkpoint.py`, `hf-attn checkpoint`)."""
