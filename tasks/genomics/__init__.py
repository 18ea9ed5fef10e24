"""Genomics tasks: a generated long-range DNA task, Genomic Benchmarks and the Nucleotide
Transformer downstream tasks."""

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "genomics": "tasks.genomics.synthetic:load",
    "genomic_benchmarks": "tasks.genomics.benchmarks:load_genomic_benchmarks",
    "nucleotide_transformer": "tasks.genomics.benchmarks:load_nucleotide_transformer",
}
