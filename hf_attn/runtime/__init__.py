"""What every layer above the models asks of the machine they run on (imports nothing heavy).

* ``cpu``: the CPU's model name and matrix-product flags (from /proc/cpuinfo).
* ``precision``: what a run computes in (bfloat16 autocast where the hardware has bfloat16 units, else float32),
  and the one `autocast` the experiments, the bench and the arena compute under.
"""
