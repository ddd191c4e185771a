"""The arena (`hf-attn arena`): every position scheme through the same data, budget and seed, in one table.

    hf-attn arena --config configs/arena/arena.yaml --budget small --output-dir runs/arena --results results/arena

An arena file (`configs/arena/arena.yaml`) names a classifier experiment and a pretraining experiment
(existing files of configs/), the schemes to put through both, and what to measure; each of its
`budgets` overrides the two experiments (rows, epochs, steps, model size) and sets the evaluation limits.
For every scheme the arena

* trains a classifier at the experiment's `max_length` (128) and scores test reviews read at every
  `read_lengths` entry (`whole`: the longest test review, so nothing is cut), directly, as windows
  (`window_stride`), and for RoPE also with each of `rope_scalings` applied at inference;
* pretrains a masked-LM encoder at the same length and measures its loss on the validation reviews as
  one token stream cut into windows of every `mlm_lengths` entry (the ALiBi paper's Figure 1, for encoders);
* times whole-review inference at every `speed_lengths` entry with full attention, sliding-window
  attention (all layers) and windows.

Each finished measurement (an evaluation, a loss, a timing) is a cell: a JSON file under `--results/cells`,
written as soon as it is measured and stamped with the settings its kind depends on (`kinds`), so that an arena
that gains a scheme or a length measures only the new cells; training runs keep their checkpoints under
`--output-dir/runs`. The same command
run again reads what is there, resumes an interrupted training and measures only what is missing, then
writes `arena.md`, `arena.json` and the plots to `--results`; with `--max-time` it is one stage of a longer
run (docs/long-runs.md).

The modules, by concern: `settings` (how a key of the arena file is declared), `roles` (the models an arena
trains: encoder, classifier, decoder), `kinds` (the kinds of cells, a file each, each class owning its settings,
stamp, measuring, record section, summary, table and plots; `CELL_KINDS` lists them), `schema` (the arena file and
its budgets as the roles and kinds declare them, the experiments they make), `cells` (committed measurements),
`measure` (readings, masked-LM loss, speed), `run` (`run_arena`: the pending cells, the models they need, stages,
committed encoders) and `report` (JSON, table and plots, each kind asked for its own). A stage's clock is
`experiments.stages.StageClock`. Adding a kind is one file in `kinds/` and one line in `CELL_KINDS`
(docs/contributing.md).
"""

from ..stages import StageClock, StageStopped
from .cells import Cells
from .kinds import CELL_KINDS, DEFAULT_TASK, Cell, plan
from .measure import masked_lm_loss, mlm_token_budget
from .report import markdown_report, ranking, standard_error
from .roles import ROLES, Model, Role
from .run import ArenaRun, run_arena, trained
from .schema import Arena, ArenaConfigError, Budget, experiment_for, load_arena
from .settings import Setting

__all__ = [
    "CELL_KINDS",
    "DEFAULT_TASK",
    "ROLES",
    "Arena",
    "ArenaConfigError",
    "ArenaRun",
    "Budget",
    "Cell",
    "Cells",
    "Model",
    "Role",
    "Setting",
    "StageClock",
    "StageStopped",
    "experiment_for",
    "load_arena",
    "markdown_report",
    "masked_lm_loss",
    "mlm_token_budget",
    "plan",
    "ranking",
    "run_arena",
    "standard_error",
    "trained",
]
