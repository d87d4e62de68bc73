"""The catalogue of bad inputs: each case is one mistake, written once for PyTorch and shapeflow.

A case is code run with `m` bound to torch or shapeflow (and F, nn, optim, data to their
functional, module, optimizer and data packages); statements are separated by newlines and
the last line is the value. `python -m tests.reliability.bad_inputs` prints the counts.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np

# ---- the cases ------------------------------------------------------------------------

FACTORIES = [
    "m.zeros(-1)",
    "m.ones(2, -3)",
    "m.empty(-5)",
    "m.full((-1,), 0.0)",
    "m.randn(2, -1)",
    "m.rand(-2)",
    "m.eye(-1)",
    "m.eye(3, -2)",
    "m.arange(0, 10, 0)",
    "m.arange(10, 0, 1)",
    "m.arange(0, float('inf'))",
    "m.arange(0, float('nan'))",
    "m.linspace(0, 1, -1)",
    "m.randint(5, 2, (3,))",
    "m.randint(0, 5, (-1,))",
    "m.tensor([[1, 2], [3]])",
    "m.tensor([[1, 2], 3])",
    "m.tensor([[[1.0], [2.0]], [[3.0]]])",
    "m.tensor('abc')",
    "m.tensor([1, 'a'])",
    "m.tensor(None)",
    "m.tensor([1.0, None])",
    "m.tensor(np.array(['a', 'b']))",
    "m.tensor({'a': 1})",
    "m.zeros_like(3)",
    "m.full((2,), 'a')",
    "m.tensor(np.float64(1.5))",
    "m.tensor(np.int32(3))",
    "m.tensor(np.float32(2.5))",
    "m.tensor(np.int16(-4))",
    "m.tensor(np.bool_(True))",
    "m.tensor([np.float64(1.5), np.float64(2.5)])",
    "m.tensor([])",
    "m.zeros(0, 3).sum(0)",
]

ELEMENTWISE = [
    "m.ones(2, 3) + m.ones(4)",
    "m.ones(2, 3) * m.ones(3, 2)",
    "m.ones(2, 3) - m.ones(2, 2)",
    "m.ones(2, 3) / m.ones(2, 1, 4)",
    "m.tensor([1, 2]) ** -1",
    "m.tensor([1, 2]).pow(-2)",
    "m.tensor([True]) - m.tensor([True])",
    "-m.tensor([True, False])",
    "m.ones(3).add_(m.ones(2, 3))",
    "m.ones(3, dtype=m.int64).add_(m.ones(3) * 1.5)",
    "m.ones(3, requires_grad=True).add_(1)",
    "m.clamp(m.ones(2))",
    "m.where(m.ones(2), m.ones(2), m.zeros(2))",
    "m.where(m.ones(2, dtype=m.bool), m.ones(3), m.zeros(2))",
    "m.ones(2).masked_fill(m.ones(2), 0.0)",
    "m.ones(2, 3).masked_fill(m.ones(3, 2, dtype=m.bool), 0.0)",
    "m.ones(2).masked_fill(m.ones(2, dtype=m.bool), m.ones(2))",
    "m.maximum(m.ones(2), m.ones(3))",
    "m.minimum(m.ones(2, 3), m.ones(2, 2))",
    "m.ones(2) + 'a'",
    "m.ones(2) + None",
    "m.ones(2) == m.ones(3)",
    "m.ones(2) < m.ones(3)",
    "m.ones(2, 3).mul_(m.ones(4, 2, 3))",
    "m.ones(2).copy_(m.ones(3))",
    "m.exp(m.tensor([1, 2]))",
    "m.sqrt(m.tensor([-1.0, 4.0]))",
    "m.log(m.tensor([0.0, -1.0, 1.0]))",
    "m.tensor([1.0, -1.0, 0.0]) / 0",
    "m.tensor([1, 2]) / m.tensor([2, 2])",
    "m.tensor([1.0]).pow(m.tensor([2, 3]))",
    "m.ones(2, dtype=m.bool) + m.ones(2)",
    "m.ones(2, 3).clamp(min=2.0, max=1.0)",
    "m.tensor([float('nan'), 1.0]).clamp(0.0, 0.5)",
    "m.tensor([float('inf'), float('-inf')]) * 0",
    "m.tensor([3.0, -3.0]).sign() * m.tensor([float('nan'), 0.0])",
]

REDUCTIONS = [
    "m.ones(2, 3).sum(2)",
    "m.ones(2, 3).sum(-3)",
    "m.ones(2, 3).sum((0, 0))",
    "m.ones(2, 3).mean(5)",
    "m.tensor([1, 2]).mean()",
    "m.ones(0).max()",
    "m.ones(0).min()",
    "m.ones(0, 3).max(0)",
    "m.ones(0).argmax()",
    "m.ones(0, 3).amax(0)",
    "m.ones(2, 3).std(5)",
    "m.ones(2, 3).var(dim=(0, 5))",
    "m.ones(2, 3).cumsum(2)",
    "m.ones(2, 3).argmax(3)",
    "m.ones(2, 3).logsumexp(4)",
    "m.ones(2, 3).all(4)",
    "m.ones(2, 3).prod(2)",
    "m.ones(2, 3).norm(dim=5)",
    "m.ones(0).sum()",
    "m.ones(0).mean()",
    "m.ones(0).prod()",
    "m.ones(0, 3).max(1).values",
    "m.ones(1).std()",
    "m.tensor([1.0, float('nan')]).max()",
    "m.tensor([float('inf'), float('-inf')]).sum()",
    "m.tensor([float('-inf'), float('-inf')]).logsumexp(0)",
    "m.tensor([float('inf'), 1.0]).logsumexp(0)",
]

MOVEMENT = [
    "m.arange(12).reshape(3, 4).transpose(0, 1).view(12)",
    "m.arange(6).reshape(2, 3).transpose(0, 1).view(6)",
    "m.arange(6).reshape(2, 3)[:, ::2].reshape(2, 2).view(4)",
    "m.arange(6).reshape(2, 3)[:, 1:].view(4)",
    "m.ones(2, 1, 3).expand(2, 4, 3).view(24)",
    "m.ones(2, 1, 3).expand(2, 4, 3).view(8, 3)",
    "m.arange(24).reshape(2, 3, 4).permute(2, 0, 1).view(4, 6)",
    "m.arange(12).reshape(5, 3)",
    "m.arange(12).reshape(-1, -1)",
    "m.arange(12).reshape(-1, 5)",
    "m.arange(12).view(5, -1)",
    "m.arange(12).view(-2, 6)",
    "m.arange(6).reshape(2, 3).permute(0, 0)",
    "m.arange(6).reshape(2, 3).permute(0)",
    "m.arange(6).reshape(2, 3).permute(0, 2)",
    "m.arange(6).reshape(2, 3).transpose(0, 2)",
    "m.arange(6).reshape(2, 3).squeeze(3)",
    "m.arange(6).reshape(2, 3).unsqueeze(4)",
    "m.arange(6).reshape(2, 3).flatten(1, 0)",
    "m.arange(6).reshape(2, 3).expand(3, 3)",
    "m.arange(6).reshape(2, 3).expand(2)",
    "m.arange(6).reshape(2, 3).expand(-1, 3, 3)",
    "m.arange(6).reshape(2, 3).repeat(2)",
    "m.cat([m.ones(2, 3), m.ones(2, 4)])",
    "m.cat([m.ones(2, 3), m.ones(2, 3)], dim=2)",
    "m.cat([])",
    "m.cat([m.ones(2), m.ones(2, 2)])",
    "m.stack([m.ones(2), m.ones(3)])",
    "m.stack([])",
    "m.stack([m.ones(2), m.ones(2)], dim=3)",
    "m.ones(6).split(0)",
    "m.ones(6).chunk(0)",
    "m.ones(3, 2).split([1, 1], 0)",
    "m.ones(6).narrow(0, 4, 3)",
    "m.ones(2, 3).unflatten(1, (2, 2))",
    "m.ones(2, 3).movedim(0, 5)",
    "m.ones(2, 3).flip(2)",
    "m.arange(6).reshape(2, 3).transpose(0, 1).view(3, 2)",
    "m.arange(6).reshape(2, 3).transpose(0, 1).reshape(6)",
    "m.arange(6).reshape(2, 3)[:, 1:].reshape(4)",
    "m.arange(6).reshape(2, 3)[1:].view(3)",
    "m.ones(2, 1, 3).expand(2, 4, 3).view(2, 4, 3, 1).shape",
    "m.arange(24).reshape(2, 3, 4).transpose(1, 2).view(2, 4, 3).shape",
    "m.arange(12).reshape(3, 4)[:, :2].view(3, 2, 1).shape",
    "m.ones(3)[1:5]",
    "m.arange(6).reshape(2, 3).permute(1, 0).contiguous().view(6)",
]

INDEXING = [
    "m.ones(3)[3]",
    "m.ones(3)[-4]",
    "m.ones(2, 3)[0, 0, 0]",
    "m.ones(2, 3)[:, 3]",
    "m.ones(3)[m.tensor([0, 3])]",
    "m.ones(3)[m.tensor([0.0])]",
    "m.ones(3)[m.tensor([True, False])]",
    "m.ones(3)['a']",
    "m.ones(3)[..., ...]",
    "m.ones(2, 3)[m.tensor([[True, False, True]])]",
    "m.ones(3).index_select(0, m.tensor([5]))",
    "m.ones(3).index_select(0, m.tensor([0.0]))",
    "m.ones(3).index_select(1, m.tensor([0]))",
    "m.ones(2, 3).gather(1, m.tensor([[3]]))",
    "m.ones(2, 3).gather(1, m.tensor([[0.0]]))",
    "m.ones(2, 3).gather(2, m.tensor([[0]]))",
    "m.zeros(3).scatter(0, m.tensor([5]), 1.0)",
    "m.zeros(3).index_add(0, m.tensor([0]), m.ones(2))",
    "x = m.ones(3)\nx[5] = 1.0\nx",
    "x = m.ones(3)\nx[m.tensor([0, 1])] = m.ones(3)\nx",
    "x = m.ones(2, 3)\nx[0] = m.ones(4)\nx",
    "x = m.ones(3)\nx[m.tensor([0, 4])] = 2.0\nx",
    "m.ones(3)[None, ..., None]",
    "m.arange(5)[m.tensor([-1, -5])]",
    "m.arange(6).reshape(2, 3)[m.tensor([[True, False, True], [False, False, True]])]",
]

LINALG = [
    "m.ones(2, 3) @ m.ones(2, 3)",
    "m.ones(3) @ m.ones(4)",
    "m.ones(2, 3).mm(m.ones(3))",
    "m.ones(2, 3, 4).bmm(m.ones(2, 5, 4))",
    "m.ones(2, 3).bmm(m.ones(3, 2))",
    "m.ones(2, 3, 4).bmm(m.ones(3, 4, 5))",
    "m.ones(2, 3) @ m.ones(3, 2, dtype=m.float64)",
    "m.ones(2, 3, dtype=m.int64) @ m.ones(3, 2)",
    "m.ones(()) @ m.ones(3)",
    "m.ones(2, 3).dot(m.ones(3))",
    "m.ones(3).dot(m.ones(4))",
    "m.ones(3).outer(m.ones(2, 2))",
    "m.matmul(m.ones(2, 3), m.ones(3, 2, 1))",
    "m.einsum('ij,jk->ik', m.ones(2, 3), m.ones(4, 5))",
    "m.einsum('ij->ijk', m.ones(2, 3))",
    "m.einsum('ij,jk', m.ones(2, 3))",
    "m.einsum('ijk', m.ones(2, 3))",
    "m.ones(4) @ m.ones(4)",
    "m.ones(2, 0) @ m.ones(0, 3)",
    "m.ones(5, 2, 3) @ m.ones(3)",
]

FUNCTIONAL = [
    "F.linear(m.ones(2, 3), m.ones(4, 5))",
    "F.linear(m.ones(2, 3), m.ones(4, 3), m.ones(5))",
    "F.conv2d(m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), stride=0)",
    "F.conv2d(m.ones(1, 2, 4, 4), m.ones(1, 1, 3, 3))",
    "F.conv2d(m.ones(1, 1, 2, 2), m.ones(1, 1, 3, 3))",
    "F.conv2d(m.ones(4, 4), m.ones(1, 1, 3, 3))",
    "F.conv2d(m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), padding=-1)",
    "F.conv2d(m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), dilation=0)",
    "F.conv2d(m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), groups=2)",
    "F.conv2d(m.ones(1, 1, 4, 4), m.ones(2, 1, 3, 3), m.ones(3))",
    "F.conv2d(m.ones(1, 4, 4), m.ones(1, 1, 3, 3))",
    "F.max_pool2d(m.ones(1, 1, 4, 4), 0)",
    "F.max_pool2d(m.ones(1, 1, 2, 2), 3)",
    "F.max_pool2d(m.ones(1, 1, 4, 4), 2, padding=2)",
    "F.avg_pool2d(m.ones(1, 1, 2, 2), 3)",
    "F.avg_pool2d(m.ones(1, 1, 4, 4), 2, stride=0)",
    "F.softmax(m.ones(2, 3), 2)",
    "F.log_softmax(m.ones(2, 3), -3)",
    "F.softmax(m.tensor([1, 2]), 0)",
    "F.softmax(m.tensor([[float('inf'), float('-inf'), 1.0]]), -1)",
    "F.log_softmax(m.tensor([[float('inf'), float('-inf'), 1.0]]), -1)",
    "F.softmax(m.tensor([[float('inf'), 1.0, 1.0]]), -1)",
    "F.softmax(m.tensor([[float('-inf'), float('-inf')]]), -1)",
    "F.log_softmax(m.tensor([[float('-inf'), 0.0]]), -1)",
    "F.softmax(m.tensor([[float('inf'), 0.0], [0.0, 1.0]]), 0)",
    "F.layer_norm(m.ones(2, 3), (4,))",
    "F.layer_norm(m.ones(2, 3), (3,), m.ones(4))",
    "F.embedding(m.tensor([5]), m.ones(3, 2))",
    "F.embedding(m.tensor([0.0]), m.ones(3, 2))",
    "F.embedding(m.tensor([-1]), m.ones(3, 2))",
    "F.dropout(m.ones(3), p=1.5)",
    "F.dropout(m.ones(3), p=-0.1)",
    "F.gelu(m.ones(2), approximate='foo')",
    "F.pad(m.ones(2, 3), (1,))",
    "F.pad(m.ones(2, 3), (1, 1, 1, 1, 1, 1))",
    "F.one_hot(m.tensor([3]), 3)",
    "F.one_hot(m.tensor([-1]))",
    "F.one_hot(m.tensor([0.0]), 3)",
    "F.scaled_dot_product_attention(m.ones(1, 2, 4), m.ones(1, 3, 5), m.ones(1, 3, 5))",
    "F.scaled_dot_product_attention(m.ones(1, 2, 4), m.ones(1, 3, 4), m.ones(1, 2, 4))",
    "F.relu(m.tensor([True]))",
    "F.gelu(m.tensor([1, 2]))",
]

MODULES = [
    "nn.Linear(3, 4)(m.ones(2, 5))",
    "nn.Linear(-1, 4)",
    "nn.Linear(3, 4)(m.ones(2, 3, dtype=m.float64))",
    "nn.Linear(3, 4)(m.tensor([[1, 2, 3]]))",
    "nn.Conv2d(3, 4, 3)(m.ones(1, 2, 5, 5))",
    "nn.Conv2d(3, 4, 3, groups=2)",
    "nn.Embedding(3, 2)(m.tensor([3]))",
    "nn.LayerNorm(4)(m.ones(2, 3))",
    "nn.Sequential(nn.Linear(2, 3), nn.Linear(4, 5))(m.ones(1, 2))",
    "nn.Dropout(p=2.0)",
    "nn.MultiheadAttention(5, 2)",
    "nn.Linear(3, 4).load_state_dict({'weight': m.ones(4, 5), 'bias': m.ones(4)})",
    "nn.Linear(3, 4).load_state_dict({'weight': m.ones(4, 3)})",
    "nn.Linear(3, 4).register_parameter('a.b', None)",
    "nn.Linear(3, 4).register_buffer('', m.ones(1))",
    "nn.Linear(3, 4).get_submodule('foo')",
    "nn.MaxPool2d(2)(m.ones(4))",
    "nn.Flatten()(m.ones(()))",
    "nn.Linear(3, 4).to('nowhere')",
    "nn.Linear(3, 4).train('yes')",
]

LOSSES = [
    "F.cross_entropy(m.ones(2, 3), m.tensor([3, 0]))",
    "F.cross_entropy(m.ones(2, 3), m.tensor([-1, 0]))",
    "F.cross_entropy(m.ones(2, 3), m.tensor([0, 1, 2]))",
    "F.cross_entropy(m.ones(2, 3), m.tensor([0.0, 1.0]))",
    "F.cross_entropy(m.ones(2, 3), m.tensor([0, 1]), reduction='foo')",
    "F.cross_entropy(m.ones(2, 3), m.tensor([0, 1]), weight=m.ones(4))",
    "F.cross_entropy(m.ones(2, 3), m.ones(2, 3) * 0.3)",
    "F.cross_entropy(m.tensor([[float('nan'), 1.0, 2.0], [0.0, 1.0, 2.0]]), m.tensor([1, 0]))",
    "F.cross_entropy(m.tensor([[float('inf'), 1.0, 2.0], [0.0, 1.0, 2.0]]), m.tensor([1, 0]))",
    "F.cross_entropy(m.tensor([[float('-inf'), 1.0, 2.0]]), m.tensor([1]))",
    "F.cross_entropy(m.tensor([[float('-inf'), 1.0, 2.0]]), m.tensor([0]))",
    "F.nll_loss(m.ones(2, 3), m.tensor([3, 0]))",
    "F.nll_loss(m.ones(2, 3), m.tensor([0, 1]), weight=m.ones(4))",
    "F.mse_loss(m.ones(2, 3), m.ones(3, 2))",
    "F.mse_loss(m.ones(2), m.ones(2), reduction='bad')",
    "F.l1_loss(m.ones(2), m.ones(3))",
    "F.binary_cross_entropy(m.tensor([1.5]), m.tensor([1.0]))",
    "F.binary_cross_entropy(m.tensor([-0.5, 0.5]), m.tensor([1.0, 0.0]))",
    "F.binary_cross_entropy(m.tensor([float('nan')]), m.tensor([1.0]))",
    "F.binary_cross_entropy(m.tensor([0.5]), m.tensor([1.0, 0.0]))",
    "F.binary_cross_entropy(m.tensor([0.0, 1.0]), m.tensor([1.0, 0.0]))",
    "F.binary_cross_entropy_with_logits(m.ones(2), m.ones(3))",
    "F.binary_cross_entropy_with_logits(m.tensor([float('inf')]), m.tensor([0.0]))",
    "nn.CrossEntropyLoss()(m.ones(2, 3), m.tensor([0, 5]))",
]

OPTIM = [
    "optim.SGD(nn.Linear(2, 2).parameters(), lr=-0.1)",
    "optim.SGD(nn.Linear(2, 2).parameters(), lr='0.1')",
    "optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, momentum=-1)",
    "optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, weight_decay=-1)",
    "optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, nesterov=True)",
    "optim.SGD([], lr=0.1)",
    "optim.SGD(m.ones(2), lr=0.1)",
    "optim.Adam(nn.Linear(2, 2).parameters(), lr='fast')",
    "optim.Adam(nn.Linear(2, 2).parameters(), betas=(1.0, 0.999))",
    "optim.Adam(nn.Linear(2, 2).parameters(), betas=(0.9, -0.1))",
    "optim.Adam(nn.Linear(2, 2).parameters(), eps=-1.0)",
    "optim.Adam(nn.Linear(2, 2).parameters(), weight_decay=-1.0)",
    "optim.AdamW(nn.Linear(2, 2).parameters(), lr=-1.0)",
    "p = nn.Parameter(m.ones(2))\noptim.SGD([{'params': [p]}, {'params': [p]}], lr=0.1)",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.zeros(5)\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.zeros(3)\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.zeros(2, 3, dtype=m.float64)\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.zeros(2, 3, device='meta')\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = 'a'\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.ones(2, 3)\np.grad",
    "p = nn.Parameter(m.zeros(2, 3))\np.grad = m.ones(2, 3)\np.grad = None\np.grad",
]

AUTOGRAD = [
    "m.ones(2).sum().backward()",
    "m.ones(2, requires_grad=True).mul(2).backward()",
    "m.tensor([1, 2], requires_grad=True)",
    "m.ones(2, requires_grad=True).numpy()",
    "m.tensor([1, 2]).requires_grad_(True)",
    "x = m.ones(2, requires_grad=True)\ny = (x * x).sum()\ny.backward()\ny.backward()",
    "x = m.ones(2, requires_grad=True)\n(x * 2).sum().backward(m.ones(2))",
    "m.ones(2).item()",
    "float(m.ones(2))",
    "int(m.ones(2))",
    "bool(m.ones(2))",
    "len(m.tensor(1.0))",
    "iter(m.tensor(1.0))",
    "m.ones(2, device='meta').item()",
    "m.ones(2, device='meta').tolist()",
    "m.ones(2, device='nowhere')",
    "m.ones(2).to('nowhere')",
]


def _data_cases() -> list[str]:
    ds = "data.TensorDataset(m.arange(6).float().reshape(3, 2), m.arange(3))"
    return [
        "data.TensorDataset(m.ones(3), m.ones(4))",
        f"data.DataLoader({ds}, batch_size=0)",
        f"data.DataLoader({ds}, batch_size=-1)",
        f"data.DataLoader({ds}, batch_size=2, shuffle=True, "
        f"sampler=data.SequentialSampler(range(3)))",
        f"data.DataLoader({ds}, num_workers=-1)",
        f"data.random_split({ds}, [2, 2])",
        f"data.random_split({ds}, [0.5, 0.6])",
        f"{ds}[5]",
        "next(iter(data.DataLoader([m.ones(2), m.ones(3)], batch_size=2)))",
        f"data.DataLoader({ds}, batch_size=2, drop_last=True).__len__()",
        f"len(data.random_split({ds}, [0.5, 0.5])[0])",
        f"data.Subset({ds}, [7])[0]",
    ]


DATA = _data_cases()

_TMP = tempfile.mkdtemp(prefix="sf-bad-inputs-")


def _file(name: str, content: bytes) -> str:
    path = os.path.join(_TMP, name)
    with open(path, "wb") as f:
        f.write(content)
    return path


_FILES = {"EMPTY": _file("empty.pt", b""),
          "GARBAGE": _file("garbage.pt", b"\x00\x01 not a checkpoint " * 8),
          "MISSING": os.path.join(_TMP, "missing.pt"),
          "NO_DIR": os.path.join(_TMP, "no", "such", "dir", "x.pt"), "TMP": _TMP}

IO = [  # the paths are names in the namespace, so test ids do not change between runs
    "m.load(MISSING)",
    "m.load(EMPTY)",
    "m.load(GARBAGE)",
    "m.load(TMP)",
    "m.save({'w': m.ones(2)}, NO_DIR)",
    "m.save({'w': m.ones(2)}, TMP)",
]

GROUPS = {
    "factories": FACTORIES, "elementwise": ELEMENTWISE, "reductions": REDUCTIONS,
    "movement": MOVEMENT, "indexing": INDEXING, "linalg": LINALG, "functional": FUNCTIONAL,
    "modules": MODULES, "losses": LOSSES, "optim": OPTIM, "autograd": AUTOGRAD, "data": DATA,
    "io": IO,
}
CASES = [(group, code) for group, codes in GROUPS.items() for code in codes]


# ---- running a case on each side --------------------------------------------------------

def namespace(lib) -> dict:
    """The names a case's code sees, bound to torch or shapeflow."""
    if lib.__name__ == "torch":
        import torch.utils.data as data
    else:
        import shapeflow.data as data
    return {"m": lib, "F": lib.nn.functional, "nn": lib.nn, "optim": lib.optim,
            "data": data, "np": np, **_FILES}


def run(lib, code: str):
    """('ok', value) or ('raised', exception) of code with lib's names."""
    env = namespace(lib)
    *body, last = code.split("\n")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for line in body:
                exec(line, env)
            return "ok", eval(last, env)
    except Exception as e:  # noqa: BLE001 - the point is to see what was raised
        return "raised", e


def plain(value):
    """A comparable form of a result: arrays (dtype by name), numbers, nested tuples, or a
    type name for anything else (a module, an optimizer: returning one is all we compare)."""
    if hasattr(value, "detach") and hasattr(value, "shape"):
        v = value.detach()
        if str(getattr(v, "device", "cpu")) == "meta":
            return ("meta", tuple(v.shape), str(v.dtype).split(".")[-1])
        return np.asarray(v.numpy())
    if isinstance(value, (tuple, list)):
        return tuple(plain(v) for v in value)
    if isinstance(value, (bool, int, float, np.generic)):
        return value
    if hasattr(value, "__len__") and type(value).__name__ in ("Size", "Shape"):
        return tuple(value)
    return "<" + type(value).__name__ + ">"


def same(a, b) -> bool:
    """Equal values: arrays of the same shape and dtype, equal with NaN where NaN."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape or a.dtype.name != b.dtype.name:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
                    or np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str)  # both returned some object
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return a == b


BUILTINS = (IndexError, KeyError, ValueError, TypeError, NotImplementedError, AssertionError,
            FileNotFoundError, IsADirectoryError, EOFError, OSError, AttributeError,
            RuntimeError)


def builtin_kind(err: BaseException) -> type:
    """The most specific of the common builtin classes err is an instance of."""
    for kind in BUILTINS:
        if isinstance(err, kind):
            return kind
    return Exception


def classify(code: str) -> tuple[str, str]:
    """(outcome, detail). torch raised: 'right' (a ShapeflowError), 'other' (another
    exception) or 'silent' (a value); torch returned: 'same', 'different' or 'raised'."""
    import torch

    import shapeflow as sf

    t_kind, t_val = run(torch, code)
    s_kind, s_val = run(sf, code)
    if t_kind == "raised":
        if s_kind == "ok":
            return "silent", f"torch: {type(t_val).__name__}: {t_val}"[:300]
        if isinstance(s_val, sf.ShapeflowError):
            match = isinstance(s_val, builtin_kind(t_val))
            return "right", "kind matches" if match else (
                f"kind differs: torch {type(t_val).__name__}, shapeflow {type(s_val).__mro__}")
        return "other", f"{type(s_val).__name__}: {s_val}"[:300]
    if s_kind == "raised":
        return "raised", f"{type(s_val).__name__}: {s_val}"[:300]
    a, b = plain(t_val), plain(s_val)
    return ("same", "") if same(a, b) else ("different", f"torch {a!r} / shapeflow {b!r}"[:300])


def main() -> None:
    from collections import Counter

    counts: Counter = Counter()
    kinds: Counter = Counter()
    for group, code in CASES:
        outcome, detail = classify(code)
        counts[outcome] += 1
        if outcome == "right":
            kinds[detail.startswith("kind matches")] += 1
        if outcome not in ("right", "same"):
            print(f"{outcome:9} {group:11} {code!r}\n          {detail}")
    raised = counts["right"] + counts["other"] + counts["silent"]
    returned = counts["same"] + counts["different"] + counts["raised"]
    print(f"\n{len(CASES)} cases. PyTorch raises in {raised}: right class {counts['right']} "
          f"(builtin kind as PyTorch's in {kinds[True]}), other exception {counts['other']}, "
          f"silently accepted {counts['silent']}. PyTorch returns in {returned}: same value "
          f"{counts['same']}, different value {counts['different']}, raised "
          f"{counts['raised']}.")


if __name__ == "__main__":
    main()
