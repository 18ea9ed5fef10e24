"""Fitting a method to exact softmax attention on captured q, k: attention distillation, the step
that Hedgehog (Zhang et al. 2024) trains its feature map with.

For a method that declares parameters to fit (``AttentionMethod.attention_fit_parameters``), the
captured source's query positions are split in two at random (``split_queries``): on one half the
parameters minimise the cross-entropy between softmax's attention row of each query and the
method's weights normalised over the same keys (every key of the source, or those up to the query
where the mode is causal), by Adam on a few queries drawn per step; the other half is where both the fitted map and
the map as built are measured. The cross-entropy's floor is the entropy of softmax's rows, so the
record keeps that too (cross-entropy minus entropy is the KL divergence of the rows).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from suite.modes.fidelity.measure import own_log_weights, scores

# Queries scored at once when a cross-entropy is only evaluated: bounds the (B, H, Q, N) rows held.
EVAL_QUERIES = 256


def split_queries(length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(fitting positions, held-out positions) of a source's ``length`` queries: a seeded random
    half each (the held-out one gets the odd position), sorted."""
    order = torch.randperm(length, generator=torch.Generator().manual_seed(seed))
    half = length // 2
    return order[:half].sort().values, order[half:].sort().values


def cross_entropy_terms(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor,
                        positions: torch.Tensor, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query at ``positions`` (of every sequence and head), against all keys of k (B,H,N,D), or
    those up to the query (causal): (-sum_j p_ij log w^_ij, -sum_j p_ij log p_ij), p softmax's
    attention row in float64 and w^ the method's weights (``log_weights``) normalised over the
    keys; both (B,H,Q)."""
    positions = positions.to(q.device)
    target = torch.softmax(scores(q[..., positions, :], k, positions if causal else None), -1)
    log_weights = torch.log_softmax(own_log_weights(module, q[..., positions, :], k, positions, causal), -1)
    # A zero target contributes nothing, even where the method's weight is 0 (0 * -inf).
    present = target > 0
    cross = -torch.where(present, target * log_weights, torch.zeros_like(target)).sum(-1)
    entropy = -torch.where(present, target * target.log(), torch.zeros_like(target)).sum(-1)
    return cross, entropy


@torch.no_grad()
def mean_cross_entropy(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor,
                       positions: torch.Tensor, causal: bool = False) -> tuple[float, float]:
    """(mean cross-entropy, mean softmax entropy) over the queries at ``positions``."""
    cross, entropy = [], []
    for start in range(0, len(positions), EVAL_QUERIES):
        c, e = cross_entropy_terms(module, q, k, positions[start : start + EVAL_QUERIES], causal)
        cross.append(c.flatten())
        entropy.append(e.flatten())
    return float(torch.cat(cross).mean()), float(torch.cat(entropy).mean())


def fit_to_softmax(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, fit_positions: torch.Tensor,
                   held_out: torch.Tensor, settings: Mapping, seed: int, causal: bool = False) -> dict:
    """Fit ``module``'s declared parameters in place (``settings``: steps, lr, queries per step)
    on the queries at ``fit_positions`` of q, k (B,H,N,D); the same seed draws the same queries.
    Returns what the record keeps: the settings and the cross-entropies before and after, on the
    fitting queries and on the held-out ones (beside softmax's entropy there, the floor)."""
    if len(fit_positions) == 0:
        raise ValueError("fitting to softmax needs at least one fitting query")
    parameters = module.attention_fit_parameters()
    optimizer = torch.optim.Adam(parameters, lr=settings["lr"])
    generator = torch.Generator().manual_seed(seed)
    fit_before, _ = mean_cross_entropy(module, q, k, fit_positions, causal)
    held_before, held_entropy = mean_cross_entropy(module, q, k, held_out, causal)
    with torch.enable_grad():
        for _ in range(settings["steps"]):
            drawn = torch.randperm(len(fit_positions), generator=generator)[: settings["queries"]]
            cross, _ = cross_entropy_terms(module, q, k, fit_positions[drawn.sort().values], causal)
            optimizer.zero_grad(set_to_none=True)
            cross.mean().backward()
            optimizer.step()
    fit_after, _ = mean_cross_entropy(module, q, k, fit_positions, causal)
    held_after, _ = mean_cross_entropy(module, q, k, held_out, causal)
    return {
        "steps": settings["steps"], "lr": settings["lr"], "queries_per_step": settings["queries"], "seed": seed,
        "causal": causal,
        "fit_queries": len(fit_positions), "held_out_queries": len(held_out), "keys": int(k.shape[2]),
        "fit_cross_entropy": {"initial": fit_before, "fitted": fit_after},
        "held_out_cross_entropy": {"initial": held_before, "fitted": held_after},
        "held_out_softmax_entropy": held_entropy,
    }
