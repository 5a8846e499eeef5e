"""Where a campaign's cells (arm × seed) run: this machine, a Ray cluster, or SLURM.

Every executor has the same small interface: ``run(tasks, events) -> outcomes`` trains each
:class:`~.cell_task.CellTask` with :func:`~.cell_task.run_cell_task` somewhere, calls
``events("running" | "done", task, outcome)`` as cells start and end, returns one
:class:`~.cell_task.CellOutcome` per task (FAILED ones included, never raising for a cell), and cancels
whatever it submitted when interrupted. ``remote`` says whether cells may run on other machines (they then
need a tracking server). What the campaign does around them is in :mod:`.dispatch`.

* ``local`` (:mod:`.local_pool`): ``--jobs N`` worker processes; the default N fits the cores to the cells'
  torch threads. ``--jobs 1`` keeps the campaign in its own process, as it has always run.
* ``ray`` (:mod:`.ray_executor`): a task per cell on ``--ray-address``, or on a Ray started for the command.
* ``slurm`` (:mod:`.slurm_executor`): a job (or array task) per cell through submitit.

Results are the same wherever cells run: seeds are derived from the config, and a cell's torch threads
are its config's ``torch_threads`` when set (set them for bitwise-identical runs across executors whose
default thread counts differ).
"""
