"""What draws the figures: vl-convert (it ships Vega, Vega-Lite and vega-embed, and runs them
without a browser or a network) renders each figure's spec to SVG at build time, the static
figure a page shows without JavaScript, and bundles the same libraries into one script that the
pages load from the build's assets to draw the figures live."""

from __future__ import annotations

from functools import cache

import altair
import vl_convert

# The Vega-Lite version the specs are written for (Altair's), rendered and bundled alike.
VEGA_LITE = ".".join(altair.SCHEMA_VERSION.lstrip("v").split(".")[:2])
BUNDLE = "vega-embed.js"  # under assets/: vega, vega-lite and vega-embed as one script


def static_svg(spec: dict) -> str:
    """The figure as an SVG document, as the browser would draw it before any interaction."""
    return vl_convert.vegalite_to_svg(spec, vl_version=VEGA_LITE)


@cache
def javascript_bundle() -> str:
    """vega-embed with Vega and Vega-Lite, as one script that sets ``window.vegaEmbed`` (built
    once per process: bundling takes a few seconds)."""
    header = (f"// vega-embed {vl_convert.get_vega_embed_version()}, Vega {vl_convert.get_vega_version()}, "
              f"Vega-Lite {VEGA_LITE}: bundled by vl-convert-python {vl_convert.__version__}\n")
    return header + vl_convert.javascript_bundle(vl_version=VEGA_LITE)
