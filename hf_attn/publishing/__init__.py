"""What leaves a run folder: model cards (`cards.py`), the Hub code a folder ships (`model_code.py`), the Hub push and
its `--dry-run` folder (`hub.py`), and the float16 checkpoint folders this repository commits (`checkpoint.py`,
`hf-attn checkpoint`)."""
