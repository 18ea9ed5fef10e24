"""What mode=train reads of the config: the blocks of training (suite/config.py), and its own block."""

from pydantic import with_config
from typing_extensions import TypedDict

from suite.config import CLOSED, Training


@with_config(CLOSED)
class TrainMode(TypedDict):
    name: str


class Run(Training):
    mode: TrainMode
