"""The harness: entry point, backbones, train/eval loop, result records, environment capture."""
