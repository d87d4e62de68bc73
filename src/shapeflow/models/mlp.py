"""A multilayer perceptron."""

from __future__ import annotations

from .. import nn


class MLP(nn.Module):
    """Linear -> ReLU -> ... -> Linear. `hidden` is one width or a list of widths."""

    def __init__(self, in_features: int, hidden, out_features: int, activation=nn.ReLU,
                 dropout: float = 0.0) -> None:
        super().__init__()
        widths = [hidden] if isinstance(hidden, int) else list(hidden)
        layers: list[nn.Module] = []
        prev = in_features
        for w in widths:
            layers += [nn.Linear(prev, w), activation()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            prev = w
        layers.append(nn.Linear(prev, out_features))
        self.net = nn.Sequential(*layers)
        self.in_features = in_features

    def forward(self, x):
        if x.ndim > 2:
            x = x.flatten(1)
        return self.net(x)
