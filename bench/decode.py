"""One-step decoding latency (``python -m bench.speed --decode``, ``bench.speed``): a stack at
L = 1 with its state carried from step to step, as a translation decoder or a streaming model runs it.

Candidates, per batch size, all in eval mode without autograd:

    matmuls                  x·W of every SRU layer at L = 1: the floor (at B = 1 reading the
                             weights, memory-bound)
    sru (inference_mode)     this package's SRU, state carried, under torch.inference_mode()
    sru (no_grad)            the same under torch.no_grad()
    sru-official             the official ``sru`` package (2.x), when ``--official DIR`` holds it
    lstm                     nn.LSTM of the same width and depth, (h, c) carried
    srupp-matmuls            SRU++ (``SRUpp(512, 512, proj_size=128, num_layers=2)``): the products
                             of its layers at L = 1 (x·W1, z·W2, z·W3 per layer): its floor
    srupp                    its one-step decoding (``sru.srupp_decode.decode``), cache carried with a
                             sliding window of SRUPP_CONTEXT positions (so every step sees as many)

``srupp`` is judged against ``srupp-matmuls`` as ``sru`` against ``matmuls``. Then a profile of the SRU
step (``profile_step``) and of the SRU++ step (``bench.decoding.srupp_step``): where their microseconds go.

The official package is also named ``sru``; to time it beside this one without installing it
over this package, install it into its own directory and pass that:

    pip install --no-deps --target ~/.cache/sru-official sru==2.6.0
    python -m bench.speed --decode --official ~/.cache/sru-official
"""
import ctypes
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Callable, Dict, List

import torch
from torch import nn

from bench.decoding import srupp_step as decode_srupp
from bench.harness import calls_per_sample, fmt, interleaved, markdown_table, paired_ratio, step_budget, summarize

DECODE_BATCHES = (1, 32)
DECODE_WIDTH, DECODE_LAYERS = 512, 2
SRUPP_PROJ, SRUPP_CONTEXT = 128, 64


def load_official(directory: str):
    """Import the official ``sru`` package from ``directory`` (a ``pip --target`` install) as a
    separate module object, leaving this package's ``sru`` in ``sys.modules`` untouched."""
    init = Path(directory).expanduser() / "sru" / "__init__.py"
    if not init.exists():
        raise FileNotFoundError(f"--official: {init} does not exist; install the package there "
                                f"with `pip install --no-deps --target {directory} sru==2.6.0`")
    ours = {k: v for k, v in sys.modules.items() if k == "sru" or k.startswith("sru.")}
    for name in ours:
        del sys.modules[name]
    try:
        spec = importlib.util.spec_from_file_location(
            "sru", init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["sru"] = module  # its own `from sru.x import` lines resolve inside it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "could not compile the CUDA kernels" on CPU
            spec.loader.exec_module(module)
        return module
    finally:
        for name in [k for k in sys.modules if k == "sru" or k.startswith("sru.")]:
            del sys.modules[name]
        sys.modules.update(ours)


def _stepper(module: nn.Module, x: torch.Tensor, state, context) -> Callable[[], None]:
    """One decoding step per call, feeding each step's state into the next."""
    box = [state]

    def step() -> None:
        with context():
            _, box[0] = module(x, box[0])
    return step


def build_candidates(batch: int, device: str, official) -> Dict[str, Callable[[], Callable]]:
    from sru import SRU

    d, layers = DECODE_WIDTH, DECODE_LAYERS
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(1, batch, d, generator=gen).to(device)
    c0 = torch.zeros(layers, batch, d, device=device)

    def ours(context):
        module = SRU(d, d, num_layers=layers).to(device).eval()
        return _stepper(module, x, c0, context)

    def matmuls():
        weights = [cell.weight.detach() for cell in SRU(d, d, num_layers=layers).to(device).rnn_lst]
        rows = x.view(batch, d)

        def step() -> None:
            with torch.inference_mode():
                for w in weights:
                    rows.mm(w)
        return step

    def lstm():
        module = nn.LSTM(d, d, num_layers=layers).to(device).eval()
        return _stepper(module, x, (c0.clone(), c0.clone()), torch.inference_mode)

    def srupp_model():
        from sru import SRUpp
        return SRUpp(d, d, proj_size=SRUPP_PROJ, num_layers=layers).to(device).eval()

    def srupp():
        from sru.srupp_decode import decode
        model = srupp_model()
        with torch.inference_mode():  # a full window of context before the timed steps
            _, cache = decode(model, torch.randn(SRUPP_CONTEXT, batch, d, generator=gen).to(device))
        box, step_input = [cache], x.view(batch, d)

        def step() -> None:
            with torch.inference_mode():
                _, box[0] = decode(model, step_input, box[0], max_context=SRUPP_CONTEXT)
        return step

    def srupp_matmuls():
        transforms = [cell.transform_module for cell in srupp_model().rnn_lst]
        weights = [[lin.weight.detach().t() for lin in (t.linear1, t.linear2, t.linear3)] for t in transforms]
        rows = x.view(batch, d)

        def step() -> None:
            with torch.inference_mode():
                for w1, w2, w3 in weights:
                    z = rows.mm(w1)
                    z.mm(w2)
                    z.mm(w3)
        return step

    builders = {"matmuls": matmuls,
                "sru (inference_mode)": lambda: ours(torch.inference_mode),
                "sru (no_grad)": lambda: ours(torch.no_grad),
                "lstm": lstm, "srupp-matmuls": srupp_matmuls, "srupp": srupp}
    if official is not None:
        builders["sru-official"] = lambda: _stepper(
            official.SRU(d, d, num_layers=layers).to(device).eval(), x, c0, torch.inference_mode)
    return builders


def run(args, timer) -> List[Dict]:
    """Time every candidate round-robin per batch size; ratios paired per round, each against its floor
    (``matmuls`` for the SRU and the LSTM, ``srupp-matmuls`` for SRU++)."""
    official = None if not args.official else load_official(args.official)
    rows = []
    for batch in DECODE_BATCHES:
        steps = {name: build() for name, build in
                 build_candidates(batch, args.device, official).items()}
        # at least 10 calls per sample: one step is microseconds, below the timer's resolution
        numbers = {name: calls_per_sample(step, timer, args.min_ms, max(args.warmup, 20), least=10)
                   for name, step in steps.items()}
        samples = interleaved(steps, timer, args.repeats, numbers)
        stats = {name: summarize(samples[name]) for name in steps}
        for name in steps:
            floor = "srupp-matmuls" if name.startswith("srupp") else "matmuls"
            # Interference from other processes only ever adds time: the minimum over rounds is
            # the least disturbed sample, a second view beside the paired median on a busy machine.
            row = {"batch": batch, "candidate": name, **stats[name],
                   "min_ms": min(stats[name]["samples_ms"]),
                   "floor": floor, "vs_matmuls": paired_ratio(stats[name], stats[floor]),
                   "vs_matmuls_min": min(stats[name]["samples_ms"]) / min(stats[floor]["samples_ms"])}
            if "sru-official" in stats:
                row["vs_official"] = paired_ratio(stats[name], stats["sru-official"])
            rows.append(row)
    return rows


def markdown(rows: List[Dict]) -> str:
    head = [f"One decoding step, SRU {DECODE_LAYERS} x {DECODE_WIDTH} (L = 1, state carried), "
            "µs per step: median [IQR]; ratios: median over rounds of the per-round ratio",
            "(min: the fastest round of each, and their ratio); SRU++ rows against srupp-matmuls", ""]
    cells = [[r["batch"], r["candidate"],
              f"{r['median_ms'] * 1e3:.1f} [{r['q25_ms'] * 1e3:.1f}–{r['q75_ms'] * 1e3:.1f}]",
              f"{r['min_ms'] * 1e3:.1f}", f"{r['vs_matmuls']:.3f}x", f"{r['vs_matmuls_min']:.3f}x",
              fmt(r.get("vs_official"), ".3f", "x")] for r in rows]
    return "\n".join(head) + "\n" + markdown_table(
        ["B", "candidate", "µs / step [IQR]", "min µs", "/ matmuls", "min / min matmuls", "/ official"], cells)


# Where the microseconds of one SRU decoding step go (``python -m bench.speed --decode`` prints it).
#
# A step of a plain stack in inference is: ``nn.Module.__call__``, ``SRU.forward``'s first tests (scripting,
# tracing), the route choice (``sru.ops.cpu.paths.stack_plan``: grad mode, autocast and eager guards,
# shapes, the cached plan's validity), then the run (the GEMM route, two output allocations and one C call:
# the matmuls and the recurrence of every layer). Each part is timed alone here, the parts interleaved
# in rounds with the whole step, so the table reads as one budget: the parts' medians against the
# whole's, with the remainder (argument filling, ``contiguous``, the call's Python frames) left over.
#
# Routing decisions are made once per model: the plan (the C layer array, the route) is cached on the
# module and only *checked* per call (``StackPlan.current``: one tuple compare over the cells' state and
# parameter identities; ``StackPlan.gemm_is_mkl``: a dict hit). Those two checks are rows here.


# the products' row: in the one C call (with the recurrence), or, where a layer routes to oneDNN, alone
PRODUCTS = "  the products (one C call: with the recurrence; routed: alone, sru.ops.matmul)"
STEP_WHOLE = "whole step: module(x, c)"


def _step_parts(module, x: torch.Tensor, c0: torch.Tensor) -> Dict[str, Callable[[], object]]:
    """The step and each of its parts as a no-argument function, all under inference_mode."""
    from sru.ops.backends import cpu_paths as paths, cpu_stack

    with torch.inference_mode():
        module(x, c0)  # builds and caches the plan
    plan = module.__dict__["_stack_plan"]
    cells = list(module.rnn_lst._modules.values())
    rows = x.shape[0] * x.shape[1]
    h = x.new_empty(x.shape[0], x.shape[1], plan.width)
    c_last = x.new_empty(plan.num_layers, x.shape[1], plan.width)
    workspace = x.new_empty(rows * plan.per_row)
    args = cpu_stack.StackArgs(layers=plan.layers, num_layers=plan.num_layers, x=x.data_ptr(), c0=c0.data_ptr(),
                     h=h.data_ptr(), c_last=c_last.data_ptr(), workspace=workspace.data_ptr(),
                     length=x.shape[0], batch=x.shape[1], num_threads=torch.get_num_threads())
    ref = ctypes.byref(args)
    buffers = (h, c_last, workspace)  # the C call writes through the pointers: keep them alive

    def c_call():
        return plan.call(ref), buffers

    def inference(fn):
        def run():
            with torch.inference_mode():
                fn()
        return run

    width, layers = plan.width, plan.num_layers
    parts = {
        STEP_WHOLE: lambda: module(x, c0),
        "SRU.forward (no nn.Module.__call__)": lambda: module.forward(x, c0),
        "route choice (paths.stack_plan)": lambda: paths.stack_plan(module, x, c0, None),
        "  grad / autocast / eager guards": lambda: (torch.is_grad_enabled(), paths._eager_cpu(x)),
        "  plan check (StackPlan.current)": lambda: plan.current(cells, x.dtype),
        "the run (paths.run_stack)": lambda: paths.run_stack(module, plan, x, c0, None),
        "  StackPlan.run (routing, allocations, products, recurrence)": lambda: plan.run(x, c0, None),
        "  GEMM routing (StackPlan.gemm_is_mkl)": lambda: plan.gemm_is_mkl(rows),
        "  allocations (h, c)": lambda: (x.new_empty(x.shape[0], x.shape[1], width),
                                         x.new_empty(layers, x.shape[1], width)),
    }
    if plan.gemm_is_mkl(rows):  # the products and the recurrence in one C call
        parts[PRODUCTS] = c_call
    else:  # a layer routed to oneDNN: per layer its routed product, then one kernel call
        from sru.ops import matmul
        weights = [(cell.weight, cell.gemm) for cell in cells]
        flat = x.view(rows, x.shape[2])
        parts[PRODUCTS] = lambda: [matmul(flat, w, g) for w, g in weights]
    return {name: inference(fn) for name, fn in parts.items()}


def profile_step(module, x: torch.Tensor, c0: torch.Tensor, timer, repeats: int, min_ms: float) -> List[Dict]:
    """Median µs per call of every part, interleaved in ``repeats`` rounds; ``share`` of the whole step."""
    parts = _step_parts(module, x, c0)

    def derived(us: Dict[str, float]) -> Dict[str, float]:
        # the nesting: module() > forward() > the route choice (its guards, the plan check) and the run
        # (StackPlan.run: the GEMM route, the allocations, the products and the recurrence)
        forward, choice, run = (us[k] for k in ("SRU.forward (no nn.Module.__call__)", "route choice (paths.stack_plan)",
                                                "the run (paths.run_stack)"))
        plan_run = us["  StackPlan.run (routing, allocations, products, recurrence)"]
        return {
            "nn.Module.__call__": us[STEP_WHOLE] - forward,
            "SRU.forward around the route (scripting / tracing tests, the route table)": forward - choice - run,
            "rest of the route choice (shapes, c0, the plan lookup)": choice - sum(us[k] for k in list(parts)[3:5]),
            "rest of run_stack (batch_first, contiguous)": run - plan_run,
            "rest of StackPlan.run (scratch, argument struct; per-layer kernel calls when routed)":
            plan_run - sum(us[k] for k in list(parts)[7:]),
        }
    path = "one C call" if module.__dict__["_stack_plan"].gemm_is_mkl(x.shape[0] * x.shape[1]) else "routed"
    return step_budget(parts, STEP_WHOLE, derived, timer, repeats, min_ms, path)


def profile_markdown(profiles: Dict[int, List[Dict]], model: str = "SRU") -> str:
    """One table: a row per part, a column per batch size."""
    batches = list(profiles)
    parts = [r["part"] for r in profiles[batches[0]]]
    cells = [[part] + [f"{profiles[b][i]['us']:.1f} ({profiles[b][i]['share']:.0%})" for b in batches]
             for i, part in enumerate(parts)]
    paths = ", ".join(f"B = {b}: {profiles[b][0]['path']}" for b in batches)
    head = (f"Where one {model} step's µs go ({paths}; each part timed alone, interleaved with the whole step; "
            "median µs, share of the whole; rows with '=' are differences of the rows above)")
    return head + "\n\n" + markdown_table(["part"] + [f"B = {b}" for b in batches], cells)


def step_profiles(args, timer) -> Dict[int, List[Dict]]:
    """``profile_step`` of the SRU step at every batch size."""
    from sru import SRU

    profiles = {}
    for batch in DECODE_BATCHES:
        module = SRU(DECODE_WIDTH, DECODE_WIDTH, num_layers=DECODE_LAYERS).to(args.device).eval()
        x = torch.randn(1, batch, DECODE_WIDTH, device=args.device)
        c0 = torch.zeros(DECODE_LAYERS, batch, DECODE_WIDTH, device=args.device)
        profiles[batch] = profile_step(module, x, c0, timer, args.repeats, args.min_ms)
    return profiles


def srupp_profiles(args, timer) -> Dict[int, List[Dict]]:
    """``bench.decoding.srupp_step.profile`` of the SRU++ step at every batch size (where the one-call step runs)."""
    found = {batch: decode_srupp.profile(batch, DECODE_WIDTH, DECODE_LAYERS, SRUPP_PROJ, SRUPP_CONTEXT, args.device,
                                         timer, args.repeats, args.min_ms) for batch in DECODE_BATCHES}
    return {batch: rows for batch, rows in found.items() if rows}


def decode_main(args, timer, out: Path, info: Dict) -> List[Dict]:
    rows = run(args, timer)
    profiles = step_profiles(args, timer) if args.device == "cpu" else {}
    srupp = srupp_profiles(args, timer) if args.device == "cpu" else {}
    table = (markdown(rows) + ("\n\n" + profile_markdown(profiles) if profiles else "")
             + ("\n\n" + profile_markdown(srupp, "SRU++") if srupp else ""))
    (out / "decode.json").write_text(json.dumps({"machine": info, "results": rows, "profile": profiles,
                                                 "srupp_profile": srupp}, indent=1))
    (out / "decode.md").write_text(f"Command: `{info['command']}`  \nMachine: "
                                   f"{info.get('gpu', info['cpu_model'])}, {info['threads']} threads, "
                                   f"torch {info['torch']}, {info['date']}\n\n{table}\n")
    print(table + f"\n\nwrote {out / 'decode.json'}, {out / 'decode.md'}", flush=True)
    return rows
