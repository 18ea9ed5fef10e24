"""Draw docs/pathfinder_examples.png: generated Pathfinder (top, 32x32) and Path-X (bottom, 128x128)
examples, positive (left: the two circles lie on one path) and negative (right).

Run from the repository root: ``python scripts/pathfinder_examples.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from tasks.lra.pathfinder import make_example

PANEL = 256  # pixels per panel side; images are enlarged by whole factors, nearest neighbour
GAP = 8


def panel(resolution: int, label: int, seed: int) -> np.ndarray:
    """One generated image of that label, enlarged to PANEL x PANEL."""
    image = make_example(resolution, label, np.random.default_rng([seed, label])).image
    scale = PANEL // resolution
    return np.kron(image, np.ones((scale, scale), dtype=np.uint8))


def main(out: Path = Path("docs/pathfinder_examples.png"), seed: int = 0) -> None:
    """Write the 2x2 sheet of examples to ``out``."""
    sheet = np.full((2 * PANEL + 3 * GAP, 2 * PANEL + 3 * GAP), 96, dtype=np.uint8)
    for row, resolution in enumerate((32, 128)):
        for column, label in enumerate((1, 0)):
            y, x = GAP + row * (PANEL + GAP), GAP + column * (PANEL + GAP)
            sheet[y : y + PANEL, x : x + PANEL] = panel(resolution, label, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(sheet).save(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
