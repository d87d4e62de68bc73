"""Every name issue 17 lists for a ported PyTorch program exists, where PyTorch has it."""

import pytest

import shapeflow as sf

FUNCTIONS = [
    "sort", "argsort", "topk", "kthvalue", "msort", "unique", "unique_consecutive", "searchsorted",
    "bucketize", "histc", "nonzero", "masked_select", "take", "take_along_dim", "argwhere",
    "multinomial", "bernoulli", "normal", "poisson", "randint_like", "scatter", "scatter_add",
    "scatter_reduce", "index_add", "index_copy", "index_fill", "erf", "erfc", "erfinv", "lgamma",
    "digamma", "logit", "xlogy", "lerp", "hypot", "atan2", "nan_to_num", "clamp", "frac",
    "logaddexp", "sinc", "cumprod", "cummax", "cummin", "logcumsumexp", "diff", "addmm", "baddbmm",
    "addcmul", "addcdiv", "vdot", "cross", "kron", "cdist", "tensordot", "trace", "diag",
    "diag_embed", "diagonal", "roll", "rot90", "repeat_interleave", "tile", "meshgrid",
    "broadcast_tensors", "block_diag", "cartesian_prod", "allclose", "isclose", "equal",
    "from_dlpack"
]
TENSOR_METHODS = [
    "uniform_", "normal_", "exponential_", "bernoulli_", "scatter_", "scatter_add_", "index_add_",
    "index_copy_", "index_fill_", "index_put_", "masked_scatter_", "addcmul_", "addcdiv_",
    "expand_as", "t", "is_contiguous", "unfold", "new_empty", "apply_", "__dlpack__",
    "__dlpack_device__"
]
LINALG = [
    "norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky", "qr",
    "svd", "eigh", "pinv"
]
NN = [
    "BCELoss", "KLDivLoss", "SmoothL1Loss", "HuberLoss", "CosineEmbeddingLoss",
    "MarginRankingLoss", "LeakyReLU", "ELU", "Mish", "Softplus", "Hardswish", "Hardsigmoid",
    "PReLU", "LogSoftmax", "Softmin", "ParameterList", "ParameterDict"
]
FUNCTIONAL = [
    "cosine_similarity", "pairwise_distance", "logsigmoid", "glu", "hardtanh", "mish", "softsign"
]
OPTIM = [
    "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "LBFGS"
]
SCHEDULERS = [
    "OneCycleLR", "ReduceLROnPlateau", "CosineAnnealingWarmRestarts", "CyclicLR", "PolynomialLR"
]
UTILS_DATA = [
    "Dataset", "IterableDataset", "TensorDataset", "DataLoader", "random_split", "Subset",
    "ConcatDataset", "default_collate", "RandomSampler", "DistributedSampler"
]


@pytest.mark.parametrize("where,names", [
    ("sf", FUNCTIONS), ("sf.Tensor", TENSOR_METHODS), ("sf.linalg", LINALG), ("sf.nn", NN),
    ("sf.nn.functional", FUNCTIONAL), ("sf.optim", OPTIM),
    ("sf.optim.lr_scheduler", SCHEDULERS), ("sf.utils.data", UTILS_DATA),
    ("sf.autograd.functional", ["jacobian", "hessian", "vjp", "jvp"]),
])
def test_the_listed_names_exist(where, names):
    import shapeflow.utils.data  # noqa: F401  (a submodule, as torch.utils.data)

    space = eval(where, {"sf": sf})
    assert [n for n in names if not callable(getattr(space, n, None))] == []


def test_the_names_that_look_like_pytorchs_work_like_it():
    """A few behave as their names promise: the names are not placeholders."""
    import shapeflow.utils.checkpoint as uc
    import shapeflow.utils.data as ud

    assert sf.topk(sf.tensor([3.0, 1.0, 2.0]), 2).values.tolist() == [3.0, 2.0]
    assert sf.arange(6.0).unfold(0, 2, 1).shape == (5, 2)
    assert sf.optim.Adam([sf.zeros(1, requires_grad=True)], amsgrad=True).defaults["amsgrad"]
    assert len(ud.TensorDataset(sf.ones(3, 2))) == 3 and callable(uc.checkpoint)
    assert issubclass(sf.autograd.Function, object) and hasattr(sf.autograd.Function, "apply")
