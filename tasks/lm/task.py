"""Language modeling task: token-weighted perplexity (word) or bits per character (char).

The recurrent state is carried from one BPTT window to the next within a pass over a split and
detached at every window (truncated BPTT); it is part of the task state so that a resumed run
continues with exactly the state the uninterrupted run would have had.
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.encoders import check_encoder_config
from tasks.common.rnn_encoders import detach_state
from tasks.common.text import Vocabulary
from tasks.engine.run import distributed
from tasks.engine.base import BadInput, LoggingOutput, Task
from tasks.lm.generate import generate, log_probability, perplexity
from tasks.lm.data import EOS, UNK, batchify, load_texts, num_windows, split_origin, tokenize, window
from tasks.lm.model import LanguageModel
from tasks.lm.schema import LMConfig, LMPredictOptions

MAX_EXP_ARG = math.log(1.7e308)  # math.exp overflows above this


class LanguageModelingTask(Task):
    name = "lm"
    scored_file = ("files", "task.data.{split}_file")  # evaluate.py file=<path>
    throughput_key = "ntokens"
    causal = True  # predicts the next token: a bidirectional encoder is refused before data loading
    models = ("sru", "lstm", "srupp", "transformer_lm")
    schema = LMConfig

    def __init__(self, cfg: Mapping[str, Any]):
        super().__init__(cfg)
        self.level = self.task_cfg.data.level
        # Word LMs are compared by perplexity, character LMs by bits per character.
        self.monitor = "bpc" if self.level == "char" else "ppl"
        self.monitor_mode = "min"
        self.streams: Dict[str, Tensor] = {}
        # per split: the share of its tokens outside the vocabulary (a corpus's own literal <unk>, as PTB's,
        # is a token the model trained on, not an unknown one)
        self.unknown_shares: Dict[str, float] = {}
        self.states: Dict[str, Any] = {}
        self.vocab: Vocabulary | None = None

    def check_config(self) -> None:
        super().check_config()  # model name
        check_encoder_config(self.cfg["model"], causal=self.causal)

    def setup(self) -> None:
        t0 = time.time()
        t = self.task_cfg
        texts = load_texts(t.data, self.splits)
        tokens = {s: tokenize(texts[s], self.level) for s in self.splits}
        if not self.restored:  # a loaded model (evaluate.py) keeps the vocabulary it was trained with
            specials = (UNK,) if self.level == "char" else (UNK, EOS)
            self.vocab = Vocabulary.build([tokens["train"]], specials=specials, max_size=t.data.max_vocab)
        max_train = t.data.max_train_tokens
        if max_train and "train" in tokens:  # quick runs on a prefix of the training text (the vocabulary stays the full one)
            tokens["train"] = tokens["train"][:max_train]
        sizes = {"train": t.batch_size, "valid": t.eval_batch_size, "test": t.eval_batch_size}
        known = self.vocab.stoi
        self.unknown_shares = {s: sum(1 for w in tokens[s] if w not in known) / max(len(tokens[s]), 1)
                               for s in self.splits}
        for s in self.splits:
            size_key = "task.batch_size" if s == "train" else "task.eval_batch_size"
            stream = batchify(self.vocab.encode_tensor(tokens[s]), sizes[s], s, split_origin(t.data, s), size_key)
            # DDP: each rank reads a contiguous slice of the batch columns (global batch = all ranks' columns);
            # training needs equal slices, evaluation only sums.
            self.streams[s] = stream[:, distributed.shard_slice(sizes[s], even=(s == "train"))]
        counts = ", ".join(f"{s} {self.streams[s].numel():,}" for s in self.splits)
        print(f"[lm] {t.data.source} ({self.level}): vocab {len(self.vocab):,}; tokens {counts} "
              f"({time.time() - t0:.1f}s)")

    def unknown_share(self, split: str) -> Optional[float]:
        return self.unknown_shares[split]

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        return num_windows(self.streams[split], self.task_cfg.bptt)

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Dict[str, Tensor]]:
        # LM streams are read in order every epoch (as in the paper), so epoch/seed do not matter.
        if start == 0:
            self.states.pop(split, None)
        stream, bptt = self.streams[split], self.task_cfg.bptt
        for i in range(start, num_windows(stream, bptt)):
            yield window(stream, i, bptt)

    def encoder_input_size(self) -> int:
        """The embedding width: ``task.emb_size``; null: the encoder's hidden size (tied weights), the rule
        beside it in conf/task/lm.yaml. Every encoder of ``models`` has a hidden_size."""
        emb_size = self.task_cfg.emb_size
        return emb_size if emb_size is not None else check_encoder_config(self.cfg["model"]).hidden_size

    def build_model(self) -> nn.Module:
        t = self.task_cfg
        return LanguageModel(len(self.vocab), self.encoder_input_size(), self.cfg["model"], emb_dropout=t.emb_dropout,
                             out_dropout=t.out_dropout, tie_weights=t.tie_weights)

    def compute_loss(self, model: nn.Module, batch: Dict[str, Tensor], split: str) -> Tuple[Tensor, LoggingOutput]:
        logits, state = model(batch["input"], self.states.get(split))
        self.states[split] = detach_state(state)  # truncated BPTT: keep values, cut the graph
        target = batch["target"]
        loss_sum = F.cross_entropy(logits.float().view(-1, logits.size(-1)), target.reshape(-1), reduction="sum")
        ntokens = target.numel()
        # sample_size: the trainer divides the summed loss's gradient by the global number of target tokens
        return loss_sum, {"loss_sum": loss_sum.item(), "ntokens": ntokens, "nsentences": target.size(1),
                          "sample_size": ntokens}

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        loss = summed["loss_sum"] / max(summed["ntokens"], 1)  # nats per token, token-weighted
        # not capped: a diverged model shows ppl inf (its raw loss is the "loss" key beside it), which the
        # trainer's divergence check refuses to save, instead of a normal-looking exp(50)
        ppl = math.exp(loss) if loss < MAX_EXP_ARG else math.inf
        return {"loss": loss, "ppl": ppl, "bpc": loss / math.log(2)}

    def state_dict(self) -> Dict[str, Any]:
        return {"states": {s: v for s, v in self.states.items() if s == "train"}, "vocab": self.vocab.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.vocab.check_same(state.get("vocab", {}))
        self.states = dict(state.get("states", {}))

    # ---- predict.py: continue each line, or score it ------------------------------------------
    predict_schema = LMPredictOptions

    def inference_state(self) -> Dict[str, Any]:
        return {"vocab": self.vocab.state_dict()}  # the carried training state is not needed to use the model

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        self.vocab = Vocabulary.from_state_dict(state["vocab"])

    def input_warnings(self, numbered: List[Tuple[int, str]]) -> List[str]:
        """A line made only of words the vocabulary lacks runs on <unk> alone: its result says nothing of it."""
        unknown = [n for n, line in numbered
                   if (tokens := [t for t in tokenize(line, self.level) if t != EOS])
                   and all(t not in self.vocab.stoi for t in tokens)]
        if not unknown:
            return []
        shown = ", ".join(map(str, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
        return [f"line(s) {shown}: every {'character' if self.level == 'char' else 'word'} is unknown to the "
                f"model's vocabulary ({len(self.vocab.stoi)} entries); they run as <unk> only"]

    def predict(self, model: nn.Module, inputs: List[str], options: LMPredictOptions, progress) -> List[Any]:
        """generate: each line's continuation (to the end of its line, at most ``max_tokens``); score:
        each line's log-probability (nats) after a line end, with its perplexity / bits per character."""
        mode = options.mode
        end = EOS if self.level == "word" else "\n"
        end_id = self.vocab.stoi.get(end, self.vocab.stoi[UNK])
        generator = torch.Generator().manual_seed(options.seed)
        results: List[Any] = []
        for line in inputs:
            tokens = tokenize(line, self.level)
            if self.level == "word" and tokens and tokens[-1] == EOS:
                tokens = tokens[:-1]  # a prompt continues its own line
            ids = self.vocab.encode(tokens)
            if mode == "generate":
                out, _ = generate(model, [end_id] + ids, options.max_tokens, options.temperature, options.top_k,
                                  generator, stop_id=end_id)
                words = self.vocab.decode([i for i in out if i != end_id], skip_specials=False)
                results.append(("" if self.level == "char" else " ").join(words))
            else:
                ids = ids + [end_id] if self.level == "word" else ids
                logprob = log_probability(model, end_id, ids)
                results.append({"text": line, "tokens": len(ids), "logprob": logprob,
                                **self._rates(logprob, len(ids))})
            progress(1)
        return results

    def _rates(self, logprob: float, n: int) -> Dict[str, float]:
        return ({"bpc": -logprob / max(n, 1) / math.log(2)} if self.level == "char"
                else {"ppl": perplexity(logprob, n)})

    def format_prediction(self, result: Any) -> str:
        """generate: the continuation; score: log-probability, tokens, rate and the line, tab-separated."""
        if isinstance(result, BadInput):
            return ""
        if isinstance(result, str):
            return result
        rate = f"bpc {result['bpc']:.4f}" if "bpc" in result else f"ppl {result['ppl']:.2f}"
        return f"logprob {result['logprob']:.4f}\ttokens {result['tokens']}\t{rate}\t{result['text']}"

    def format_output(self, lines: List[str], results: List[Any], document: Optional[List[Any]] = None) -> str:
        """score: a last line, the TOTAL of every line scored."""
        scored = [r for r in results if isinstance(r, dict)]
        if scored:
            logprob, n = sum(r["logprob"] for r in scored), sum(r["tokens"] for r in scored)
            lines = [*lines, self.format_prediction({"text": f"TOTAL ({len(scored)} lines)", "tokens": n,
                                                     "logprob": logprob, **self._rates(logprob, n)})]
        return super().format_output(lines, results, document)
