"""Long Range Arena tasks."""

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "listops": "tasks.lra.listops:load",
    "listops_short": "tasks.lra.listops:load",  # the same generator, shorter expressions (CPU board)
    "text": "tasks.lra.text:load",
    "retrieval": "tasks.lra.retrieval:load",
    "image": "tasks.lra.image:load",
    "pathfinder": "tasks.lra.pathfinder:load",
    "pathx": "tasks.lra.pathfinder:load",
}
