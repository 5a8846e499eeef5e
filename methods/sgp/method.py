"""Stochastic Gradient Push (Assran et al., ICML 2019) on the one-peer directed exponential graph, as the reference
implementation runs it.

Decent-DP's third baseline in its strong-scaling figure ("SGP (Exp)", Wang et al., ICLR 2025, Fig. 6). The
reference code (facebookresearch/stochastic_gradient_push @ e682064, ``gossip/distributed.py`` and
``gossip_sgd.py``), restated here:

* **who gossips** (``level: node``, the default): with several GPUs per node (``nprocs_per_node > 1``) the
  wrapper divides rank and world size by the GPUs per node, so the graph's vertices are *nodes*; only each
  node's first process gossips (``process_rank % nprocs_per_node == 0``). The backward hook all-reduces the
  gradients inside the node (``local_node_group``, queued to run after backward), and every forward starts by
  broadcasting the node leader's parameters to the node (``_sync_params_multiprocess``). ``level: device``
  makes every rank a vertex (one GPU per node, ``nprocs_per_node = 1``).
* **what overlaps** (synchronous SGP, ``overlap=False``, the reference's job scripts): after the optimizer step
  ``transfer_params`` hands the parameters to the gossip thread; the next forward's pre-hook waits for it
  (``_query_gossip_queue(non_blocking=False)`` with ``synch_freq = 0``). So the push overlaps nothing but the
  loop's own overhead: a step costs compute + intra-node gradient all-reduce + push + intra-node broadcast.
* **the push**: each vertex sends half its push-sum numerator and weight to the single out-neighbour
  ``(i + 2^r) mod N``, ``r = k mod log2 N`` (graph type 0, one peer per iteration), and keeps the other half. On
  this graph every vertex has exactly one in-neighbour, so the push-sum weights stay 1 and de-biasing is the
  identity: ``x_i <- (x_i + x_{i-2^r}) / 2``. A directed send is a non-blocking two-rank broadcast from the
  sender, so a leader's outgoing and incoming messages share its NIC as the hardware would.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from distrepro import api


def _default_optimizer() -> api.OptimizerConfig:
    # the All-Reduce Adam recipe of the Decent-DP Transformer experiments (lr 7e-4, betas (0.9, 0.98), eps 1e-9)
    return api.OptimizerConfig(name="adam", lr=7e-4, betas=(0.9, 0.98), eps=1e-9)


def out_peer(vertex: int, vertices: int, step: int) -> int:
    """The out-neighbour of ``vertex`` at iteration ``step`` (0-based) on the one-peer exponential graph."""
    k = int(math.log2(vertices))
    return (vertex + 2 ** (step % k)) % vertices


class Params(api.MethodParams):
    optimizer: api.OptimizerConfig = _default_optimizer()
    #: ``node``: the reference with several GPUs per node (nodes gossip, GPUs of a node all-reduce gradients);
    #: ``device``: every rank is a vertex of the graph
    level: Literal["node", "device"] = "node"


def _power_of_two(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


class Method(api.Method[Params]):
    synchronous = True
    exchange = "neighbour"  # push-sum to one out-peer of the exponential graph per iteration
    accepts_optimizer = True

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        world_size = cluster.world_size
        if self.params.level == "device":
            if world_size < 2 or not _power_of_two(world_size):
                return f"the one-peer exponential graph needs a power-of-two world size >= 2, not {world_size}"
            return None
        sizes = set(cluster.ranks_per_node)
        if len(sizes) != 1:
            return f"node-level SGP needs the same number of ranks on every node, not {sorted(sizes)}"
        if not _power_of_two(cluster.num_nodes):
            return f"the one-peer exponential graph over nodes needs a power-of-two node count, not {cluster.num_nodes}"
        return None

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.build_optimizer(ctx.model.parameters(), self.params.optimizer)
        self.groups: dict[tuple[int, ...], api.Group] = {}
        self.step = 0
        if self.params.level == "node":
            node = ctx.cluster.node_of_rank[ctx.rank]
            self.local = ctx.cluster.ranks_on(node)
            self.leaders = tuple(ctx.cluster.ranks_on(j)[0] for j in range(ctx.cluster.num_nodes))
            self.vertex = node
        else:
            self.local = (ctx.rank,)
            self.leaders = tuple(range(ctx.world_size))
            self.vertex = ctx.rank

    def _group(self, ctx: api.WorkerContext, ranks: tuple[int, ...]) -> api.Group:
        key = tuple(sorted(ranks))
        if key not in self.groups:
            self.groups[key] = ctx.comm.new_group(key)
        return self.groups[key]

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        params = list(ctx.model.parameters())
        node_group = self._group(ctx, self.local) if len(self.local) > 1 else None
        if node_group is not None:  # the backward hook: gradients all-reduced inside the node, blocking
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            ctx.comm.all_reduce_coalesced(grads, op="mean", group=node_group)
            for p, g in zip(params, grads, strict=True):
                p.grad = g
        self.opt.step()
        step = self.step
        self.step += 1
        leader = self.local[0]
        vertices = len(self.leaders)
        if ctx.rank == leader and vertices > 1:
            self._push(ctx, params, step, vertices)
        if node_group is not None:  # the next forward's _sync_params_multiprocess: the leader's parameters
            with torch.no_grad():
                vec = parameters_to_vector(params)
                ctx.comm.broadcast(vec, src=leader, group=node_group)
                vector_to_parameters(vec, params)

    def _push(self, ctx: api.WorkerContext, params: list[torch.nn.Parameter], step: int, vertices: int) -> None:
        """Send to the out-peer vertex's leader, receive from the in-peer's, average (push-sum, weights 1)."""
        me = self.vertex
        send_to = self.leaders[out_peer(me, vertices, step)]
        recv_from = self.leaders[(2 * me - out_peer(me, vertices, step)) % vertices]  # me - 2^k
        r = ctx.rank
        with torch.no_grad():
            mine = parameters_to_vector(params)
            inbox = torch.empty_like(mine)
            # (group, src) in the same order on both members of a group: two pushes on one pair (2^k = N/2)
            # are then matched in order
            calls = sorted(
                [((r, send_to), r, mine), ((recv_from, r), recv_from, inbox)], key=lambda c: (sorted(c[0]), c[1])
            )
            works: list[Any] = []
            for ranks, src, tensor in calls:
                works.append(ctx.comm.broadcast(tensor, src=src, group=self._group(ctx, ranks), async_op=True))
            for work in works:
                work.wait()
            vector_to_parameters(mine.add_(inbox).mul_(0.5), params)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """Per step: the intra-node gradient all-reduce and parameter broadcast (node level) and one directed push
        of the parameters (a message between two ranks, across nodes)."""
        comm = [api.Transfer("p2p", setting.model_bytes)]
        if params.level == "node" and setting.layout is not None and max(setting.layout.ranks_per_node) > 1:
            comm += [
                api.Transfer("all_reduce", setting.model_bytes, participants="node"),
                api.Transfer("broadcast", setting.model_bytes, participants="node"),
            ]
        return api.MethodPlan(transfers=tuple(comm))
