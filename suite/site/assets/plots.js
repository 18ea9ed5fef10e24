// Draws each figure live with vega-embed (assets/vega-embed.js, bundled at build time) in place of
// its static SVG: hover a point for its values, click a legend entry to show that series alone,
// and on the scaling plots zoom with the wheel and pan with a drag. The spec is the page's own
// (a <script type="application/json"> beside the figure); nothing is fetched.
"use strict";

const EMBED_OPTIONS = {
  mode: "vega-lite",
  renderer: "svg",
  // Export (SVG, PNG) works offline; the source and editor links would leave the page.
  actions: {export: true, source: false, compiled: false, editor: false},
};

document.querySelectorAll(".chart[data-spec]").forEach(holder => {
  const spec = JSON.parse(document.getElementById(holder.dataset.spec).textContent);
  const still = holder.innerHTML;  // the static figure, kept if drawing fails
  vegaEmbed(holder, spec, EMBED_OPTIONS)
    .then(() => holder.classList.add("live"))
    .catch(error => {
      holder.innerHTML = still;
      console.error(`figure ${holder.dataset.spec} could not be drawn live: ${error}`);
    });
});
