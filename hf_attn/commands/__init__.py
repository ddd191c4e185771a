"""One module per `hf-attn` command: each defines the command's options (`add_arguments(parser)`) and does its
work by calling the package's functions (`run(args)`), reading the arguments and printing the result.

`hf_attn.cli` maps each command name to its module and imports the module only when that command is parsed,
so a module's top level imports nothing heavy (torch, datasets, the experiments): those are imported inside
`run`. What several commands share (the dataset and its columns, the help of the reading options, the
overrides of an experiment) is in `common`.
"""
