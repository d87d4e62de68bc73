"""AsyncEngine's handoff to the event loop (the engine posts a step's outputs once the loop
took the last step's): every token reaches the loop, in order, one step's at a time."""

from __future__ import annotations

import asyncio

import numpy as np

import shapeflow as sf
from shapeflow.models import GPT
from shapeflow.serve import Engine, SamplingParams
from shapeflow.serve import async_engine as ae


def test_tokens_arrive_one_step_at_a_time():
    sf.manual_seed(0)
    m = GPT(vocab_size=30, block_size=64, n_layer=1, n_head=2, n_embd=16).eval()
    engine = ae.AsyncEngine(Engine(m))

    async def main():
        engine.start()
        params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
        subs = [engine.submit([[1 + i, 2, 3]], [params], f"r{i}") for i in range(3)]
        for sub in subs:
            await sub.ready()
        async def drain(sub):
            toks = []
            async for _, out in sub:
                toks.append(list(out.outputs[0].delta_token_ids))
            sub.close()
            return toks
        got = await asyncio.gather(*(drain(s) for s in subs))
        await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)
        return got

    got = asyncio.run(main())
    for i, deltas in enumerate(got):
        flat = [t for d in deltas for t in d]
        want = m.generate(sf.tensor(np.array([[1 + i, 2, 3]])), 12, do_sample=False)
        assert flat == want.numpy()[0, 3:].tolist()
        assert all(len(d) == 1 for d in deltas)  # one token per step, none merged
