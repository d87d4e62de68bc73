"""Tensors: dtypes and devices, the graph forward records, and backward's gradients.

Run it: python examples/tensor_basics.py
"""

import shapeflow as sf

# A tensor has data, a dtype and a device, as in PyTorch.
x = sf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
print(x.dtype, x.device, x.shape)  # float32 cpu [2, 2]

# Operations record the graph as they run; backward applies the chain rule through it.
w = sf.ones(2, 3, requires_grad=True)
y = (x @ w).relu().sum()
print("y =", y.item())  # y = 30.0
y.backward()
print("dy/dx =", x.grad.tolist())  # dy/dx = [[3.0, 3.0], [3.0, 3.0]]
print("dy/dw =", w.grad.tolist())  # dy/dw = [[4.0, 4.0, 4.0], [6.0, 6.0, 6.0]]

# Views share storage: changing one changes the other.
a = sf.arange(6.0).reshape(2, 3)
row = a[1]
row[0] = 100.0
print(a.tolist())  # [[0.0, 1.0, 2.0], [100.0, 4.0, 5.0]]

# The meta device has shapes and dtypes, no data: a batch of 64 ImageNet images costs nothing.
m = sf.ones(64, 3, 224, 224, device="meta")
patches = m.reshape(64, 3, 14, 16, 14, 16).permute(0, 2, 4, 1, 3, 5).flatten(3)
print(patches.shape, patches.device)  # [64, 14, 14, 768] meta

# A dim can be a name: "B" stays a symbol through every op.
s = sf.empty("B", 3, 32, 32, device="meta").flatten(1)
print(s.shape)  # [B, 3072]

# Errors say what kind of problem it is, where, and what to try.
try:
    sf.ones(2, 3) @ sf.ones(2, 3)
except sf.ShapeError as err:
    print(type(err).__name__, "-", err.message)
