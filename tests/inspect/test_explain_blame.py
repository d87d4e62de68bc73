"""explain_no_grad says where the detach that cut a parameter off happened: inside a module's
forward (named by its path) or in the user's code outside any module."""

import shapeflow as sf
from shapeflow import nn


class _Detach(nn.Module):
    def forward(self, x):
        return x.detach()


class _Top(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        return self.b(self.a(x).detach())


def _blame(report, names):
    """The cause line under the line that lists `names`."""
    lines = report.splitlines()
    return lines[lines.index("  " + names) + 1]


def test_a_detach_after_the_forward_is_blamed_on_the_users_code():
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    loss = model(sf.randn(3, 4)).detach().sum() + model[1].weight.sum()
    cause = _blame(sf.explain_no_grad(loss, model), "0.weight, 0.bias")
    assert "detach()" in cause and "outside any module" in cause
    assert "the model's forward" not in cause


def test_a_detach_between_two_module_calls_in_the_users_code():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    h = model[0](sf.randn(3, 4)).detach()  # the user's code, between the modules
    loss = model[2](model[1](h)).sum()
    cause = _blame(sf.explain_no_grad(loss, model), "0.weight, 0.bias")
    assert "detach()" in cause and "outside any module" in cause and "unused" not in cause


def test_a_generators_output_detached_before_the_discriminator():
    gen, disc = nn.Linear(4, 8), nn.Linear(8, 1)
    loss = disc(gen(sf.randn(3, 4)).detach()).sum()
    cause = _blame(sf.explain_no_grad(loss, gen), "weight, bias")
    assert "detach()" in cause and "outside any module" in cause


def test_a_detach_inside_a_submodule_names_its_path():
    model = nn.Sequential(nn.Linear(4, 8), _Detach(), nn.Linear(8, 2))
    cause = _blame(sf.explain_no_grad(model(sf.randn(3, 4)).sum(), model), "0.weight, 0.bias")
    assert "detach()" in cause and "in 1 (_Detach)" in cause


def test_a_detach_in_the_models_own_forward_names_the_model():
    model = _Top()
    cause = _blame(sf.explain_no_grad(model(sf.randn(3, 4)).sum(), model), "a.weight, a.bias")
    assert "detach()" in cause and "_Top's own forward" in cause
    assert "outside any module" not in cause

