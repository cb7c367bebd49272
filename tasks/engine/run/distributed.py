"""Data-parallel training helpers: torchrun / SLURM (submitit) setup, rank-0 rules, reductions.

One process per device. `torchrun --nproc_per_node=N train.py ...` sets RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR / MASTER_PORT; a multi-task SLURM job launched by submitit (hydra/launcher=slurm with
tasks_per_node = GPUs) sets SUBMITIT_* variables instead, which `setup()` turns into the same torchrun
variables. Without either, everything here degrades to single-process no-ops, so the trainer calls these
helpers unconditionally.

Rules the trainer follows (why they exist):
- only rank 0 writes (run dir, checkpoints, metrics, progress bar): N writers to one file corrupt it;
- every rank uses rank 0's run dir (`broadcast_object`), so resume reads the same checkpoint everywhere;
- metrics come from SUMMED logging outputs (`all_reduce_sum`), so perplexity / accuracy are exact global values,
  not averages of per-rank averages;
- gradient accumulation skips the all-reduce on non-final micro-steps (`maybe_no_sync`).
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tasks.engine.run.devices import move_to_device

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def _export_submitit_env() -> None:
    """Inside a multi-task submitit job (SLURM or local), export torchrun-style variables for env:// init."""
    if "RANK" in os.environ or os.environ.get("SUBMITIT_EXECUTOR") is None:
        return
    import submitit  # only imported inside submitit jobs

    if submitit.JobEnvironment().num_tasks > 1:
        # set_cuda_visible_devices=False: we pick cuda:LOCAL_RANK ourselves, which also works when SLURM
        # already restricted the visible GPUs per task. overwrite=True: a MASTER_PORT inherited from the
        # submitting shell is honoured by submitit itself, and every task computes the same values.
        submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)


def env_rank() -> int:
    """Rank announced by torchrun's environment (usable before init, e.g. to configure Hydra)."""
    return int(os.environ.get("RANK", "0"))


def setup(device: str = "auto", backend: str | None = None, timeout_s: int = 1800) -> DistInfo:
    """Initialise the default process group when launched with more than one process; idempotent.

    device: the trainer's device setting: "auto" (CUDA when available, else cpu), "cpu", or "cuda"/"cuda:N";
      with several processes each uses cuda:LOCAL_RANK (a fixed index would put all ranks on one GPU).
    backend: None = nccl for CUDA, gloo for CPU.
    """
    _export_submitit_env()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    kind = str(device).split(":")[0]
    if kind not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; received {device!r}")
    use_cuda = torch.cuda.is_available() if kind == "auto" else kind == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available; use trainer.device=cpu (or auto)")
    if not use_cuda:
        dev = torch.device("cpu")
    elif world_size > 1:
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        dev = torch.device("cuda", torch.cuda.current_device())
    else:
        dev = torch.device(device if kind == "cuda" else "cuda")
    if world_size > 1 and not dist.is_initialized():
        missing = [v for v in TORCHRUN_VARS if v not in os.environ]
        if missing:
            raise ValueError(
                f"WORLD_SIZE={world_size} but {missing} are not set; launch with torchrun "
                "(torchrun --nproc_per_node=N train.py ...) or a submitit launcher"
            )
        backend = backend or ("nccl" if use_cuda else "gloo")
        kwargs = {"device_id": dev} if use_cuda else {}
        dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def cleanup() -> None:
    """Destroy the process group (safe to call always; call it also on errors so peers don't hang)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def get_rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def is_main() -> bool:
    """True on the process that writes files, logs and shows progress (rank 0)."""
    return get_rank() == 0


def barrier() -> None:
    if get_world_size() > 1:
        dist.barrier()


def _reduce_device() -> torch.device:
    # nccl only reduces CUDA tensors; gloo only CPU ones.
    if get_world_size() > 1 and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: dict[str, float]) -> dict[str, float]:
    """Sum a dict of numbers over all ranks (same keys on every rank, in any order); returns python floats.

    float64 keeps token counts and loss sums exact enough for perplexity over millions of tokens.
    """
    if get_world_size() == 1:
        return {k: float(v) for k, v in values.items()}
    keys = sorted(values)
    packed = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_reduce_device())
    dist.all_reduce(packed, op=dist.ReduceOp.SUM)
    return dict(zip(keys, packed.tolist()))


def all_reduce_max(value: int) -> int:
    """The largest ``value`` over all ranks: one tiny collective, cheap enough to run every step.

    The trainer reduces its stop flag (the signal number, 0 for none) with it after each optimizer step,
    so when SIGTERM reaches the ranks at slightly different times they all stop at the same step.
    """
    if get_world_size() == 1:
        return int(value)
    packed = torch.tensor([int(value)], dtype=torch.int64, device=_reduce_device())
    dist.all_reduce(packed, op=dist.ReduceOp.MAX)
    return int(packed.item())


def broadcast_object(obj=None, src: int = 0):
    """Return rank `src`'s `obj` on every rank (e.g. the run dir chosen by rank 0)."""
    if get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=_reduce_device())
    return box[0]


def gather_to_main(obj):
    """List of every rank's `obj` on rank 0 (None elsewhere); tensors travel via CPU.

    Used for per-rank state a checkpoint must keep, e.g. the carried hidden state of each rank's columns.
    """

    obj = move_to_device(obj, torch.device("cpu"))
    if get_world_size() == 1:
        return [obj]
    out = [None] * get_world_size() if is_main() else None
    dist.gather_object(obj, out, dst=0)  # with nccl this uses the current CUDA device, which setup() set
    return out


def broadcast_run_dir(run_dir: str | os.PathLike | None) -> str:
    """Every rank gets rank 0's run dir, so all read the same checkpoints; only rank 0 writes there."""
    return str(broadcast_object(str(run_dir) if is_main() else None))


def wrap_model(model: torch.nn.Module, info: DistInfo, **ddp_kwargs) -> torch.nn.Module:
    """Wrap in DistributedDataParallel when world_size > 1 (DDP broadcasts rank 0's parameters at wrap time)."""
    if not info.enabled:
        return model
    if info.device.type == "cuda":
        ddp_kwargs.setdefault("device_ids", [info.device.index])
    return DistributedDataParallel(model, **ddp_kwargs)


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module (for checkpoints, task hooks and parameter names without the `module.` prefix)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def maybe_no_sync(model: torch.nn.Module, sync: bool):
    """Context for one micro-step: skip DDP's gradient all-reduce unless `sync` (the last micro-step)."""
    if sync or not isinstance(model, DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()


def max_replica_difference(module: torch.nn.Module) -> float:
    """Largest |difference| of any parameter between ranks (0.0 when replicas are in sync).

    DDP keeps replicas identical by construction; the trainer checks once at the end of training, so a
    rank that silently diverged (e.g. a parameter updated outside DDP) is caught rather than saved.
    """
    if get_world_size() == 1:
        return 0.0
    flat = torch.cat([p.detach().float().reshape(-1) for p in module.parameters()]).to(_reduce_device())
    high, low = flat.clone(), flat.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return float((high - low).abs().max())


def shard_slice(total: int, even: bool = True, rank: int | None = None, world_size: int | None = None) -> slice:
    """Contiguous part of `total` items (batch columns, a batch's examples) owned by `rank`.

    The slices of all ranks cover 0..total-1 in order, so the global batch is the concatenation of the
    ranks' batches. even=True (training) requires total % world_size == 0: with unequal shards DDP's mean of
    per-rank mean gradients would differ from the single-process mean over the same global batch.
    even=False (evaluation, where only summed logging outputs matter) gives the first ranks one item more.
    """
    rank = get_rank() if rank is None else rank
    world_size = get_world_size() if world_size is None else world_size
    if even and total % world_size:
        raise ValueError(
            f"batch size {total} is not divisible by world size {world_size}; "
            f"choose a global batch size that is a multiple of {world_size}"
        )
    if total < world_size:
        raise ValueError(f"cannot split {total} items over {world_size} ranks; "
                         f"use a batch size of at least {world_size}")
    base, extra = divmod(total, world_size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def hydra_overrides_for_rank(rank: int | None = None, argv: list[str] | None = None) -> list[str]:
    """Hydra overrides for non-zero ranks so Hydra creates no run dir, .hydra/ or log file of its own.

    Ranks > 0 run Hydra in the current directory without writing anything; they get rank 0's run dir
    via `broadcast_run_dir` once the process group exists. A sweep (-m) inside torchrun is refused: every
    rank would run the whole sweep with its own sweep dir (use hydra/launcher=slurm with tasks_per_node).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and {"-m", "--multirun"} & set(argv or []):
        raise SystemExit("train.py -m under torchrun is not supported: launch a sweep of DDP jobs with "
                         "python train.py -m hydra/launcher=slurm hydra.launcher.tasks_per_node=N (or "
                         "hydra/launcher=local), or run torchrun once per configuration")
    rank = env_rank() if rank is None else rank
    if rank == 0:
        return []
    return ["hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=stdout", "hydra/hydra_logging=none"]
