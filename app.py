"""The `hf-attn explore` page as a Hugging Face Space: `python app.py` (Spaces run it so).

The classifiers are the folders in HF_ATTN_EXPLORE_MODELS, separated by commas (default: the committed
checkpoints/rope-whole-reviews). The Space needs this package with its `app` extra (`hf-attn[app]`);
see docs/explore.md.
"""

import os

from hf_attn.explore.page import launch

if __name__ == "__main__":
    models = os.environ.get("HF_ATTN_EXPLORE_MODELS", "checkpoints/rope-whole-reviews")
    launch([folder.strip() for folder in models.split(",") if folder.strip()])
