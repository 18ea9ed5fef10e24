"""Real datasets without network access: a local Arrow folder, else the Hugging Face cache offline."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import datasets
from huggingface_hub import constants as hub_constants

from tasks.base import TaskError
from tasks.cache import files_fingerprint


@contextmanager
def _offline() -> Iterator[None]:
    """Offline mode for this call only; both libraries read their flag once, at import."""
    saved = datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


def _in_hub_cache(dataset_id: str) -> bool:
    """Whether the Hub or datasets cache holds anything for ``dataset_id`` (checked without network)."""
    hub_dir = Path(hub_constants.HF_HUB_CACHE) / ("datasets--" + dataset_id.replace("/", "--"))
    processed_dir = Path(datasets.config.HF_DATASETS_CACHE) / dataset_id.replace("/", "___")
    return hub_dir.is_dir() or processed_dir.is_dir()


def local_or_hub(task: str, local_dir: Path, hub_ids: Sequence[str],
                 splits: Sequence[str]) -> tuple[datasets.DatasetDict, str]:
    """The splits of a real dataset and a tag naming where they came from.

    Tries ``local_dir`` (a ``DatasetDict.save_to_disk`` folder), then each Hub id in the local
    Hugging Face cache with network access off. Absent everywhere: one TaskError that lists what
    was tried and how to provide the data.
    """
    tried = []
    if local_dir.is_dir():
        loaded = datasets.load_from_disk(str(local_dir))
        if not isinstance(loaded, datasets.DatasetDict) or not set(splits) <= set(loaded):
            raise TaskError(f"{task}: {local_dir} must be a DatasetDict with splits {list(splits)}, found {loaded}")
        files = sorted(path for path in local_dir.rglob("*") if path.is_file())
        return loaded, f"local-{local_dir.name}-{files_fingerprint(files)}"
    tried.append(f"{local_dir} (absent)")
    for dataset_id in hub_ids:
        if not _in_hub_cache(dataset_id):
            tried.append(f"Hub '{dataset_id}' (not in the local cache {hub_constants.HF_HUB_CACHE})")
            continue
        try:
            with _offline():
                loaded = datasets.load_dataset(dataset_id)
        except Exception as exc:  # the datasets library raises many kinds here; report them all alike
            tried.append(f"Hub '{dataset_id}' (cache unreadable offline: {type(exc).__name__}: {exc})")
            continue
        return loaded, "hub-" + dataset_id.replace("/", "_")
    raise TaskError(
        f"{task}: no data found; tried {'; '.join(tried)}. Provide it with, on a machine with network: "
        f"python -c \"import datasets; datasets.load_dataset('{hub_ids[0]}').save_to_disk('{local_dir.name}')\" "
        f"and copy that folder to {local_dir} (or fill the Hugging Face cache the same way)"
    )
