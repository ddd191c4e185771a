"""The experiments around the models (datasets: ``hf_attn.tasks``; precision: ``hf_attn.runtime``); `import hf_attn`
does not import them.

* ``config``: experiment YAML files (``base:`` inheritance, ``key=value`` overrides, validation) -> ``Experiment``;
* ``data``: tokenized splits, row limits and random training windows (the IMDb names re-exported from
  ``hf_attn.tasks.imdb``);
* ``run``: the one run skeleton (tokenizer -> model -> ``Trainer`` -> ``metrics.json``) every run goes through,
  with ``folders`` (the output folder), ``stages`` (``--max-time`` and continuing) and ``records`` beside it;
* ``classification``: ``hf-attn train`` and ``hf-attn evaluate``;
* ``pretraining``: ``hf-attn pretrain`` (masked LM, replaced-token detection, or a causal LM);
* ``perplexity``: ``hf-attn perplexity`` (a causal LM at several window lengths);
* ``seq2seq``: ``hf-attn seq2seq`` (encoder-decoders on the date-normalisation pairs of ``hf_attn.tasks.dates``);
* ``arena``: ``hf-attn arena`` (every position scheme through one data, budget and seed), a subpackage by
  concern: ``schema``, ``cells``, ``measure``, ``run``, ``report``;
* ``baseline``: ``hf-attn baseline`` (TF-IDF + logistic regression on the same tokens);
* ``results_index``: ``results/README.md``, the index of the results JSON files.
"""
