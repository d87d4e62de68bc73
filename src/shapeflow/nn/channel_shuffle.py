"""ChannelShuffle: the channels of [N, C, *] regrouped as groups x (C / groups), transposed."""

from __future__ import annotations

from . import functional as F
from .module import Module


class ChannelShuffle(Module):
    """ShuffleNet's channel shuffle: channel g * (C / groups) + i moves to i * groups + g."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
