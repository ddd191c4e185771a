"""`hf-attn explore`: a local Gradio page (also a Space, `app.py`) that shows what each position scheme does
to a review: every classifier's verdict, a long review's windows and their push on the decision, attention
heatmaps, and the scheme's own picture beside the attention measured on the text.

`analysis` computes all of it from a saved classifier (torch only, unit-tested); `page` draws it and needs
the `app` extra (gradio). Importing this package imports neither.
"""
