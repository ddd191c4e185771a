"""What every layer above the models asks of the machine they run on (imports nothing heavy).

* ``precision``: what a run computes in (bfloat16 autocast where the hardware has bfloat16 units, else float32),
  the CPU's description, and the one `autocast` the experiments, the bench and the arena compute under.
"""
