"""ZeRO checkpoints: a state saved on N ranks resumes bit for bit on N, fewer or more ranks.

Every rank computes the same gradients, small dyadic numbers (c * p summed), so averaging
them over any number of ranks is exact: runs on 1, 2 and 3 ranks are comparable bit for bit.
The groups have 1, 2, 3, 4 and 16 elements: per rank slices of one element, padding, and a
rank that owns padding only, on 2 and on 3 ranks.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.distributed.mpi_launch import run_ranks

K, M = 3, 3  # steps before the checkpoint, steps after it

COMMON = f"""
    import numpy as np
    import shapeflow as sf
    import shapeflow.distributed as dist
    from shapeflow.distributed.optim import ZeroRedundancyOptimizer
    from shapeflow.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    K, M = {K}, {M}
    SHAPES = [[(1,)], [(2,)], [(1, 2), (1,)], [(2, 2)], [(3, 4), (4,)]]
    CASES = [(stage, opt) for stage in (1, 2) for opt in ("adamw", "sgd")]

    class Net(sf.nn.Module):
        def __init__(self, seed):
            super().__init__()
            sf.manual_seed(seed)
            self.ps = sf.nn.ParameterList([sf.nn.Parameter(sf.randn(*s, dtype=sf.float64))
                                           for g in SHAPES for s in g])

        def forward(self, cs):
            return sum((c * p).sum() for c, p in zip(cs, self.ps))

    def grads(step):  # the same on every rank, exact under any averaging
        rng = np.random.default_rng(100 + step)
        return [sf.tensor(rng.integers(-8, 9, s) / 4) for g in SHAPES for s in g]

    def zero(model, stage, opt):
        it = iter(model.ps)
        groups = [{{"params": [next(it) for _ in g], "lr": 0.01 * (i + 1)}}
                  for i, g in enumerate(SHAPES)]
        if opt == "adamw":
            return ZeroRedundancyOptimizer(groups, sf.optim.AdamW, stage=stage,
                                           weight_decay=0.1, amsgrad=True)
        return ZeroRedundancyOptimizer(groups, sf.optim.SGD, stage=stage, momentum=0.9,
                                       weight_decay=0.01)

    def train(model, opt, stage, steps):
        run = DDP(model) if stage == 1 else model
        for s in steps:
            opt.zero_grad()
            run(grads(s)).backward()
            opt.step()

    def resume(path, stage, opt, ref):
        ckpt = sf.load(path)
        model = Net(seed=7)
        model.load_state_dict(ckpt["model"])
        z = zero(model, stage, opt)
        z.load_state_dict(ckpt["optim"])
        train(model, z, stage, range(K, K + M))
        got = [p.detach().numpy() for p in model.ps]
        drift = max(float(np.abs(a - b).max()) for a, b in zip(got, ref))
        return drift, all(np.array_equal(a, b) for a, b in zip(got, ref))

    def reference(src, stage, opt):
        with np.load(f"ref_{{src}}_{{stage}}_{{opt}}.npz") as f:
            return [f[f"p{{i}}"] for i in range(len(f.files))]

    def save_and_resume():
        '''Train K steps, checkpoint, go on M steps; a fresh model resumed on n ranks too.'''
        bad = []
        for stage, opt in CASES:
            model = Net(seed=r)
            z = zero(model, stage, opt)
            try:
                z.state_dict()
            except dist.DistributedError as e:
                assert "consolidate_state_dict" in str(e), e
            else:
                raise AssertionError("state_dict() before consolidate_state_dict()")
            train(model, z, stage, range(K))
            buffers = 3 if opt == "adamw" else 1  # exp_avg, exp_avg_sq, max_exp_avg_sq
            per_rank = sum(-(-sum(np.prod(s) for s in g) // n) for g in SHAPES)
            assert z.state_bytes() == buffers * per_rank * 8, (z.state_bytes(), per_rank)
            z.consolidate_state_dict(to=0)
            path = f"ckpt_{{n}}_{{stage}}_{{opt}}.safetensors"
            if r == 0:
                sf.save({{"model": model.state_dict(), "optim": z.state_dict()}}, path)
            else:
                try:
                    z.state_dict()
                except dist.DistributedError:
                    pass
                else:
                    raise AssertionError("state_dict() on a rank other than to=0")
            dist.barrier()
            train(model, z, stage, range(K, K + M))
            ref = [p.detach().numpy().copy() for p in model.ps]
            if r == 0:
                np.savez(f"ref_{{n}}_{{stage}}_{{opt}}.npz",
                         **{{f"p{{i}}": a for i, a in enumerate(ref)}})
            drift, same = resume(path, stage, opt, ref)
            print(f"rank {{r}}: {{n}} -> {{n}} stage {{stage}} {{opt}}: drift {{drift:.3g}}",
                  flush=True)
            if not same:
                bad.append((n, stage, opt, drift))
        return bad

    def load_from(sources):
        '''Resume each checkpoint saved on `sources` ranks here, on n ranks.'''
        bad = []
        for src in sources:
            for stage, opt in CASES:
                ref = reference(src, stage, opt)
                drift, same = resume(f"ckpt_{{src}}_{{stage}}_{{opt}}.safetensors", stage, opt,
                                     ref)
                print(f"rank {{r}}: {{src}} -> {{n}} stage {{stage}} {{opt}}: "
                      f"drift {{drift:.3g}}", flush=True)
                if not same:
                    bad.append((src, stage, opt, drift))
        return bad
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Saved on 2 and on 3 ranks; resumed on 1, 2 and 3 (three launches, shared by the tests)."""
    tmp_path = tmp_path_factory.mktemp("zero_ckpt")
    out = []
    for n, code in ((2, "bad = save_and_resume()"),
                    (3, "bad = load_from([2]) + save_and_resume()"),
                    (1, "bad = load_from([2, 3])")):
        proc = run_ranks(tmp_path, COMMON + f"""
    {code}
    assert not bad, bad
    """, n=n, timeout=120, check=False)
        out.append((proc.returncode, proc.stdout + proc.stderr))
    return tmp_path, out


def test_checkpoints_resume_bit_for_bit_on_any_number_of_ranks(runs):
    """Each resumed run (2 -> 2, 1, 3 and 3 -> 3, 1 ranks) continues the saved one exactly."""
    _, out = runs
    assert all(rc == 0 for rc, _ in out), "\n".join(text for _, text in out)


def test_the_consolidated_state_is_pytorchs_per_parameter_format(runs):
    """The state saved on 2 ranks loads into torch.optim.AdamW and continues the same run."""
    torch = pytest.importorskip("torch")
    import shapeflow as sf

    tmp_path, _ = runs
    ckpt = sf.load(tmp_path / "ckpt_2_1_adamw.safetensors")
    with np.load(tmp_path / "ref_2_1_adamw.npz") as f:
        ref = [f[f"p{i}"] for i in range(len(f.files))]
    names = sorted(ckpt["model"], key=lambda k: int(k.split(".")[-1]))
    params = [torch.tensor(ckpt["model"][k].numpy(), requires_grad=True) for k in names]
    saved = ckpt["optim"]
    groups = [{**{k: v for k, v in g.items() if k in ("lr", "betas", "eps", "weight_decay",
                                                         "amsgrad")},
               "params": [params[int(i)] for i in g["params"]]} for g in saved["param_groups"]]
    opt = torch.optim.AdamW(groups)
    state = {int(i): {k: torch.tensor(np.asarray(v.numpy() if hasattr(v, "numpy") else v))
                      for k, v in st.items()} for i, st in saved["state"].items()}
    opt.load_state_dict({"state": state, "param_groups": [
        {**{k: v for k, v in g.items() if k != "params"}, "params": [int(i) for i in g["params"]]}
        for g in saved["param_groups"]]})
    shapes = [tuple(p.shape) for p in params]
    for s in range(K, K + M):
        rng = np.random.default_rng(100 + s)
        for p, shape in zip(params, shapes):
            p.grad = torch.tensor(rng.integers(-8, 9, shape) / 4)
        opt.step()
    for p, a in zip(params, ref):
        np.testing.assert_allclose(p.detach().numpy(), a, rtol=1e-12, atol=1e-15)
