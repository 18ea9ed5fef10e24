"""Synthetic recall tasks: Zoology's multi-query associative recall and Mamba's selective copying."""

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "mqar": "tasks.recall.mqar:load",
    "selective_copying": "tasks.recall.selective_copying:load",
}
