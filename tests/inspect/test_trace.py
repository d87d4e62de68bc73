"""Module paths of the running call: right after children are swapped, copied or shared."""

import copy

import numpy as np

import shapeflow as sf
from shapeflow import nn
from shapeflow.inspect import trace


class Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 4)

    def forward(self, x):
        return self.b(self.a(x))


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Two()

    def forward(self, x):
        return self.inner.b(self.inner.a(x))  # grandchildren called directly


def called():
    return trace.last_called


def test_paths_follow_swapped_and_replaced_children():
    m, x = Two(), sf.ones(2, 3)
    m(x)
    assert called() == {"", "a", "b"}
    m.b = nn.Linear(3, 3)
    m.a, m.b = m.b, m.a  # the same objects under each other's names
    m(x)
    assert called() == {"", "a", "b"}
    del m.b
    m.c = nn.Linear(3, 3)
    m.forward = lambda x: m.c(m.a(x))
    m(x)
    assert called() == {"", "a", "c"}


def test_paths_of_a_copy_and_of_grandchildren():
    m = copy.deepcopy(Two())
    m(sf.ones(2, 3))
    assert called() == {"", "a", "b"}
    Outer()(sf.ones(2, 3))
    assert called() == {"", "inner.a", "inner.b"}


def test_error_names_the_failing_child_after_a_swap():
    m = Two()
    m(sf.ones(2, 3))
    m.a, m.b = m.b, m.a  # now a is 3->4 and b expects 3
    try:
        m(sf.tensor(np.ones((2, 3), np.float32)))
    except sf.ShapeError as err:
        assert err.module_path == "b"
    else:
        raise AssertionError("expected a ShapeError")


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])

    def forward(self, x):
        for block in self.blocks:  # grandchildren, called by the root
            x = block(x)
        return x


def test_module_list_blocks_keep_their_paths_after_a_swap():
    m, x = Stack(), sf.ones(2, 3)
    m(x)
    assert called() == {"", "blocks.0", "blocks.1"}
    m.blocks[0] = nn.Linear(3, 4)  # replaced: the cached path of the old block is stale
    try:
        m(x)
    except sf.ShapeError as err:
        assert err.module_path == "blocks.1"
    else:
        raise AssertionError("expected a ShapeError")
    m.blocks = nn.ModuleList([nn.Linear(3, 3)])
    m(x)
    assert called() == {"", "blocks.0"}
