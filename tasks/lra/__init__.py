"""Long Range Arena tasks."""

# name -> "module:function" of the loader; merged into ``tasks.LOADERS``.
LOADERS = {
    "listops": "tasks.lra.listops:load",
}
