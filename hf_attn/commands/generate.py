"""`hf-attn generate`: continue prompts with a saved causal LM, or write an encoder-decoder's output for each
source, checking first that the prompt and the new tokens fit the model's positions."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..arguments import model_with_tokenizer, positive_int
from .common import text_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer)
    parser.add_argument("--max-new-tokens", type=positive_int, default=50)
    parser.add_argument("--max-length", type=positive_int,
                        help="read only the last N tokens of each prompt (default: all of them; a model with "
                        "learned positions refuses a prompt it has no positions for and names the N that fits)")
    parser.add_argument("--num-beams", type=positive_int, default=1, help="beam search with this many beams (1: none)")
    parser.add_argument("--do-sample", action="store_true", help="sample instead of taking the likeliest token")
    parser.add_argument("--temperature", type=float, default=1.0, help="with --do-sample: below 1 sharpens")
    parser.add_argument("--top-k", type=positive_int, default=50, help="with --do-sample: only the k likeliest tokens")
    parser.add_argument("--top-p", type=float, default=1.0, help="with --do-sample: the smallest set of that mass")
    parser.add_argument("--seed", type=int, default=0, help="seeds sampling, so a run can be repeated")
    parser.add_argument("prompts", nargs="+")


def run(args: argparse.Namespace) -> None:
    """Print the continuation of each prompt (for an encoder-decoder folder: the output for each source).

    The whole prompt is read (its end is what a continuation follows), or its last `--max-length` tokens; a model
    with learned positions refuses a prompt it has no positions for, naming its length and the limit.
    An empty prompt starts from the model's `bos_token_id` when it has one (Week 3 tokenizers have no
    BOS token); without one it is an error. One prompt at a time, so no padding is needed. A prompt with words the
    model's tokenizer reads as unknown (a word-level vocabulary's) is refused before anything is generated; a
    continuation without text is still a line, and stderr names the tokens it holds instead.
    """
    import torch
    from transformers import AutoConfig, set_seed

    from ..experiments.seq2seq_training import load_seq2seq
    from ..saved import check_known_words, load_saved_causal_lm, load_tokenizer

    prompts = text_arguments(args.prompts, "prompt")
    is_seq2seq = AutoConfig.from_pretrained(args.model).is_encoder_decoder
    if is_seq2seq:
        model = load_seq2seq(args.model)
        tokenizer = load_tokenizer(args.model)
    else:
        model, tokenizer = load_saved_causal_lm(args.model)
    for number, prompt in enumerate(prompts, 1):
        check_known_words(tokenizer, prompt, f"prompt {number}", args.model,
                          "write prompts in the words the model was trained on")
    model.eval()
    options = dict(max_new_tokens=args.max_new_tokens, num_beams=args.num_beams, do_sample=args.do_sample,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
    for number, prompt in enumerate(prompts, 1):
        # `verbose=False`: no warning that the prompt is longer than the tokenizer's training length.
        input_ids = tokenizer(prompt, truncation=False, verbose=False, return_tensors="pt")["input_ids"]
        if args.max_length is not None:
            input_ids = input_ids[:, -args.max_length :]
        if not input_ids.shape[1]:
            if is_seq2seq or model.generation_config.bos_token_id is None:
                raise ValueError(f"the prompt {prompt!r} has no tokens and the model has no bos_token_id to start from")
            input_ids = torch.tensor([[model.generation_config.bos_token_id]])
        check_generation_fits(model.config, input_ids.shape[1], args.max_new_tokens)
        set_seed(args.seed)
        with torch.no_grad():
            output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **options)
        new_tokens = output[0, 1 if is_seq2seq else input_ids.shape[1]:]  # after the decoder start token, or the prompt
        answer = tokenizer.decode(new_tokens, skip_special_tokens=True)
        if not answer.strip():  # the line stays (one per prompt); stderr says why it is blank
            print(f"hf-attn generate: prompt {number}'s continuation holds no text, only "
                  f"{' '.join(tokenizer.convert_ids_to_tokens(new_tokens.tolist())) or 'no tokens'}", file=sys.stderr)
        print(answer)


def check_generation_fits(config: Any, prompt_length: int, max_new_tokens: int) -> None:
    """A one-line ValueError when generating `max_new_tokens` after a prompt of `prompt_length` tokens needs
    positions a learned table does not have (schemes that extrapolate have no such limit).

    A causal LM reads the prompt and every new token but the last; an encoder-decoder's encoder reads the prompt,
    and its decoder the start token and every new token but the last."""
    from ..saved import beyond_learned_table

    decoder = config.decoder if config.is_encoder_decoder else config
    if beyond_learned_table(decoder, max_new_tokens):
        raise ValueError(f"--max-new-tokens {max_new_tokens} is more than the {decoder.max_position_embeddings} "
                         f"learned positions the model generates with; pass --max-new-tokens "
                         f"{decoder.max_position_embeddings} or fewer")
    if config.is_encoder_decoder:
        limit = config.encoder.max_position_embeddings
        if beyond_learned_table(config.encoder, prompt_length):
            raise ValueError(f"the prompt has {prompt_length} tokens but the encoder's learned positions cover "
                             f"{limit}; pass --max-length {limit} to read its last {limit} tokens")
        return
    needed, limit = prompt_length + max_new_tokens - 1, config.max_position_embeddings
    if beyond_learned_table(config, needed):
        keep = limit - max_new_tokens + 1
        raise ValueError(f"the prompt has {prompt_length} tokens, which with {max_new_tokens} new ones need {needed} "
                         f"positions, but the model's learned positions cover {limit}; pass --max-length {keep} to "
                         f"continue the prompt's last {keep} tokens (or fewer --max-new-tokens)")
