"""Where a trained recall model's attention looks: why a method fails MQAR, measured.

Trains one run through the suite's own command (any overrides of ``python -m suite``), then reads
the attention layer of the trained model (the weights of its best validation step) on the first
``--sequences`` test sequences. For each scored query it takes the normalised kernel weights
``phi(q_i).phi(k_j) / sum_j phi(q_i).phi(k_j)`` (softmax's own weights for a stateless method)
and asks:

- ``top_on_pair``: the share of queries whose heaviest weight sits on the bound pair (the key's
  slot or its value's slot, where the short convolution has put the key beside the value);
- ``weight_on_pair``: the mean weight on those two slots (uniform weight over the context would
  give about 2 / (query position));
- accuracy when the heaviest weight is on the pair and when it is not;
- for a feature map, how alike the features of one sequence's value slots are: for each slot the
  cosine of its phi(k) with the most similar other value slot of its sequence (``nearest_cosine``,
  the mean) and the share of slots where it passes 0.95 (``alike_slots``). Two slots whose phi(k)
  point the same way get the same weight, up to a scale, from every query: no query can pick
  one of them out, whatever the rest of the model does.

    python scripts/recall_probe.py --out probe.json --label hedgehog -- \\
        method=hedgehog point=cpu_mqar_64x16 budget.lr=1e-3 seed=0 cpu_threads=1 results_dir=/tmp/probe

The run's record goes to the ``results_dir`` given (never the board's: pass a scratch folder).
The trained model is taken from the suite's training loop (``suite.training.train``, wrapped for
this process), so the model measured is the one the command trained, by the same code path.
Not a test dependency.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from methods.base import AttentionMethod  # noqa: E402
from suite import training  # noqa: E402
from suite.data import IGNORE_LABEL, collate  # noqa: E402

ALIKE = 0.95  # phi(k) of two value slots this close in direction: no query tells them apart


def kernel_weights(method: AttentionMethod, q: torch.Tensor, k: torch.Tensor):
    """Causal normalised weights (B, N, N) of head 0, from the method's own ``log_weights`` (what
    the fidelity mode compares with softmax), and phi(k) (B, N, F), or None without a feature map."""
    q, k = q[:, :1].float(), k[:, :1].float()
    log_weights = method.log_weights(q, k)[:, 0]  # every key for every query: masked here
    later_keys = torch.ones(log_weights.shape[-2:], dtype=torch.bool).triu(1)
    weights = torch.softmax(log_weights.masked_fill(later_keys, -torch.inf), -1).float()
    phi_k = method.feature_map(k, "key")[:, 0] if hasattr(method, "feature_map") else None
    return weights, phi_k


def nearest_cosine(features: torch.Tensor) -> torch.Tensor:
    """For features (B, S, F) of S slots per sequence: each slot's cosine with the most similar
    other slot of its sequence, (B, S)."""
    unit = torch.nn.functional.normalize(features.float(), dim=-1)
    cosine = unit @ unit.transpose(-1, -2)
    cosine.diagonal(dim1=-2, dim2=-1).fill_(-2.0)  # a slot is not its own look-alike
    return cosine.amax(-1)


def probe(model: torch.nn.Module, data, num_pairs: int, sequences: int) -> dict:
    """The measures of the module docstring on the first ``sequences`` test sequences."""
    model.eval()
    method = next(m for m in model.modules() if isinstance(m, AttentionMethod))
    grabbed = {}
    hook = method.register_forward_pre_hook(lambda mod, args: grabbed.update(q=args[0], k=args[1]))
    batch = collate([data.test[i] for i in range(min(sequences, len(data.test)))])
    inputs, labels = batch["input_ids"], batch["label"]
    with torch.no_grad():
        predictions = model.head(model.trunk(inputs, causal=True)).argmax(-1)
        weights, phi_k = kernel_weights(method, grabbed["q"], grabbed["k"])
    hook.remove()
    counts = {"queries": 0, "correct": 0, "top_on_pair": 0, "weight_on_pair": 0.0,
              "correct_when_top": 0, "correct_when_not": 0}
    for b, i in (labels != IGNORE_LABEL).nonzero().tolist():
        key_slots = [j for j in range(0, 2 * num_pairs, 2) if inputs[b, j] == inputs[b, i]]
        if not key_slots:
            continue
        j, row = key_slots[0], weights[b, i]
        on_pair = int(row.argmax()) in (j, j + 1)
        correct = bool(predictions[b, i] == labels[b, i])
        counts["queries"] += 1
        counts["correct"] += correct
        counts["top_on_pair"] += on_pair
        counts["weight_on_pair"] += float(row[j] + row[j + 1])
        counts["correct_when_top" if on_pair else "correct_when_not"] += correct
    n, top = counts["queries"], counts["top_on_pair"]
    result = {"queries": n, "accuracy": counts["correct"] / n, "top_on_pair": top / n,
              "weight_on_pair": counts["weight_on_pair"] / n,
              "accuracy_when_top_on_pair": counts["correct_when_top"] / top if top else None,
              "accuracy_when_not": counts["correct_when_not"] / (n - top) if n > top else None}
    if phi_k is not None:
        nearest = nearest_cosine(phi_k[:, 1:2 * num_pairs:2])  # the value slots
        result.update(features=phi_k.shape[-1], pairs=num_pairs, nearest_cosine=float(nearest.mean()),
                      alike_slots=float((nearest > ALIKE).float().mean()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file; the run's row is added under --label")
    parser.add_argument("--label", required=True)
    parser.add_argument("--sequences", type=int, default=500, help="test sequences probed (default 500)")
    parser.add_argument("overrides", nargs="+", help="the suite's overrides (after --)")
    args = parser.parse_args()

    measured = {}
    train = training.train

    def train_and_probe(config, data, device, config_hash):
        outcome, model = train(config, data, device, config_hash)
        measured.update(probe(model, data, config["task"]["num_kv_pairs"], args.sequences),
                        overrides=args.overrides, test_accuracy=outcome.metrics.get("test_accuracy"))
        return outcome, model

    training.train = train_and_probe
    sys.argv = ["suite", *args.overrides]
    try:
        runpy.run_module("suite", run_name="__main__")
    except SystemExit as exit:
        if exit.code:
            raise
    if not measured:
        raise SystemExit("recall_probe: no run trained (an ok record of this config already exists in "
                         "results_dir? pass a fresh scratch folder)")
    rows = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows[args.label] = measured
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(json.dumps(measured, indent=1))


if __name__ == "__main__":
    main()
