"""Config of the sweeper, registered in Hydra's ConfigStore: ``hydra/sweeper: optuna`` with the option groups
``hydra/sweeper/sampler`` (tpe, random) and ``hydra/sweeper/pruner`` (none, median, successive_halving,
hyperband). Every key is documented in docs/sweeps.md; conf/hparams_search/*.yaml set them per search."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.sru_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    _recursive_: bool = False           # the sweeper builds sampler and pruner itself (a sampler per trial)
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "tpe"}, {"pruner": "none"}])
    direction: str = "minimize"         # of the value train.py returns (the task's monitored valid metric)
    study_name: str = "sweep"
    storage: Optional[str] = None       # null: in memory; sqlite:///x.db, postgresql://..., or a journal file path
    n_trials: int = 20                  # trials to finish (complete + pruned) in the study, all workers together
    n_jobs: int = 1                     # trials launched per batch (side by side with a parallel launcher)
    max_failures: Optional[int] = 3     # crashed trials in the study that stop the sweep (null: never stop)
    heartbeat_interval: float = 30.0    # seconds between a worker's stamps on the trials it runs
    grace_period: Optional[float] = None  # a RUNNING trial unstamped this long is failed + retried (null: 4x interval)
    max_retry: Optional[int] = 2        # retries of a trial whose worker was killed (null: unlimited)
    sampler: Any = MISSING             # hydra/sweeper/sampler=tpe|random (defaults above; MISSING: do not mask them)
    pruner: Any = MISSING              # hydra/sweeper/pruner=none|median|successive_halving|hyperband
    params: Dict[str, str] = field(default_factory=dict)  # key: Hydra sweep syntax, e.g. tag(log, interval(1e-4, 1e-2))
    trial_number: Optional[int] = None  # set by the sweeper in each job's config: the Optuna trial the job runs


cs = ConfigStore.instance()
cs.store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="sru_optuna_sweeper")
SAMPLERS = {
    "tpe": {"_target_": "optuna.samplers.TPESampler", "seed": None, "n_startup_trials": 10},
    "random": {"_target_": "optuna.samplers.RandomSampler", "seed": None},
}
PRUNERS = {  # the step a pruner sees is the trainer's optimizer step of each validation
    "none": {"_target_": "optuna.pruners.NopPruner"},
    "median": {"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 5, "n_warmup_steps": 0,
               "interval_steps": 1, "n_min_trials": 1},
    "successive_halving": {"_target_": "optuna.pruners.SuccessiveHalvingPruner", "min_resource": "auto",
                           "reduction_factor": 4, "min_early_stopping_rate": 0},
    "hyperband": {"_target_": "optuna.pruners.HyperbandPruner", "min_resource": 1, "max_resource": "auto",
                  "reduction_factor": 3},
}
for name, node in SAMPLERS.items():
    cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider="sru_optuna_sweeper")
for name, node in PRUNERS.items():
    cs.store(group="hydra/sweeper/pruner", name=name, node=node, provider="sru_optuna_sweeper")
