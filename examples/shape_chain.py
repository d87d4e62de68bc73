"""The shape chain: a model's shapes, parameters and saved bytes before any data exists.

Run it: python examples/shape_chain.py
"""

import shapeflow as sf
from shapeflow import nn

vit = sf.models.ViT(image_size=32, patch_size=4, in_channels=3, num_classes=10, dim=64,
                    depth=2, heads=4)

# One call on the meta device with a symbolic batch B: nothing is computed.
s = sf.summary(vit, sf.empty("B", 3, 32, 32, device="meta"))
print(s.chain())

# every module: input and output shapes, parameters, bytes kept for backward
print(s)

# The same summary at a batch of 128, with numbers where B was.
at = s.subs(B=128)
print("kept for backward at B=128:", sf.memory.format_bytes(at.total_saved_bytes))


# A contract: the shapes a function promises, checked at every call.
@sf.shapes("x: B L D, mask: B L -> B L D")
def masked(x, mask):
    return x.masked_fill(~mask[..., None], 0.0)


x = sf.randn(2, 5, 8)
print(masked(x, sf.ones(2, 5, dtype=sf.bool)).shape)  # [2, 5, 8]
try:
    masked(x, sf.ones(2, 4, dtype=sf.bool))  # L is 5 in x and 4 in mask
except sf.ShapeError as err:
    print("ShapeError:", err.message)

# A model built wrong says where it broke and what led there.
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(128, 10)).to("meta")
try:
    model(sf.empty("B", 32, device="meta"))
except sf.ShapeError as err:
    print(err)
