"""mode=decode: per-token latency and state size of each method's recurrent form
(suite/modes/decode/job.py)."""

from suite.metrics import metric_table
from suite.modes.declare import Mode, Section

# Per (batch size, context length) point of the sweep.
POINT_METRICS = metric_table("""
    batch_size              | batch         | count    |
    context_length          | context       | count    |
    prefill_s               | prefill       | s        | lower
    prefill_tokens_per_s    | prefill tok/s | tokens/s | higher
    decode_latency_median_s | median/token  | s        | lower
    decode_latency_p99_s    | p99/token     | s        | lower
    decode_tokens_per_s     | decode tok/s  | tokens/s | higher
    state_bytes             | state         | bytes    | lower
    live_states             | live states   | count    |
""")
# Per batch size: the shortest context from which on the method beats the reference.
CROSSOVER_METRICS = metric_table("""
    latency_crossover_context | faster per token from context | count | lower
    memory_crossover_context  | smaller state from context    | count | lower
""")

MODE = Mode(name="decode", order=3, package=__name__,
            metrics={"points": POINT_METRICS, "crossovers": CROSSOVER_METRICS},
            section=Section("Decoding: latency and state memory against context", "sweep", "context length"),
            needs=frozenset({"recurrent"}))
