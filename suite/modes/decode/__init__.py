"""mode=decode: per-token latency and state size of each method's recurrent form
(suite/modes/decode/job.py)."""

from suite.metrics import Metric
from suite.modes import Mode, Section

# Per (batch size, context length) point of the sweep.
POINT_METRICS = (
    Metric("batch_size", "batch", "count", None),
    Metric("context_length", "context", "count", None),
    Metric("prefill_s", "prefill", "s", "lower"),
    Metric("prefill_tokens_per_s", "prefill tok/s", "tokens/s", "higher"),
    Metric("decode_latency_median_s", "median/token", "s", "lower"),
    Metric("decode_latency_p99_s", "p99/token", "s", "lower"),
    Metric("decode_tokens_per_s", "decode tok/s", "tokens/s", "higher"),
    Metric("state_bytes", "state", "bytes", "lower"),
    Metric("live_states", "live states", "count", None),
)
# Per batch size: the shortest context from which on the method beats the reference.
CROSSOVER_METRICS = (
    Metric("latency_crossover_context", "faster per token from context", "count", "lower"),
    Metric("memory_crossover_context", "smaller state from context", "count", "lower"),
)

MODE = Mode(name="decode", order=3, job="suite.modes.decode.job",
            metrics={"points": POINT_METRICS, "crossovers": CROSSOVER_METRICS},
            section=Section("Decoding: latency and state memory against context", "sweep", "context length"))
