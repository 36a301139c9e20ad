"""puaudit_runtime.hlo: collectives of compiled HLO, attributed to loops and branches."""

from __future__ import annotations

from puaudit_runtime.hlo import comm_summary, group_size, loop_traffic, shape_bytes, split_instruction
from tests.multidevice import run_devices

# A hand-written module: one all-reduce in the entry, a while loop whose body has an all-reduce and
# a conditional with an all-gather in one branch, and an inner while with its own all-reduce.
HLO = """HloModule toy

%cond.1 (p: (s32[], f32[4])) -> pred[] {
  ROOT %lt = pred[] compare(s32[] %a, s32[] %b), direction=LT
}

%inner_body (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %ar3 = f32[2]{0} all-reduce(f32[2]{0} %x), replica_groups={{0,1},{2,3}}, to_apply=%add
  ROOT %t = (s32[], f32[2]) tuple(s32[] %i, f32[2] %ar3)
}

%fallback (p: f32[4]) -> f32[4] {
  ROOT %ag = f32[4]{0} all-gather(f32[1]{0} %x), replica_groups=[1,4]<=[4], dimensions={0}
}

%keep (p: f32[4]) -> f32[4] {
  ROOT %c = f32[4]{0} copy(f32[4]{0} %p)
}

%body.1 (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %ar2 = f32[4]{0} all-reduce(f32[4]{0} %x), replica_groups={{0,1,2,3}}, to_apply=%add
  %s = f32[] all-reduce(f32[] %y), replica_groups={{0,1,2,3}}, to_apply=%add
  %cnd = f32[4]{0} conditional(pred[] %p, f32[4] %ar2, f32[4] %ar2), branch_computations={%fallback, %keep}
  %w2 = (s32[], f32[2]) while((s32[], f32[2]) %init), condition=%cond.1, body=%inner_body
  ROOT %t = (s32[], f32[4]) tuple(s32[] %i, f32[4] %cnd)
}

ENTRY %main (x: f32[8]) -> f32[4] {
  %ar1 = (f32[3]{0}, s64[]) all-reduce(f32[3]{0} %x, s64[] %n), replica_groups={{0,1,2,3}}, to_apply=%add
  %w1 = (s32[], f32[4]) while((s32[], f32[4]) %init), condition=%cond.1, body=%body.1
  ROOT %r = f32[4]{0} get-tuple-element((s32[], f32[4]) %w1), index=1
}
"""


def test_shapes_groups_and_instructions_parse():
    assert shape_bytes("f32[128,4]{1,0}") == 2048 and shape_bytes("(f32[3], s64[])") == 20
    assert shape_bytes("bf16[]") == 2 and shape_bytes("pred[7]") == 7
    assert group_size("replica_groups={{0,1},{2,3}}, to_apply=%add") == 2
    assert group_size("replica_groups=[2,4]<=[8]") == 4 and group_size("channel_id=1") is None
    assert split_instruction("(f32[3], s64[]) all-reduce(f32[3] %x), x=1")[:2] == ("(f32[3], s64[])", "all-reduce")
    assert split_instruction("f32[4]{0} copy(f32[4] %p)")[:2] == ("f32[4]{0}", "copy")


def test_collectives_land_in_their_loops_and_branches():
    loops = loop_traffic(HLO)
    assert sorted(loops) == [0, 1, 2]
    entry, outer, inner = loops[0], loops[1], loops[2]
    assert (entry.direct_bytes, entry.direct_ops, entry.direct_multi) == (20, 1, 1)
    assert (outer.parent, outer.depth, outer.direct_bytes, outer.direct_ops, outer.direct_multi) == (0, 1, 20, 2, 1)
    assert (outer.branch_bytes, outer.branch_ops) == (16, 1)  # the all-gather of the fallback branch
    assert (inner.parent, inner.depth, inner.direct_bytes) == (1, 2, 8) and inner.groups == [2]
    assert outer.groups == [4]


def test_the_iteration_is_the_deepest_loop_with_collectives():
    s = comm_summary(HLO)
    assert (s.per_iter, s.per_iter_ops, s.depth, s.loops) == (8, 1, 2, 2)
    assert s.per_epoch == 36 and s.once == 20 and s.per_iter_fallback == 0
    empty = "HloModule empty\n\nENTRY %m (x: f32[2]) -> f32[2] {\n  ROOT %x = f32[2] copy(%x)\n}\n"
    assert comm_summary(empty).loops == 0 and comm_summary(empty).per_iter == 0


_COMPILED = """
from functools import partial
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, PartitionSpec as P
from puaudit_runtime.hlo import comm_summary

mesh = Mesh(np.array(jax.devices()), ("u",))

@jax.jit
@partial(jax.shard_map, mesh=mesh, in_specs=(P("u"),), out_specs=P())
def f(x):
    first = jax.lax.psum(x[:2], "u")
    body = lambda i, c: c + jax.lax.psum(x[:3] * i, "u").sum()
    return jax.lax.fori_loop(0, 5, body, first.sum())

s = comm_summary(f.lower(jnp.ones(16, jnp.float32)).compile().as_text())
emit(dict(per_iter=s.per_iter, once=s.once, ops=s.per_iter_ops, groups=s.groups, depth=s.depth))
"""


def test_a_real_compiled_program_on_four_devices():
    """psum of 3 floats per trip of a fori_loop, 2 floats once: 12 and 8 bytes per device."""
    res = run_devices(_COMPILED, 4, timeout=120)
    assert res == dict(per_iter=12, once=8, ops=1, groups=[4], depth=1)
