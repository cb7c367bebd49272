"""How far a unit-variance input gets through a deep nn.LSTM stack under each ``model.init``: the standard
deviation of every layer's output, and of the gradient reaching the input from the last time step.

    python scripts/lstm_init_signal.py                       # 5 x 128 on 240 inputs (the speech LSTM_5L cell)
    python scripts/lstm_init_signal.py --layers 6 --hidden 128 --input 128 --bidirectional

Recorded in docs/benchmarks.md#lstm-initialisation."""
from __future__ import annotations

import argparse

import torch

from tasks.common.rnn_encoders import LSTMEncoder


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=5)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--input", type=int, default=240)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    x = torch.randn(args.steps, args.batch, args.input, generator=torch.Generator().manual_seed(args.seed))
    print(f"{args.layers} x {args.hidden} LSTM{' (bidirectional)' if args.bidirectional else ''}, "
          f"input {args.input}, {args.steps} steps x batch {args.batch}")
    for init in ("torch", "keras"):
        torch.manual_seed(args.seed)
        enc = LSTMEncoder(args.input, args.hidden, args.layers, bidirectional=args.bidirectional, init=init)
        inp = x.clone().requires_grad_()
        outs, _ = enc(inp, return_all_layers=True)
        outs[-1][-1].sum().backward()  # the last step's output, back to every input step
        grad = inp.grad.norm(dim=(1, 2))
        back = [n for n in (0, 10, 50) if n < args.steps]
        print(f"init={init:5s} output std by layer: {' '.join(f'{o.std().item():.3f}' for o in outs)}; "
              f"input-gradient norm {' / '.join(str(n) for n in back)} steps back: "
              f"{' / '.join(f'{grad[-1 - n].item():.1e}' for n in back)}")


if __name__ == "__main__":
    main()
